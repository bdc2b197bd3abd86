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

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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

// Starts `dlhost plugin-probe FILE...` for files[first..]; its stderr goes to `err_fd` (a
// temporary file), whose end the parent quotes in a refusal: what a plugin said before it died
// (an uncaught exception's what(), an assertion) is the cause a vendor needs.
Child start_probe(const std::vector<std::string>& files, size_t first, int err_fd) {
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
    int err = err_fd >= 0 ? err_fd : open("/dev/null", O_WRONLY);
    if (err >= 0) dup2(err, STDERR_FILENO);
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

// The last lines the child wrote to stderr (at most 600 bytes, printable ASCII, lines joined
// with " | "); "" when it wrote nothing.
std::string stderr_tail(std::FILE* err) {
  if (err == nullptr) return "";
  std::fflush(err);
  long size = (std::fseek(err, 0, SEEK_END) == 0) ? std::ftell(err) : -1;
  if (size <= 0) return "";
  long from = std::max(0L, size - 600);
  std::fseek(err, from, SEEK_SET);
  std::string text(static_cast<size_t>(size - from), '\0');
  text.resize(std::fread(text.data(), 1, text.size(), err));
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      if (!out.empty() && out.back() != ' ') out += " | ";
    } else if (c >= ' ' && c <= '~') {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '|')) out.pop_back();
  return out;
}

}  // namespace

std::vector<RefusedPlugin> probe_plugins(const std::vector<std::string>& files) {
  std::vector<RefusedPlugin> refused;
  for (size_t first = 0; first < files.size();) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> err(std::tmpfile(), &std::fclose);
    Child child = start_probe(files, first, err ? fileno(err.get()) : -1);
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
    std::string reason = how_it_ended(status, hung);
    if (std::string said = stderr_tail(err.get()); !said.empty()) reason += "; its stderr: " + said;
    refused.push_back({files[culprit], reason});
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
