// launcher.h — the command line that starts a job's ranks under a launcher (mpirun or srun),
// built once for `dlhost run`'s multi-rank cases and `dlhost comm-bench --interconnect`, and the
// variables every rank is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlhost {

// What the launcher is asked to start.
struct LaunchSpec {
  std::string launcher = "mpirun";  // mpirun or srun
  int64_t ranks = 1;
  int64_t threads = 1;         // each rank's threads (srun's --cpus-per-task; oversubscription)
  bool oversubscribe = false;  // asked for (the case key); also implied by too few cores
  std::optional<int64_t> ranks_per_node;
  // A rendezvous store is served to the ranks (served_store.h): DLHOST_STORE is passed on.
  bool store = false;
  std::vector<std::string> extra_args;  // the launcher's own, after dlhost's
};

// The variables mpirun passes on to every rank when this process has them (srun and dlhost's
// fork launcher pass the whole environment on): the log level, the plugin path, the test hook
// DLHOST_DUMP_PARAMS_DIR, OpenMP's wait policy, and the run's progress channel
// (DLHOST_PROGRESS, console/progress_channel.h's kProgressVariable).
const std::vector<std::string>& forwarded_variables();

// `launcher ... rank_command...`: mpirun with the ranks, root allowed, no core binding (ranks set
// their own threads), --oversubscribe when asked for or when ranks x threads outnumber
// `host_cores` (the rule of `dlhost run`, documented in docs/suite-format.md; comm-bench's own
// rule, ranks > cores, was the same with one thread and without the key), --map-by ppr:N:node
// for ranks_per_node, -x for the forwarded variables; or srun with the ranks, PMIx, the job
// killed on a bad exit, --cpus-per-task and --ntasks-per-node. Throws dlhost::Error
// (INVALID_ARGUMENT) for another launcher.
std::vector<std::string> launcher_command(const LaunchSpec& spec,
                                          const std::vector<std::string>& rank_command,
                                          int host_cores);

}  // namespace dlhost
