// plugin_probe.cpp — see plugin_probe.h. The child writes "@@DLHOST_PROBE@@ <index>" before it
// loads file <index> and "@@DLHOST_PROBE@@ <index> ok" after; the parent reads them with poll()
// under a per-file deadline, and waits for the child to learn how it ended. A file that hung is
// remembered (hang_memory_path) so that later commands do not wait for it again.
#include "isolate/plugin_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace dlhost {

namespace {

constexpr const char* kMarker = "@@DLHOST_PROBE@@ ";
// Loading a GPU plugin initializes its driver (seconds); a minute is a hang.
constexpr int kDefaultPerFileTimeoutS = 60;
// How long a hang is remembered, the file unchanged: a driver that hung today may be fixed
// tomorrow without the plugin's file changing.
constexpr int64_t kRememberHangS = 24 * 3600;
constexpr size_t kMaxRememberedBytes = 1 << 20;

// DLHOST_PLUGIN_PROBE_TIMEOUT_S, else a minute.
int per_file_timeout_ms() {
  const char* text = std::getenv("DLHOST_PLUGIN_PROBE_TIMEOUT_S");
  const long s = text != nullptr ? std::strtol(text, nullptr, 10) : 0;
  return static_cast<int>(s > 0 && s <= 3600 ? s : kDefaultPerFileTimeoutS) * 1000;
}

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
    int ready = poll(&p, 1, per_file_timeout_ms());
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
    return "hung while loading (no answer in " + std::to_string(per_file_timeout_ms() / 1000) +
           " s)";
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

// ---- Hangs remembered: a plugin that hung while loading cost every later command that loads
// plugins its minute again. A hang is remembered per file (device, inode, size, modification
// time: a rebuilt or replaced file is probed again) for a day, in the user's cache folder
// ($XDG_CACHE_HOME/dlhost, else ~/.cache/dlhost). The file is data: a line per hang, read with
// bounds, anything unexpected in it ignored.

struct FileId {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileId& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
};

bool file_id(const std::string& path, FileId* id) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  *id = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
         static_cast<uint64_t>(st.st_size),
         static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  return true;
}

std::string hang_memory_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg != nullptr && *xdg == '/') return std::string(xdg) + "/dlhost/hung-plugins";
  if (home != nullptr && *home == '/') return std::string(home) + "/.cache/dlhost/hung-plugins";
  return "";
}

struct Hang {
  FileId id;
  int64_t at = 0;  // when it hung, seconds since the epoch
  std::string reason, path;
};

// "DEV INO SIZE MTIME_NS AT PATH\tREASON" lines; malformed ones are skipped.
std::vector<Hang> remembered_hangs(const std::string& memory) {
  std::vector<Hang> out;
  struct stat st {};
  if (memory.empty() || ::stat(memory.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxRememberedBytes)
    return out;
  std::ifstream in(memory);
  const int64_t now = std::time(nullptr);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    Hang h;
    unsigned long long dev = 0, ino = 0, size = 0;
    long long mtime = 0, at = 0;
    if (!(fields >> dev >> ino >> size >> mtime >> at)) continue;
    std::string rest;
    std::getline(fields >> std::ws, rest);
    const size_t tab = rest.find('\t');
    if (tab == std::string::npos || now - at > kRememberHangS || at > now) continue;
    h.id = {dev, ino, size, mtime};
    h.at = at;
    h.path = rest.substr(0, tab);
    h.reason = rest.substr(tab + 1);
    out.push_back(h);
  }
  return out;
}

// Writes `hangs` whole (a temporary file renamed into place); best effort.
void remember_hangs(const std::string& memory, const std::vector<Hang>& hangs) {
  if (memory.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(memory).parent_path(), ec);
  const std::string part = memory + "." + std::to_string(getpid());
  {
    std::ofstream out(part);
    for (const Hang& h : hangs) {
      if (h.path.find_first_of("\t\n") != std::string::npos) continue;
      out << h.id.dev << ' ' << h.id.ino << ' ' << h.id.size << ' ' << h.id.mtime_ns << ' ' << h.at
          << ' ' << h.path << '\t' << h.reason << '\n';
    }
    if (!out) {
      std::remove(part.c_str());
      return;
    }
  }
  std::rename(part.c_str(), memory.c_str());
}

std::string utc(int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", std::gmtime(&tt));
  return buf;
}

// Probes `files` in child processes; the files refused, in order.
std::vector<RefusedPlugin> probe_in_children(const std::vector<std::string>& files,
                                             std::vector<bool>* hung_files) {
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
    hung_files->push_back(hung);
    first = culprit + 1;
  }
  return refused;
}

}  // namespace

std::vector<RefusedPlugin> probe_plugins(const std::vector<std::string>& files) {
  const std::string memory = hang_memory_path();
  std::vector<Hang> hangs = remembered_hangs(memory);
  std::vector<RefusedPlugin> refused;
  std::vector<std::string> to_probe;
  for (const std::string& f : files) {
    FileId id;
    auto known = std::find_if(hangs.begin(), hangs.end(), [&](const Hang& h) {
      return h.path == f && file_id(f, &id) && h.id == id;
    });
    if (known == hangs.end()) {
      to_probe.push_back(f);
      continue;
    }
    refused.push_back({f, known->reason + " at " + utc(known->at) +
                              "; remembered until the file changes or a day has passed (" + memory +
                              ")"});
  }
  std::vector<bool> hung;
  std::vector<RefusedPlugin> found = probe_in_children(to_probe, &hung);
  bool changed = false;
  for (size_t i = 0; i < found.size(); ++i) {
    FileId id;
    if (!hung[i] || !file_id(found[i].path, &id)) continue;
    hangs.erase(std::remove_if(hangs.begin(), hangs.end(),
                               [&](const Hang& h) { return h.path == found[i].path; }),
                hangs.end());
    hangs.push_back({id, static_cast<int64_t>(std::time(nullptr)), found[i].reason, found[i].path});
    changed = true;
  }
  if (changed) remember_hangs(memory, hangs);
  refused.insert(refused.end(), found.begin(), found.end());
  // In the order of `files`, as before.
  std::vector<RefusedPlugin> ordered;
  for (const std::string& f : files)
    for (const RefusedPlugin& r : refused)
      if (r.path == f) ordered.push_back(r);
  return ordered;
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
