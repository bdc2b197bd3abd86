// gnuplot_process.cpp — see gnuplot_process.h. Between fork and exec the child calls only
// async-signal-safe functions (open, dup2, chdir, prctl, write, execve, _exit): everything it
// needs (argv, the filter, messages) is built before the fork.
#include "report/gnuplot_process.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

extern char** environ;

namespace dlhost::report {

namespace {

#if defined(__x86_64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_AARCH64;
#else
constexpr unsigned kAuditArch = 0;  // no filter written for this machine: gnuplot is not run
#endif

sock_filter statement(unsigned short code, unsigned k) { return BPF_STMT(code, k); }
sock_filter jump(unsigned short code, unsigned k, unsigned char yes, unsigned char no) {
  return BPF_JUMP(code, k, yes, no);
}

// The seccomp program: fork, vfork and clone without CLONE_THREAD fail with EPERM, clone3
// with ENOSYS (glibc then falls back to clone, whose flags the filter can read); a system call
// of another ABI (32-bit calls on a 64-bit kernel) fails. Everything else is allowed.
std::vector<sock_filter> no_new_processes() {
  const unsigned deny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  std::vector<sock_filter> f;
  f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0));
  f.push_back(statement(BPF_RET | BPF_K, deny));
  f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
#ifdef __NR_clone3
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1));
  f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)));
#endif
#ifdef __NR_fork
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_fork, 0, 1));
  f.push_back(statement(BPF_RET | BPF_K, deny));
#endif
#ifdef __NR_vfork
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_vfork, 0, 1));
  f.push_back(statement(BPF_RET | BPF_K, deny));
#endif
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 1, 0));
  f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  // clone's flags are its first argument on x86-64 and AArch64; their low word holds
  // CLONE_THREAD (little-endian: the low word comes first).
  f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  f.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1));
  f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f.push_back(statement(BPF_RET | BPF_K, deny));
  return f;
}

[[noreturn]] void child_fails(const char* what) {
  const char* why = std::strerror(errno);  // glibc's table: no allocation
  ssize_t ignored = ::write(2, what, std::strlen(what));
  ignored = ::write(2, why, std::strlen(why));
  ignored = ::write(2, "\n", 1);
  (void)ignored;
  ::_exit(126);
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

GnuplotRun run_gnuplot_fenced(const std::string& program, const std::string& folder,
                              const std::string& script, const std::string& log,
                              int timeout_seconds) {
  GnuplotRun run;
  if (kAuditArch == 0) {
    run.message = "gnuplot not run: dlhost has no process fence for this kind of CPU";
    return run;
  }
  std::vector<sock_filter> filter = no_new_processes();
  sock_fprog fence{static_cast<unsigned short>(filter.size()), filter.data()};
  // The child changes into `folder`: a program named by a relative path is made absolute first.
  std::string exe = program;
  if (!exe.empty() && exe[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof(cwd)) != nullptr) exe = std::string(cwd) + "/" + exe;
  }
  std::vector<char*> argv{const_cast<char*>(exe.c_str()), const_cast<char*>("-d"),
                          const_cast<char*>(script.c_str()), nullptr};
  pid_t pid = ::fork();
  if (pid < 0) {
    run.message = std::string("gnuplot not run: fork: ") + std::strerror(errno);
    return run;
  }
  if (pid == 0) {
    int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (err < 0 || null < 0) child_fails("cannot open the log or /dev/null: ");
    if (::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(err, 2) < 0) child_fails("dup2: ");
    if (::chdir(folder.c_str()) != 0) child_fails("cannot change into the report folder: ");
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fails("dlhost: no_new_privs: ");
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fence) != 0)
      child_fails(
          "dlhost: cannot install the seccomp filter that keeps gnuplot from starting "
          "programs: ");
    ::execve(exe.c_str(), argv.data(), environ);
    child_fails("cannot execute gnuplot: ");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  int status = 0;
  bool killed = false;
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      run.message = std::string("waitpid: ") + std::strerror(errno);
      return run;
    }
    if (!killed && std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(killed ? 1 : 10));
  }
  run.message = text_of(log);
  if (killed) {
    run.message = "gnuplot ran past " + std::to_string(timeout_seconds) + " s and was stopped. " +
                  run.message;
    return run;
  }
  if (WIFEXITED(status))
    run.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    run.message = "gnuplot died of signal " + std::to_string(WTERMSIG(status)) + ". " + run.message;
  return run;
}

}  // namespace dlhost::report
