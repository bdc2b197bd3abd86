// roles.h — the extra roles of a launch plan (launchers.h's RoleSpec: a parameter server, a
// scheduler, a Spark master) as running processes: started beside the ranks, watched while the
// ranks run, and ended with them. Each process is the leader of a process group of its own that
// dies with dlhost (PR_SET_PDEATHSIG), is told its place by DLHOST_ROLE, DLHOST_ROLE_INDEX and
// DLHOST_ROLE_COUNT, and its output goes where dlhost's goes or to a file. A role process that
// exits while the ranks still run ends the job, named ("role ps 1 (pid 123) exited with code 3");
// whatever is left at the end gets SIGTERM, then SIGKILL after the grace, and is reaped: nothing is
// left behind. Used by isolate/case_process.cpp for a case's roles. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "launch/launchers.h"

namespace dlhost {

class RoleProcesses {
 public:
  // Starts every process of `roles` (checked as check_roles does), with `env` (NULL-ended; NULL:
  // this process's environment) and each role's own variables. Throws std::invalid_argument for a
  // bad role and std::runtime_error when a fork fails, after ending what it started. A command
  // that cannot be executed exits 127, which failed() then reports.
  // `output`: a file their stdout and stderr go to (appended; for the record's stderr tail),
  // "": where dlhost's go.
  RoleProcesses(const std::vector<RoleSpec>& roles, char* const* env, double kill_grace_s = 5,
                const std::string& output = "");
  ~RoleProcesses();  // end()
  RoleProcesses(const RoleProcesses&) = delete;
  RoleProcesses& operator=(const RoleProcesses&) = delete;

  // A role process that ended on its own while the job ran.
  struct Exit {
    std::string role;
    int index = 0;
    pid_t pid = -1;
    int status = 0;        // waitpid's
    bool crashed() const;  // killed by a signal
    // "role ps 0 (pid P) exited with code 3", "... was killed by SIGKILL".
    std::string text() const;
  };
  // The first role process that has failed: exited non-zero or killed by a signal (one that exits
  // 0 has finished its part, as a scheduler does once its workers are done, and is not a
  // failure); nullopt while none has. Reaps without waiting.
  std::optional<Exit> failed();
  // The role processes still running, for a message ("ps 0 (pid 12), scheduler 0 (pid 13)"); ""
  // when none.
  std::string running() const;
  // SIGTERM to every group still running, SIGKILL after the grace, then reaps them all.
  void end();

  size_t size() const { return procs_.size(); }
  pid_t pid(size_t i) const { return procs_[i].pid; }

 private:
  struct Proc {
    std::string role;
    int index = 0;
    pid_t pid = -1;
    bool reaped = false;
    int status = 0;
  };
  void reap(Proc& p, int flags);
  std::vector<Proc> procs_;
  double kill_grace_s_;
};

// The test hook DLHOST_TEST_EXTRA_ROLE="ROLE=SHELL COMMAND": one process of ROLE running
// `sh -c COMMAND` beside each case's ranks (tests/e2e/roles_e2e.sh kills one and checks the
// record), until a tool's runtime gives cases roles of their own. NULL or "": none. Throws
// std::invalid_argument when the text has no "ROLE=".
std::vector<RoleSpec> test_extra_roles(const char* text);

}  // namespace dlhost
