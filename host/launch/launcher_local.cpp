// launcher_local.cpp — `launcher: local`: dlhost starts the ranks itself on this machine
// (`dlhost case-local N JOB`, process_group.h's run_local_ranks), each told its place by
// DLHOST_RANK / DLHOST_WORLD_SIZE; for comms that bootstrap through the rendezvous store alone
// (MPI needs mpirun or srun to wire its ranks). It takes no launcher arguments.
#include <stdexcept>

#include "launch/launchers.h"

namespace dlhost {

namespace {

class LocalLauncher : public Launcher {
 public:
  std::string name() const override { return "local"; }
  std::string unavailable_reason() const override { return ""; }  // dlhost itself forks
  bool may_leave_this_machine(const PlacementFacts&) const override { return false; }
  // The ranks are started by `dlhost case-local`, which runs dlhost's own case workers only: the
  // rank command must be `DLHOST case-worker JOB`.
  std::vector<std::string> command(const LaunchSpec& spec,
                                   const std::vector<std::string>& rank_command,
                                   int /*host_cores*/) const override {
    if (rank_command.size() != 3 || rank_command[1] != "case-worker")
      throw std::invalid_argument(
          "launcher local starts dlhost's own case workers only (DLHOST case-worker JOB)");
    return {rank_command[0], "case-local", std::to_string(spec.ranks), rank_command[2]};
  }
  std::optional<RankEnv> rank_env(const EnvLookup& lookup) const override {
    return local_rank_env(lookup);
  }
};

}  // namespace

std::unique_ptr<Launcher> make_local_launcher() { return std::make_unique<LocalLauncher>(); }

}  // namespace dlhost
