// process_group.h — a job's processes in a process group of their own: started (fork/exec, the
// group dying with dlhost through PR_SET_PDEATHSIG), supervised (their stdout and stderr read
// with poll() while they run), and ended with SIGTERM then SIGKILL to the whole group at the
// timeout, on interruption or when the caller says so. Also dlhost's own fork launcher: N ranks
// of one command in this process's group, each told its place by DLHOST_RANK and
// DLHOST_WORLD_SIZE. Used by `dlhost run` for each case (isolate/case_process.h) and by
// `dlhost comm-bench --interconnect`. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dlhost {

struct SpawnOptions {
  int64_t memory_limit_mb = 0;  // RLIMIT_DATA of the group's leader; 0: no limit
  char* const* env = nullptr;   // NULL-ended; NULL: this process's environment
  bool capture_output = true;   // stdout and stderr into pipes read by supervise(); else inherited
  std::string error_prefix;     // before "cannot start PROGRAM: why" when exec fails
};

struct Supervision {
  using Clock = std::chrono::steady_clock;
  double timeout_s = 0;  // from `start`; 0: none
  Clock::time_point start = Clock::now();
  double kill_grace_s = 5;                    // between SIGTERM and SIGKILL
  volatile const int* interrupted = nullptr;  // ends the group when it becomes non-zero
  std::function<void(const char*data, size_t n)> on_stdout, on_stderr;  // captured output
  // Asked every turn (about 100 ms) while the group runs: true ends it (the caller's own reasons).
  std::function<bool(Clock::time_point now)> should_stop;
  // Told once when the group is being ended: "timed out", "interrupted" or "stopped".
  std::function<void(const char* why)> on_stop;
};

struct GroupOutcome {
  int status = 0;  // the leader's, as waitpid gives it
  bool timed_out = false, interrupted = false, stopped = false;  // why it was ended, if it was
};

// The exit code a shell would give for a waitpid status: the code, or 128 + the signal.
int exit_code(int status);

class ProcessGroup {
 public:
  // Starts `cmd` (searched in PATH) as the leader of a new process group. Throws
  // std::runtime_error when the pipes or the fork fail; an exec that fails exits 127 after
  // saying why on its stderr.
  ProcessGroup(std::vector<std::string> cmd, const SpawnOptions& options);
  ~ProcessGroup();  // SIGKILL to whatever is left in the group
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  pid_t pid() const { return pid_; }

  // Waits for the leader while passing on its output; ends the group at the timeout, on
  // interruption or on should_stop. Returns once the leader has exited and its pipes are
  // drained (a grandchild that holds them open is not waited for), after SIGKILL to the group.
  GroupOutcome supervise(const Supervision& s);

 private:
  int drain(const Supervision& s, int timeout_ms);
  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;  // read ends of its stdout and stderr; -1 when closed or inherited
};

// dlhost's fork launcher: starts `ranks` copies of `cmd`, each with DLHOST_RANK and
// DLHOST_WORLD_SIZE, dying with this process; waits for all and, when one fails, ends the others
// (SIGTERM) as mpirun does, so none waits forever in a collective. A rank killed by a signal is
// named on stderr, also in mpirun's words ("process rank R with PID P on node local exited on
// signal S"), which the parent reads. Returns 0 when every rank exited 0, 1 when one failed, 2
// when a fork failed. `who` begins its messages ("case-local").
int run_local_ranks(int ranks, const std::vector<std::string>& cmd, const std::string& who);

}  // namespace dlhost
