// case_process.h — runs each case in its own process (or, for a multi-rank case, in a launcher
// job: mpirun or srun starting one process per rank) so that a case that crashes, aborts, runs
// out of memory or hangs is recorded as such and the suite goes on.
//
// The parent (`dlhost run`) starts `dlhost case-worker JOB_JSON`, directly or under the
// launcher. Workers talk back on stdout with marker lines that survive mpirun/srun forwarding
// and need no shared filesystem: rank 0's record, every rank's step progress (to name a rank
// that hangs), and a failing rank's reason. The child gets its own process group (so the
// launcher and its ranks die with it) and dies with the parent (PR_SET_PDEATHSIG); each worker
// also dies with its own parent. The parent keeps the tail of the children's own output (the
// libraries', the launcher's) for the record and shows it live only when asked; dlhost's own log
// lines, which the workers send tagged (case_output.h), always reach the console. Not
// thread-safe: one case at a time.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "isolate/case_job.h"
#include "isolate/runtime_roles.h"
#include "launch/launchers.h"

namespace dlhost {

// What a case may use; 0 = no limit.
struct CaseLimits {
  double timeout_s = 0;       // when the process is killed
  double case_timeout_s = 0;  // the case's own timeout, for the message
  int64_t memory_limit_mb = 0;
  double kill_grace_s = 5;                 // between SIGTERM and SIGKILL
  std::vector<std::string> launcher_args;  // from the command line, after the suite's
  // Where the lines for the console go (dlhost's own log lines from the workers, and the
  // libraries' output when shown); null: this process's stderr.
  std::function<void(const std::string& line)> to_console;
  // The libraries' own output (and the launcher's) live on the console, not only in the record's
  // stderr_tail (-v, --log-level debug or trace).
  bool show_library_output = false;
  // Processes of other roles than the ranks that the case's runtime needs (a parameter server, a
  // scheduler: launch/launchers.h's RoleSpec), started beside the ranks with the rendezvous
  // store's variables and ended with them (launch/roles.h). One that fails while the ranks run
  // ends the case, named: CRASHED when a signal killed it, else FAILED. Empty for today's cases.
  std::vector<RoleSpec> extra_roles;
  // The extra roles of the case's tool runtime (ABI 1.5's runtime_roles), which the case plans
  // once its test hosts are made (isolate/runtime_roles.h) and starts as extra roles.
  CaseRuntimeRoles runtime_roles;
};

// The command that starts the case: the worker itself, or the launcher with one worker per rank.
// Throws Error (INVALID_ARGUMENT) for a launcher that cannot start the case.
std::vector<std::string> case_command(const std::string& exe, const CaseJob& job,
                                      const CaseLimits& limits, int host_cores);

// Runs the case and returns its record; when no record comes back, the record says why
// (CRASHED with the signal and the rank, TIMEOUT naming a rank that stopped progressing, OOM,
// FAILED with the exit code) and carries the tail of stderr. When `*interrupted` becomes true
// the case is ended and a null json returned (the case has no result).
nlohmann::ordered_json run_case_in_child(const CaseJob& job, const CaseLimits& limits,
                                         const nlohmann::ordered_json& environment,
                                         volatile const int* interrupted);

// What a line of a workers' stdout carries: the marker line at its end (from "@@DLHOST_"),
// "" for a piece of a torn marker (a rank killed mid-write leaves "@@DLH" before another rank's
// whole line), std::nullopt for a plugin's own print (kept with the libraries' output).
std::optional<std::string> marker_in(const std::string& line);

// The worker side: runs the job's case as this process's rank and reports on stdout.
int case_worker_main(const std::string& job_json);

// `launcher: local`: starts `ranks` case workers of the job with DLHOST_RANK and
// DLHOST_WORLD_SIZE set, waits for all, ends the others when one fails.
int case_local_main(int ranks, const std::string& job_json);

}  // namespace dlhost
