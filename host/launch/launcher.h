// launcher.h — the command line that starts a job's ranks under a launcher (mpirun, srun or
// dlhost's own local one), built once for `dlhost run`'s multi-rank cases and `dlhost comm-bench
// --interconnect`. Each launcher is an object of launchers.h; this is the host's error-code face
// of its command().
#pragma once

#include <string>
#include <vector>

#include "launch/launchers.h"

namespace dlhost {

// `launcher ... rank_command...` from spec.launcher's object (launchers.h): mpirun with the ranks,
// root allowed, no core binding (ranks set their own threads), --oversubscribe when asked for or
// when ranks x threads outnumber `host_cores` (the rule of `dlhost run`, documented in
// docs/suite-format.md; comm-bench's own rule, ranks > cores, was the same with one thread and
// without the key), --map-by ppr:N:node for ranks_per_node, -x for the forwarded variables; or
// srun with the ranks, PMIx, the job killed on a bad exit, --cpus-per-task and
// --ntasks-per-node; or `dlhost case-local N JOB`. Throws dlhost::Error (INVALID_ARGUMENT) for an
// unknown launcher (the message lists the known ones) or a command it cannot start.
std::vector<std::string> launcher_command(const LaunchSpec& spec,
                                          const std::vector<std::string>& rank_command,
                                          int host_cores);

}  // namespace dlhost
