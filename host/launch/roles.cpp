// roles.cpp — see roles.h. POSIX process control, as process_group.cpp's: fork/exec into a group
// of its own, SIGTERM then SIGKILL to the group, waitpid.
#include "launch/roles.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dlhost {

namespace {

std::string how_it_ended(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  const char* abbrev = sigabbrev_np(WTERMSIG(status));
  return std::string("was killed by ") + (abbrev != nullptr
                                              ? std::string("SIG") + abbrev
                                              : "signal " + std::to_string(WTERMSIG(status)));
}

// The child's environment: `base` (or this process's) with the role's variables set over it.
std::vector<std::string> role_environment(char* const* base, const RoleSpec& r, int index) {
  std::vector<std::pair<std::string, std::string>> set = r.env;
  set.emplace_back("DLHOST_ROLE", r.role);
  set.emplace_back("DLHOST_ROLE_INDEX", std::to_string(index));
  set.emplace_back("DLHOST_ROLE_COUNT", std::to_string(r.count));
  std::vector<std::string> out;
  for (char* const* e = base != nullptr ? base : environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& kv : set) replaced = replaced || kv.first == name;
    if (!replaced) out.push_back(std::move(entry));
  }
  for (const auto& [name, value] : set) out.push_back(name + "=" + value);
  return out;
}

}  // namespace

RoleProcesses::RoleProcesses(const std::vector<RoleSpec>& roles, char* const* env,
                             double kill_grace_s, const std::string& output)
    : kill_grace_s_(kill_grace_s) {
  LaunchPlan plan;
  plan.extra_roles = roles;
  check_roles(plan);
  int out_fd = -1;
  if (!output.empty() &&
      (out_fd = open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0)
    throw std::runtime_error("cannot open the roles' output file " + output + ": " +
                             std::strerror(errno));
  struct CloseOut {
    int fd;
    ~CloseOut() {
      if (fd >= 0) close(fd);
    }
  } close_out{out_fd};
  for (const RoleSpec& r : roles) {
    for (int i = 0; i < r.count; ++i) {
      std::vector<std::string> args = r.command, vars = role_environment(env, r, i);
      if (static_cast<size_t>(i) < r.run_under.size())
        args.insert(args.begin(), r.run_under[i].begin(), r.run_under[i].end());
      std::vector<char*> argv, envp;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      for (auto& v : vars) envp.push_back(v.data());
      envp.push_back(nullptr);
      std::fflush(nullptr);
      const pid_t parent = getpid();
      const pid_t pid = fork();
      if (pid < 0) {
        const int err = errno;
        end();
        throw std::runtime_error("cannot start role " + r.role + " " + std::to_string(i) +
                                 ": fork: " + std::strerror(err));
      }
      if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        if (out_fd >= 0 && (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(out_fd, STDERR_FILENO) < 0))
          _exit(127);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvpe(argv[0], argv.data(), envp.data());
        std::fprintf(stderr, "dlhost: role %s %d: cannot start %s: %s\n", r.role.c_str(), i,
                     argv[0], std::strerror(errno));
        _exit(127);
      }
      setpgid(pid, pid);  // also from the parent, so the group exists before any kill
      procs_.push_back({r.role, i, pid, false, 0});
    }
  }
}

RoleProcesses::~RoleProcesses() { end(); }

void RoleProcesses::reap(Proc& p, int flags) {
  if (p.reaped) return;
  int status = 0;
  pid_t got = waitpid(p.pid, &status, flags);
  if (got == p.pid || (got < 0 && errno == ECHILD)) {
    p.reaped = true;
    p.status = got == p.pid ? status : 0;
  }
}

bool RoleProcesses::Exit::crashed() const { return WIFSIGNALED(status); }

std::string RoleProcesses::Exit::text() const {
  return "role " + role + " " + std::to_string(index) + " (pid " + std::to_string(pid) + ") " +
         how_it_ended(status);
}

std::optional<RoleProcesses::Exit> RoleProcesses::failed() {
  for (Proc& p : procs_) {
    reap(p, WNOHANG);
    if (p.reaped && !(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0))
      return Exit{p.role, p.index, p.pid, p.status};
  }
  return std::nullopt;
}

std::string RoleProcesses::running() const {
  std::string out;
  for (const Proc& p : procs_)
    if (!p.reaped)
      out += (out.empty() ? "" : ", ") + p.role + " " + std::to_string(p.index) + " (pid " +
             std::to_string(p.pid) + ")";
  return out;
}

void RoleProcesses::end() {
  using Clock = std::chrono::steady_clock;
  // The group, not the pid alone: a role's own children (a JVM's, a launcher script's) go too.
  // A reaped leader's group is not signalled: its pid may belong to another process by now.
  for (Proc& p : procs_) {
    reap(p, WNOHANG);
    if (!p.reaped) kill(-p.pid, SIGTERM);
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(kill_grace_s_));
  for (bool left = true; left && Clock::now() < deadline;) {
    left = false;
    for (Proc& p : procs_) {
      reap(p, WNOHANG);
      left = left || !p.reaped;
    }
    if (left) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (Proc& p : procs_) {
    if (p.reaped) continue;
    kill(-p.pid, SIGKILL);
    reap(p, 0);
  }
}

std::vector<RoleSpec> test_extra_roles(const char* text) {
  if (text == nullptr || *text == '\0') return {};
  const std::string s = text;
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0)
    throw std::invalid_argument("DLHOST_TEST_EXTRA_ROLE='" + s + "' is not ROLE=SHELL COMMAND");
  RoleSpec r;
  r.role = s.substr(0, eq);
  r.command = {"sh", "-c", s.substr(eq + 1)};
  return {r};
}

}  // namespace dlhost
