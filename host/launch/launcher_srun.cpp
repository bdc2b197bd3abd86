// launcher_srun.cpp — `launcher: srun` (Slurm): the job step's ranks, placed by Slurm on any node
// of the allocation; its ranks read SLURM_PROCID and the like. The shortest launcher: an example
// of the file a new one is.
#include <algorithm>

#include "launch/launchers.h"

namespace dlhost {

namespace {

class SrunLauncher : public Launcher {
 public:
  std::string name() const override { return "srun"; }
  std::string unavailable_reason() const override {
    return program_unavailable("srun", "Slurm's slurm-client, inside an allocation");
  }
  // Slurm places the ranks on the allocation's nodes, whatever dlhost asks.
  bool may_leave_this_machine(const PlacementFacts&) const override { return true; }
  std::vector<std::string> command(const LaunchSpec& spec,
                                   const std::vector<std::string>& rank_command,
                                   int /*host_cores*/) const override {
    std::vector<std::string> cmd{
        "srun",
        "-n",
        std::to_string(spec.ranks),
        "--mpi=pmix",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=" + std::to_string(std::max<int64_t>(spec.threads, 1))};
    if (spec.ranks_per_node)
      cmd.push_back("--ntasks-per-node=" + std::to_string(*spec.ranks_per_node));
    cmd.insert(cmd.end(), spec.extra_args.begin(), spec.extra_args.end());
    cmd.insert(cmd.end(), rank_command.begin(), rank_command.end());
    return cmd;
  }
  std::optional<RankEnv> rank_env(const EnvLookup& lookup) const override {
    return slurm_rank_env(lookup);
  }
};

}  // namespace

std::unique_ptr<Launcher> make_srun_launcher() { return std::make_unique<SrunLauncher>(); }

}  // namespace dlhost
