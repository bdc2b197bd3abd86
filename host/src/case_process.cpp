// case_process.cpp — see case_process.h. POSIX process control: fork/exec of /proc/self/exe,
// a stderr pipe read with poll(), a deadline enforced with SIGTERM then SIGKILL to the child's
// process group.
#include "case_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "environment.h"
#include "networks.h"
#include "plugin_registry.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr size_t kStderrTailBytes = 4096;

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    throw std::runtime_error(std::string("cannot find the dlhost binary: ") + std::strerror(errno));
  buf[n] = '\0';
  return buf;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// A record for a case whose child did not write one.
json parent_record(const CaseJob& job, const json& environment, const std::string& status,
                   const std::string& reason, double duration_s, const std::string& started_at) {
  json rec;
  rec["schema_version"] = kResultsSchemaVersion;
  rec["case_id"] = job.input.id;
  rec["status"] = status;
  rec["reason"] = reason;
  rec["suite"] =
      json{{"name", job.suite_name}, {"path", job.suite_path}, {"source", job.input.source}};
  rec["started_at"] = started_at;
  rec["params"] = job.input.params;
  rec["duration_s"] = duration_s;
  rec["environment"] = environment;
  return rec;
}

void kill_group(pid_t pid, int sig) {
  if (kill(-pid, sig) != 0) kill(pid, sig);
}

}  // namespace

json job_to_json(const CaseJob& job) {
  return json{{"id", job.input.id},
              {"params", job.input.params},
              {"source", job.input.source},
              {"skip_reason", job.input.skip_reason},
              {"suite_name", job.suite_name},
              {"suite_path", job.suite_path},
              {"plugin_folders", job.plugin_folders}};
}

CaseJob job_from_json(const nlohmann::json& j) {
  CaseJob job;
  job.input.id = j.at("id").get<std::string>();
  job.input.params = nlohmann::ordered_json::parse(j.at("params").dump());
  job.input.source = j.at("source").get<std::string>();
  job.input.skip_reason = j.at("skip_reason").get<std::string>();
  job.suite_name = j.at("suite_name").get<std::string>();
  job.suite_path = j.at("suite_path").get<std::string>();
  job.plugin_folders = j.at("plugin_folders").get<std::vector<std::string>>();
  return job;
}

