// launcher.cpp — see launcher.h.
#include "launch/launcher.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "core/host_api.h"

namespace dlhost {

const std::vector<std::string>& forwarded_variables() {
  static const std::vector<std::string> kNames{"DLHOST_LOG_LEVEL", "DLHOST_PLUGIN_PATH",
                                               "DLHOST_DUMP_PARAMS_DIR", "OMP_WAIT_POLICY",
                                               "DLHOST_PROGRESS"};
  return kNames;
}

namespace {

std::vector<std::string> mpirun_command(const LaunchSpec& spec, int host_cores) {
  std::vector<std::string> cmd{"mpirun", "-np", std::to_string(spec.ranks)};
  // mpirun refuses root and exits 0; CI and containers run as root.
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  // Ranks set their own threads; Open MPI's default core binding would pin each to one core.
  cmd.insert(cmd.end(), {"--bind-to", "none"});
  if (spec.oversubscribe || spec.ranks * std::max<int64_t>(spec.threads, 1) > host_cores)
    cmd.push_back("--oversubscribe");
  if (spec.ranks_per_node)
    cmd.insert(cmd.end(), {"--map-by", "ppr:" + std::to_string(*spec.ranks_per_node) + ":node"});
  // In the order mpirun has always been given them: the store's variable before the progress
  // channel's.
  for (const std::string& var : forwarded_variables()) {
    if (var == "DLHOST_PROGRESS" && spec.store) cmd.insert(cmd.end(), {"-x", "DLHOST_STORE"});
    if (std::getenv(var.c_str()) != nullptr) cmd.insert(cmd.end(), {"-x", var});
  }
  return cmd;
}

}  // namespace

std::vector<std::string> launcher_command(const LaunchSpec& spec,
                                          const std::vector<std::string>& rank_command,
                                          int host_cores) {
  std::vector<std::string> cmd;
  if (spec.launcher == "mpirun") {
    cmd = mpirun_command(spec, host_cores);
  } else if (spec.launcher == "srun") {
    cmd = {"srun",
           "-n",
           std::to_string(spec.ranks),
           "--mpi=pmix",
           "--kill-on-bad-exit=1",
           "--cpus-per-task=" + std::to_string(std::max<int64_t>(spec.threads, 1))};
    if (spec.ranks_per_node)
      cmd.push_back("--ntasks-per-node=" + std::to_string(*spec.ranks_per_node));
  } else {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, "unknown launcher '" + spec.launcher + "'");
  }
  cmd.insert(cmd.end(), spec.extra_args.begin(), spec.extra_args.end());
  cmd.insert(cmd.end(), rank_command.begin(), rank_command.end());
  return cmd;
}

}  // namespace dlhost
