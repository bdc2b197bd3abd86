// process_group.cpp — see process_group.h. POSIX process control: fork/exec, pipes read with
// poll(), SIGTERM then SIGKILL to the group.
#include "launch/process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace dlhost {

namespace {

using Clock = Supervision::Clock;

void kill_group(pid_t pid, int sig) {
  if (kill(-pid, sig) != 0) kill(pid, sig);
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ProcessGroup::ProcessGroup(std::vector<std::string> cmd, const SpawnOptions& options) {
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (options.capture_output &&
      (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0))
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> argv;
  for (auto& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Text this process has buffered is not written twice by a child whose exec fails.
  std::fflush(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the group's leader, and through it the ranks, die with us
    if (getppid() != parent) _exit(127);
    if (options.capture_output) {
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(err_pipe[1], STDERR_FILENO);
    }
    if (options.memory_limit_mb > 0) {
      // The memory the case can write, not its address space: RLIMIT_DATA counts private
      // writable mappings (the heap, anonymous memory, a reservation once made writable), while
      // RLIMIT_AS also counted reservations that cost nothing (cpu_onednn's tensor arena, CUDA's)
      // and every library's mapped code, so that LeNet (28 MB) was OOM under 48 GB.
      rlimit lim{};
      lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(options.memory_limit_mb) * 1024 * 1024;
      setrlimit(RLIMIT_DATA, &lim);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execvpe(argv[0], argv.data(), options.env != nullptr ? options.env : environ);
    std::fprintf(stderr, "%scannot start %s: %s\n", options.error_prefix.c_str(), argv[0],
                 std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  pid_ = pid;
  if (options.capture_output) {
    close(out_pipe[1]);
    close(err_pipe[1]);
    out_ = out_pipe[0];
    err_ = err_pipe[0];
  }
}

ProcessGroup::~ProcessGroup() {
  if (out_ >= 0) close(out_);
  if (err_ >= 0) close(err_);
  if (pid_ > 0) {
    kill_group(pid_, SIGKILL);
    waitpid(pid_, nullptr, WNOHANG);
  }
}

int ProcessGroup::drain(const Supervision& s, int timeout_ms) {
  pollfd pfd[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
  int ready = poll(pfd, 2, timeout_ms);
  for (int k = 0; k < 2 && ready > 0; ++k) {
    if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[8192];
    ssize_t n = read(pfd[k].fd, buf, sizeof(buf));
    if (n > 0) {
      const auto& sink = k == 0 ? s.on_stdout : s.on_stderr;
      if (sink) sink(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      int& fd = k == 0 ? out_ : err_;
      close(fd);
      fd = -1;
    }
  }
  return ready;
}

GroupOutcome ProcessGroup::supervise(const Supervision& s) {
  GroupOutcome o;
  bool exited = false;
  const Clock::time_point deadline =
      s.timeout_s > 0 ? s.start + seconds(s.timeout_s) : Clock::time_point::max();
  Clock::time_point kill_at = Clock::time_point::max();
  auto stop = [&](Clock::time_point now, const char* why) {
    o.stopped = true;
    if (s.on_stop) s.on_stop(why);
    kill_group(pid_, SIGTERM);
    kill_at = now + seconds(s.kill_grace_s);
  };
  while (!exited || out_ >= 0 || err_ >= 0) {
    int ready = drain(s, exited ? 0 : 100);
    if (exited) {
      // Once the leader is gone, a grandchild holding a pipe open must not keep us waiting.
      if (ready <= 0)
        for (int* fd : {&out_, &err_})
          if (*fd >= 0) close(std::exchange(*fd, -1));
      continue;
    }
    if (waitpid(pid_, &o.status, WNOHANG) == pid_) {
      exited = true;
      continue;
    }
    const auto now = Clock::now();
    const bool interrupted = s.interrupted != nullptr && *s.interrupted;
    if (!o.stopped && (now >= deadline || interrupted)) {
      o.timed_out = now >= deadline;
      o.interrupted = !o.timed_out;
      stop(now, o.timed_out ? "timed out" : "interrupted");
    }
    if (!o.stopped && s.should_stop && s.should_stop(now)) stop(now, "stopped");
    if (o.stopped && now >= kill_at) {
      kill_group(pid_, SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  kill_group(pid_, SIGKILL);  // whatever the job left in its group
  pid_ = -1;
  return o;
}

int run_local_ranks(int ranks, const std::vector<std::string>& cmd, const std::string& who) {
  std::vector<std::string> args = cmd;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "%s: fork: %s\n", who.c_str(), std::strerror(errno));
      for (pid_t p : pids) kill(p, SIGKILL);
      return 2;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      setenv("DLHOST_RANK", std::to_string(r).c_str(), 1);
      setenv("DLHOST_WORLD_SIZE", std::to_string(ranks).c_str(), 1);
      execv(argv[0], argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  int result = 0;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    pid_t done = wait(&status);
    if (done < 0) break;
    bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed && result == 0) {
      int rank = static_cast<int>(std::find(pids.begin(), pids.end(), done) - pids.begin());
      if (WIFSIGNALED(status)) {
        std::fprintf(stderr, "%s: rank %d exited on signal %d (%s)\n", who.c_str(), rank,
                     WTERMSIG(status), strsignal(WTERMSIG(status)));
        // The parent names the rank from this line, as it does from mpirun's.
        std::fprintf(stderr, "process rank %d with PID %d on node local exited on signal %d\n",
                     rank, static_cast<int>(done), WTERMSIG(status));
      }
      result = 1;
      for (pid_t p : pids)
        if (p != done) kill(p, SIGTERM);
    }
  }
  return result;
}

}  // namespace dlhost
