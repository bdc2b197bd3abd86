// plugin_probe.cpp — see plugin_probe.h. The child writes "@@DLHOST_PROBE@@ <index>" before it
// loads file <index> and "@@DLHOST_PROBE@@ <index> ok" after; the parent reads them with poll()
// under a per-file deadline, and waits for the child to learn how it ended.
#include "isolate/plugin_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace dlhost {

namespace {

constexpr const char* kMarker = "@@DLHOST_PROBE@@ ";
// Loading a GPU plugin initializes its driver (seconds); a minute is a hang.
constexpr int kPerFileTimeoutMs = 60000;

struct Child {
  pid_t pid = -1;
  int out = -1;  // the child's stdout
};

// Starts `dlhost plugin-probe FILE...` for files[first..]; its stderr is dropped (the parent
// reports each refusal itself, once).
Child start_probe(const std::vector<std::string>& files, size_t first) {
  std::vector<std::string> args{"/proc/self/exe", "plugin-probe", "--"};
  args.insert(args.end(), files.begin() + static_cast<std::ptrdiff_t>(first), files.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(fds[1], STDOUT_FILENO);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO);
    setenv("DLHOST_LOG_LEVEL", "off", 1);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return {};
  }
  return {pid, fds[0]};
}

// Reads the child's report; returns how many files were begun and how many finished, in
// order. Stops at end of file or when one file takes longer than the deadline (killing it).
void read_report(Child& child, size_t first, size_t* begun, size_t* finished, bool* hung) {
  std::string buffer;
  char chunk[4096];
  for (;;) {
    pollfd p{child.out, POLLIN, 0};
    int ready = poll(&p, 1, kPerFileTimeoutMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      kill(child.pid, SIGKILL);
      *hung = true;
      return;
    }
    ssize_t n = read(child.out, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
      std::string line = buffer.substr(0, nl);
      size_t at = line.find(kMarker);  // a plugin may print to stdout before the marker
      if (at == std::string::npos) continue;
      std::string rest = line.substr(at + std::strlen(kMarker));
      size_t index = first + std::strtoul(rest.c_str(), nullptr, 10);
      if (rest.find(" ok") != std::string::npos)
        *finished = index + 1;
      else
        *begun = index + 1;
    }
  }
}

std::string how_it_ended(int status, bool hung) {
  if (hung)
    return "hung while loading (no answer in " + std::to_string(kPerFileTimeoutMs / 1000) + " s)";
  if (WIFSIGNALED(status)) {
    const char* abbrev = sigabbrev_np(WTERMSIG(status));
    return std::string("crashed while loading (SIG") + (abbrev ? abbrev : "?") + ", " +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "ended the process while loading (exit code " + std::to_string(WEXITSTATUS(status)) +
         ": exit() in a library constructor, its entry or query)";
}

}  // namespace

std::vector<RefusedPlugin> probe_plugins(const std::vector<std::string>& files) {
  std::vector<RefusedPlugin> refused;
  for (size_t first = 0; first < files.size();) {
    Child child = start_probe(files, first);
    if (child.pid < 0) {
      // No process to probe in: load in-process as before rather than refuse every plugin.
      std::fprintf(stderr, "dlhost: cannot start the plugin probe: %s\n", std::strerror(errno));
      return refused;
    }
    size_t begun = first, finished = first;
    bool hung = false;
    read_report(child, first, &begun, &finished, &hung);
    close(child.out);
    int status = 0;
    while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (finished == files.size()) break;
    // The child died in file `finished` (begun, never done) or before it began any.
    size_t culprit = begun > finished ? finished : first;
    refused.push_back({files[culprit], how_it_ended(status, hung)});
    first = culprit + 1;
  }
  return refused;
}

int plugin_probe_main(const std::vector<std::string>& files) {
  PluginRegistry registry;
  for (size_t i = 0; i < files.size(); ++i) {
    std::printf("%s%zu\n", kMarker, i);
    std::fflush(stdout);
    registry.load_file(files[i]);
    std::printf("%s%zu ok\n", kMarker, i);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace dlhost
