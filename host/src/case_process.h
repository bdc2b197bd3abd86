// case_process.h — runs each case in a child process so that a case that crashes, aborts, runs
// out of memory or hangs is recorded as such and the suite goes on.
//
// The parent (`dlhost run`) re-executes the dlhost binary with the hidden `case-worker`
// subcommand, hands it the case as a JSON job file, and reads back the record the worker wrote.
// The child gets its own process group (so a launcher and its ranks die with it), dies with the
// parent (PR_SET_PDEATHSIG), and may get an address-space limit. The parent keeps the tail of
// the child's stderr, forwarding it live. Not thread-safe: one case at a time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner.h"

namespace dlhost {

struct CaseJob {
  CaseInput input;
  std::string suite_name, suite_path;
  std::vector<std::string> plugin_folders;  // searched by the worker, in order
};

nlohmann::ordered_json job_to_json(const CaseJob& job);
CaseJob job_from_json(const nlohmann::json& j);

// What a case may use; 0 = no limit.
struct CaseLimits {
  double timeout_s = 0;       // when the process is killed
  double case_timeout_s = 0;  // the case's own timeout, for the message
  int64_t memory_limit_mb = 0;
  double kill_grace_s = 5;  // between SIGTERM and SIGKILL
};

// Runs the case in a child and returns its record; when the child does not produce one, the
// record says why (CRASHED with the signal, TIMEOUT, OOM, FAILED with the exit code) and carries
// the tail of its stderr. Set by a signal handler: when `interrupted` becomes true the child is
// ended and the function returns a null json (the case has no result).
nlohmann::ordered_json run_case_in_child(const CaseJob& job, const CaseLimits& limits,
                                         const nlohmann::ordered_json& environment,
                                         volatile const int* interrupted);

// The worker side: reads the job file, runs the case in this process, writes the record.
int case_worker_main(const std::string& job_path, const std::string& record_path);

}  // namespace dlhost
