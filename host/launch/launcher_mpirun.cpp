// launcher_mpirun.cpp — `launcher: mpirun` (Open MPI): the only launcher that reaches dlhost's
// test hosts (through its remote agent, test_hosts.h); its ranks read OMPI_COMM_WORLD_*.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "launch/launchers.h"

namespace dlhost {

namespace {

class MpirunLauncher : public Launcher {
 public:
  std::string name() const override { return "mpirun"; }
  std::string unavailable_reason() const override {
    return program_unavailable("mpirun", "Open MPI's openmpi-bin");
  }
  // A hostfile or host list may send the ranks elsewhere, as may a Slurm allocation it runs in.
  bool may_leave_this_machine(const PlacementFacts& f) const override {
    return f.launcher_args || f.slurm_job;
  }
  bool reaches_test_hosts() const override { return true; }
  std::vector<std::string> command(const LaunchSpec& spec,
                                   const std::vector<std::string>& rank_command,
                                   int host_cores) const override {
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
    cmd.insert(cmd.end(), spec.extra_args.begin(), spec.extra_args.end());
    cmd.insert(cmd.end(), rank_command.begin(), rank_command.end());
    return cmd;
  }
  std::optional<RankEnv> rank_env(const EnvLookup& lookup) const override {
    return openmpi_rank_env(lookup);
  }
};

}  // namespace

std::unique_ptr<Launcher> make_mpirun_launcher() { return std::make_unique<MpirunLauncher>(); }

}  // namespace dlhost