json run_case_in_child(const CaseJob& job, const CaseLimits& limits, const json& environment,
                       volatile const int* interrupted) {
  namespace fs = std::filesystem;
  std::string started_at = utc_now();
  auto start = Clock::now();
  char dir_template[] = "/tmp/dlhost-case-XXXXXX";
  if (mkdtemp(dir_template) == nullptr)
    throw std::runtime_error(std::string("cannot make a temporary folder: ") +
                             std::strerror(errno));
  fs::path dir(dir_template);
  std::string job_path = (dir / "job.json").string(), record_path = (dir / "record.json").string();
  std::ofstream(job_path) << job_to_json(job).dump();

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::string exe = self_exe();
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: own process group, dies with dlhost, output into the pipe, optional memory limit.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    if (limits.memory_limit_mb > 0) {
      rlimit lim{};
      lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(limits.memory_limit_mb) * 1024 * 1024;
      setrlimit(RLIMIT_AS, &lim);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execl(exe.c_str(), exe.c_str(), "case-worker", job_path.c_str(), record_path.c_str(),
          static_cast<char*>(nullptr));
    std::fprintf(stderr, "cannot exec %s: %s\n", exe.c_str(), std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  close(pipe_fds[1]);

  std::string tail;
  auto keep = [&](const char* data, size_t n) {
    // Forwarded live so the user sees the case's log, and kept for the record.
    (void)!write(STDERR_FILENO, data, n);
    tail.append(data, n);
    if (tail.size() > 2 * kStderrTailBytes) tail.erase(0, tail.size() - kStderrTailBytes);
  };
  bool timed_out = false, stopped = false, pipe_open = true;
  int status = 0;
  bool exited = false;
  auto deadline =
      limits.timeout_s > 0
          ? start + std::chrono::milliseconds(static_cast<int64_t>(limits.timeout_s * 1000))
          : Clock::time_point::max();
  Clock::time_point kill_at = Clock::time_point::max();
  while (!exited || pipe_open) {
    if (pipe_open) {
      pollfd pfd{pipe_fds[0], POLLIN, 0};
      if (poll(&pfd, 1, 100) > 0) {
        char buf[4096];
        ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
        if (n > 0)
          keep(buf, static_cast<size_t>(n));
        else if (n == 0 || (errno != EINTR && errno != EAGAIN))
          pipe_open = false;
      }
    } else {
      usleep(20000);
    }
    if (!exited) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) exited = true;
    }
    if (exited) {
      // A grandchild may hold the pipe open; once the child is gone, stop waiting for it.
      if (pipe_open) {
        pollfd pfd{pipe_fds[0], POLLIN, 0};
        if (poll(&pfd, 1, 0) <= 0) pipe_open = false;
      }
      continue;
    }
    auto now = Clock::now();
    if (!stopped && (now >= deadline || (interrupted != nullptr && *interrupted))) {
      timed_out = now >= deadline;
      stopped = true;
      kill_group(pid, SIGTERM);
      kill_at = now + std::chrono::milliseconds(static_cast<int64_t>(limits.kill_grace_s * 1000));
    }
    if (stopped && now >= kill_at) {
      kill_group(pid, SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  close(pipe_fds[0]);
  kill_group(pid, SIGKILL);  // whatever the case left in its group
  double duration = std::chrono::duration<double>(Clock::now() - start).count();

  json rec;
  std::ifstream record_file(record_path);
  bool have_record = false;
  if (!timed_out && record_file) {
    try {
      rec = json::parse(record_file);
      have_record = true;
    } catch (const std::exception&) {
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (interrupted != nullptr && *interrupted && !timed_out) return json();

  if (!have_record) {
    std::string why;
    std::string st = kStatusCrashed;
    if (timed_out) {
      st = kStatusTimeout;
      char buf[160];
      std::snprintf(buf, sizeof(buf), "did not stop at its timeout of %g s; killed at %g s",
                    limits.case_timeout_s, limits.timeout_s);
      why = buf;
    } else if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      why = "killed by " + signal_name(sig) + " (" + strsignal(sig) + ")";
      if (sig == SIGKILL)
        why += "; not sent by dlhost: the kernel's out-of-memory killer is the usual sender";
    } else if (WIFEXITED(status)) {
      st = "FAILED";
      why = "the case worker exited with code " + std::to_string(WEXITSTATUS(status)) +
            " without a result";
    }
    rec = parent_record(job, environment, st, why, duration, started_at);
  }
  if (!tail.empty() && rec["status"] != kStatusOk && rec["status"] != kStatusSkipped)
    rec["stderr_tail"] =
        tail.size() > kStderrTailBytes ? tail.substr(tail.size() - kStderrTailBytes) : tail;
  return rec;
}

int case_worker_main(const std::string& job_path, const std::string& record_path) {
  std::ifstream in(job_path);
  if (!in) {
    std::fprintf(stderr, "case-worker: cannot read %s\n", job_path.c_str());
    return 3;
  }
  CaseJob job = job_from_json(nlohmann::json::parse(in));
  PluginRegistry registry;
  registry.discover(job.plugin_folders);
  std::vector<NetworkRef> networks = list_networks(registry);
  RunContext ctx;
  ctx.registry = &registry;
  ctx.networks = &networks;
  ctx.environment = capture_environment(registry);
  ctx.suite_name = job.suite_name;
  ctx.suite_path = job.suite_path;
  json rec = run_case(job.input, ctx);
  // Written whole, then renamed: the parent never reads half a record.
  std::string tmp = record_path + ".tmp";
  {
    std::ofstream out(tmp);
    out << rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (!out) return 4;
  }
  return std::rename(tmp.c_str(), record_path.c_str()) == 0 ? 0 : 5;
}

}  // namespace dlhost
