// case_process.cpp — see case_process.h. POSIX process control: fork/exec, stdout and stderr
// pipes read with poll(), a deadline enforced with SIGTERM then SIGKILL to the child's process
// group.
#include "isolate/case_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <sstream>

#include "core/environment.h"
#include "core/host_api.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "distributed/rank_env.h"
#include "distributed/rendezvous_store.h"
#include "distributed/store_address.h"
#include "isolate/test_hosts.h"
#include "run/progress_channel.h"
#include "suite/schema.h"
#include "suite/skip.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr size_t kStderrTailBytes = 4096;
// Marker lines on a worker's stdout.
constexpr const char* kRecordMarker = "@@DLHOST_RECORD@@ ";
constexpr const char* kProgressMarker = "@@DLHOST_PROGRESS@@ ";
constexpr const char* kRankFailedMarker = "@@DLHOST_RANK_FAILED@@ ";
constexpr const char* kStageMarker = "@@DLHOST_STAGE@@ ";
// How long the launcher of a multi-rank case may go on after a rank reported its failure before
// the case is ended: the launcher ends the other ranks when one exits non-zero, at once.
constexpr double kFailedRankLingerS = 10;

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

// A record for a case whose workers did not write one.
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

// One whole line to stdout in one write(), so a launcher forwarding several ranks never
// interleaves two of them.
void emit_line(const std::string& line) {
  std::string text = line + "\n";
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = write(STDOUT_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Rank 0's record in `path` (written whole, then renamed into place); nothing when path is "" or
// its folder is not on this node (a rank 0 on another host: the parent reads stdout then).
void write_record_file(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  const std::string part = path + ".part";
  {
    std::ofstream out(part, std::ios::binary);
    if (!out || !(out << text) || !out.flush()) return;
  }
  std::rename(part.c_str(), path.c_str());
}

// The record rank 0 wrote in `path`, or null; the file is removed either way.
json read_record_file(const std::string& path) {
  json rec;
  {
    std::ifstream in(path, std::ios::binary);
    if (in) rec = json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  std::remove(path.c_str());
  std::remove((path + ".part").c_str());
  return rec.is_discarded() ? json() : rec;
}

}  // namespace

std::optional<std::string> marker_in(const std::string& line) {
  static const std::string kPrefix = "@@DLHOST_";
  size_t at = line.rfind(kPrefix);
  if (at != std::string::npos) return line.substr(at);
  // The start of a marker cut off by the end of the line: a write torn by a killed rank.
  size_t torn = line.rfind("@@");
  if (torn != std::string::npos && kPrefix.compare(0, line.size() - torn, line, torn) == 0)
    return "";
  return std::nullopt;
}

namespace {

// What the workers said on stdout.
struct WorkerReports {
  json record;
  std::map<int, std::pair<int64_t, int>> progress;  // rank -> (step, phase) last entered
  std::map<int, std::string> stages;                // rank -> start-up stage last entered
  std::vector<json> rank_failures;                  // {rank, status, reason}
  Clock::time_point last_report{};  // when a rank last said it moved on (stage or step)
  void line(const std::string& l) {
    auto starts = [&](const char* m) { return l.rfind(m, 0) == 0; };
    try {
      if (starts(kRecordMarker)) {
        record = json::parse(l.substr(std::strlen(kRecordMarker)));
      } else if (starts(kProgressMarker)) {
        std::istringstream in(l.substr(std::strlen(kProgressMarker)));
        int rank = 0, phase = 0;
        int64_t step = 0;
        if (in >> rank >> step >> phase) {
          progress[rank] = {step, phase};
          last_report = Clock::now();
        }
      } else if (starts(kStageMarker)) {
        std::istringstream in(l.substr(std::strlen(kStageMarker)));
        int rank = 0;
        std::string stage;
        if (in >> rank >> stage) {
          stages[rank] = stage;
          last_report = Clock::now();
        }
      } else if (starts(kRankFailedMarker)) {
        rank_failures.push_back(json::parse(l.substr(std::strlen(kRankFailedMarker))));
      }
    } catch (const std::exception&) {
      // A torn marker line (a rank killed mid-write) carries nothing usable.
    }
  }
};

// Where a rank runs, for a message: " (test host dlhn12h1 at 10.213.5.3)" on test hosts, else "".
// With `processes`, also what runs in that host, which tells a launcher that never started the
// rank there from a rank that started and stopped.
using RankPlace = std::function<std::string(int rank, bool processes)>;

// Where rank `r` is in its start-up, from what it reported, for a message.
std::string start_up_state(const WorkerReports& reports, int r, const std::string& comm) {
  auto stage = reports.stages.find(r);
  if (reports.progress.count(r) != 0 || (stage != reports.stages.end() && stage->second == "ready"))
    return "was ready";
  if (stage == reports.stages.end()) return "never started";
  if (stage->second == "comm")
    return "waited in the comm's init (comm " + comm + ") for the others";
  if (stage->second == "weights")
    return "waited in the weights' broadcast from rank 0 (comm " + comm + ") for the others";
  return "started but had not reached the comm's init (loading, building or compiling the model)";
}

// "rank 1 stopped in forward of step 3 (others reached the all-reduce of step 3)": the ranks
// that fell behind when a case hung. A rank blocked in a collective waits for the laggard, so
// the laggard is the one in the earliest phase. Before any step, the ranks' start-up stages.
std::string laggard(const WorkerReports& reports, int ranks, const std::string& comm,
                    const RankPlace& place) {
  static const char* const kPhases[] = {"forward", "backward", "the all-reduce", "update"};
  auto where = [](std::pair<int64_t, int> at) {
    return std::string(kPhases[std::clamp(at.second, 0, 3)]) + " of step " +
           std::to_string(at.first);
  };
  auto rank_name = [&](int r) {
    return "rank " + std::to_string(r) + (place ? place(r, false) : std::string());
  };
  if (ranks <= 1) return "";
  const auto& progress = reports.progress;
  std::string out;
  if (progress.empty()) {
    // No rank reached a step: each rank's start-up stage.
    for (int r = 0; r < ranks; ++r) {
      const std::string state = start_up_state(reports, r, comm);
      out += (out.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
             (place ? place(r, state == "never started") : std::string()) + " " + state;
    }
    return "no rank reached its first step: " + out;
  }
  std::pair<int64_t, int> most{-1, 0};
  for (const auto& [r, at] : progress) most = std::max(most, at);
  for (int r = 0; r < ranks; ++r) {
    auto it = progress.find(r);
    std::string item;
    if (it == progress.end()) {
      item = rank_name(r) + " never started a step (" + start_up_state(reports, r, comm) + ")";
    } else if (it->second < most) {
      item = rank_name(r) + " stopped in " + where(it->second) + " (others reached " + where(most) +
             ")";
    }
    if (!item.empty()) out += (out.empty() ? "" : "; ") + item;
  }
  return out;
}

// The start-up of a multi-rank case, watched by the parent: the ranks wait for each other there
// (the launcher starting them, the comm's init, the weights' broadcast), with no timeout of
// their own (Open MPI's daemons, MPI_Init and a collective wait forever by default). When no rank
// has moved on for `limit` while one of them waits for another (a rank not started, one in the
// comm's init or in the weights' broadcast), the start-up has stalled: the case is ended then,
// naming each rank, its host and what it waited for, long before the case's timeout. A rank that
// is only slow to compile is working, not waiting: as long as every rank has started and none
// waits, nothing is declared.
struct StartupWatch {
  int ranks = 0;
  double limit_s = 0;
  std::string comm;
  RankPlace place;
  Clock::time_point launched;

  // "" while the start-up goes on (or is over), else why it stalled.
  std::string stalled(const WorkerReports& reports, Clock::time_point now) const {
    if (ranks <= 1 || limit_s <= 0) return "";
    bool waiting = false, all_ready = true;
    for (int r = 0; r < ranks; ++r) {
      auto stage = reports.stages.find(r);
      const bool ready = reports.progress.count(r) != 0 ||
                         (stage != reports.stages.end() && stage->second == "ready");
      all_ready = all_ready && ready;
      if (!ready &&
          (stage == reports.stages.end() || stage->second == "comm" || stage->second == "weights"))
        waiting = true;
    }
    if (all_ready || !waiting) return "";
    const Clock::time_point last = std::max(launched, reports.last_report);
    const double quiet_s = std::chrono::duration<double>(now - last).count();
    if (quiet_s < limit_s) return "";
    std::string out;
    for (int r = 0; r < ranks; ++r) {
      const std::string state = start_up_state(reports, r, comm);
      if (state == "was ready") continue;
      const bool show_processes = state == "never started";
      out += (out.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
             (place ? place(r, show_processes) : std::string()) + " " + state;
    }
    char head[160];
    std::snprintf(head, sizeof(head),
                  "start-up stalled: the ranks waited for each other %.0f s with no rank moving on "
                  "(startup_timeout %g s): ",
                  quiet_s, limit_s);
    return head + out;
  }
};

}  // namespace

json unsafe_to_json(const std::vector<RefusedPlugin>& unsafe) {
  json out = json::array();
  for (const auto& r : unsafe) out.push_back({{"path", r.path}, {"reason", r.reason}});
  return out;
}

json job_to_json(const CaseJob& job) {
  return json{{"id", job.input.id},
              {"params", job.input.params},
              {"source", job.input.source},
              {"skip_reason", job.input.skip_reason},
              {"backend_by_priority", job.input.backend_by_priority},
              {"suite_name", job.suite_name},
              {"suite_path", job.suite_path},
              {"plugin_folders", job.plugin_folders},
              {"unsafe_plugins", unsafe_to_json(job.unsafe_plugins)},
              {"plugin_files", job.plugin_files},
              {"record_file", job.record_file}};
}

CaseJob job_from_json(const nlohmann::json& j) {
  CaseJob job;
  job.input.id = j.at("id").get<std::string>();
  job.input.params = nlohmann::ordered_json::parse(j.at("params").dump());
  job.input.source = j.at("source").get<std::string>();
  job.input.skip_reason = j.at("skip_reason").get<std::string>();
  job.input.backend_by_priority = j.value("backend_by_priority", false);
  job.suite_name = j.at("suite_name").get<std::string>();
  job.suite_path = j.at("suite_path").get<std::string>();
  job.plugin_folders = j.at("plugin_folders").get<std::vector<std::string>>();
  for (const auto& r : j.value("unsafe_plugins", nlohmann::json::array()))
    job.unsafe_plugins.push_back(
        {r.at("path").get<std::string>(), r.at("reason").get<std::string>()});
  job.plugin_files = j.value("plugin_files", std::vector<std::string>());
  job.record_file = j.value("record_file", std::string());
  return job;
}

std::vector<std::string> case_command(const std::string& exe, const CaseJob& job,
                                      const CaseLimits& limits, int host_cores) {
  const json& p = job.input.params;
  int64_t ranks = case_value<int64_t>(p, "ranks");
  std::vector<std::string> worker{exe, "case-worker", job_to_json(job).dump()};
  if (ranks <= 1) return worker;
  std::string launcher = case_value<std::string>(p, "launcher");
  int64_t threads = std::max<int64_t>(case_value<int64_t>(p, "threads"), 1);
  std::vector<std::string> extra;
  if (auto it = p.find("launcher_args"); it != p.end() && it->is_array())
    for (const auto& a : *it) extra.push_back(a.get<std::string>());
  extra.insert(extra.end(), limits.launcher_args.begin(), limits.launcher_args.end());
  std::vector<std::string> cmd;
  if (launcher == "mpirun") {
    cmd = {"mpirun", "-np", std::to_string(ranks)};
    // mpirun refuses root and exits 0; CI and containers run as root.
    if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
    // Ranks set their own threads; Open MPI's default core binding would pin each to one core.
    cmd.insert(cmd.end(), {"--bind-to", "none"});
    if (case_value<bool>(p, "oversubscribe") || ranks * threads > host_cores)
      cmd.push_back("--oversubscribe");
    if (auto it = p.find("ranks_per_node"); it != p.end() && it->is_number_integer())
      cmd.insert(cmd.end(), {"--map-by", "ppr:" + std::to_string(it->get<int64_t>()) + ":node"});
    for (const char* var :
         {"DLHOST_LOG_LEVEL", "DLHOST_PLUGIN_PATH", "DLHOST_DUMP_PARAMS_DIR", "OMP_WAIT_POLICY"})
      if (std::getenv(var) != nullptr) cmd.insert(cmd.end(), {"-x", var});
    // Rendezvous store: run_case_in_child sets it in the launcher's environment, for every rank.
    cmd.insert(cmd.end(), {"-x", "DLHOST_STORE"});
    if (std::getenv(kProgressVariable) != nullptr) cmd.insert(cmd.end(), {"-x", kProgressVariable});
  } else if (launcher == "srun") {
    cmd = {"srun",
           "-n",
           std::to_string(ranks),
           "--mpi=pmix",
           "--kill-on-bad-exit=1",
           "--cpus-per-task=" + std::to_string(threads)};
    if (auto it = p.find("ranks_per_node"); it != p.end() && it->is_number_integer())
      cmd.push_back("--ntasks-per-node=" + std::to_string(it->get<int64_t>()));
  } else if (launcher == "local") {
    // dlhost starts the ranks itself on this node: for comms that bootstrap through the
    // rendezvous store alone (MPI needs mpirun or srun to wire its ranks).
    return {exe, "case-local", std::to_string(ranks), job_to_json(job).dump()};
  } else {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, "unknown launcher '" + launcher + "'");
  }
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  cmd.insert(cmd.end(), worker.begin(), worker.end());
  return cmd;
}

namespace {

// The rendezvous store of a multi-rank case. The ranks are separate processes, maybe on other
// nodes, so the store they share is served by this process for the case's life (one server per
// case: no key outlives it). It listens on the one address the ranks use (store_address.h) and
// serves only those who present the case's fresh secret. Ranks find both through DLHOST_STORE
// (SECRET@HOST:PORT), which the child's environment carries: mpirun passes it on with -x, srun
// and `launcher: local` by inheritance; never on a command line, which any user can read. (The
// environment is built here: between fork and exec only async-signal-safe calls are allowed, and
// setenv is not one.)
struct CaseStore {
  std::unique_ptr<RendezvousServer> server;
  std::string variable;          // DLHOST_STORE=SECRET@HOST:PORT
  std::vector<char*> child_env;  // this process's environment with `variable`, NULL-ended
};

// `parent_address`: the parent's address on the test hosts' bridge ("" without test hosts), the
// one address of this host that ranks in the namespaces reach.
void start_store(const CaseJob& job, const CaseLimits& limits, CaseStore& store,
                 const std::string& parent_address) {
  std::vector<std::string> args;
  if (auto it = job.input.params.find("launcher_args");
      it != job.input.params.end() && it->is_array())
    for (const auto& a : *it) args.push_back(a.get<std::string>());
  args.insert(args.end(), limits.launcher_args.begin(), limits.launcher_args.end());
  StoreEndpoint at =
      !parent_address.empty()
          ? StoreEndpoint{parent_address, "the test hosts' bridge"}
          : choose_store_endpoint(std::getenv("DLHOST_STORE_HOST"),
                                  spans_other_hosts(job.input.params, limits.launcher_args), args);
  store.server = std::make_unique<RendezvousServer>(make_store_secret(), at.address);
  store.variable = "DLHOST_STORE=" + store.server->variable_value(at.address);
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "DLHOST_STORE=", 13) != 0) store.child_env.push_back(*e);
  store.child_env.push_back(store.variable.data());
  store.child_env.push_back(nullptr);
}

struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;  // read ends of its stdout and stderr
};

// Starts `cmd` in its own process group, dying with dlhost, output into pipes, with the memory
// limit; `env` NULL: this process's environment.
Child spawn(std::vector<std::string> cmd, const CaseLimits& limits, char* const* env) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> argv;
  for (auto& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (limits.memory_limit_mb > 0) {
      // The memory the case can write, not its address space: RLIMIT_DATA counts private
      // writable mappings (the heap, anonymous memory, a reservation once made writable), while
      // RLIMIT_AS also counted reservations that cost nothing (cpu_onednn's tensor arena, CUDA's)
      // and every library's mapped code, so that LeNet (28 MB) was OOM under 48 GB.
      rlimit lim{};
      lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(limits.memory_limit_mb) * 1024 * 1024;
      setrlimit(RLIMIT_DATA, &lim);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execvpe(argv[0], argv.data(), env != nullptr ? env : environ);
    std::fprintf(stderr, "cannot start %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  close(out_pipe[1]);
  close(err_pipe[1]);
  return Child{pid, out_pipe[0], err_pipe[0]};
}

// What the child wrote: its stderr forwarded live and its tail kept, its marker lines parsed.
struct ChildOutput {
  std::string tail, out_partial;
  WorkerReports reports;
  // The first line a test host's agent wrote about its daemon (test_hosts.cpp): which host's
  // daemon ended, kept apart since the launcher's own help text that follows can push it out of
  // the tail.
  std::string agent_note;

  void on_stderr(const char* data, size_t n) {
    // Forwarded live so the user sees the case's log, and kept for the record.
    (void)!write(STDERR_FILENO, data, n);
    tail.append(data, n);
    static const std::string kAgent = "dlhost test-host agent: ";
    if (size_t at = tail.find(kAgent); agent_note.empty() && at != std::string::npos) {
      size_t end = tail.find('\n', at);
      if (end != std::string::npos)
        agent_note = tail.substr(at + kAgent.size(), end - at - kAgent.size());
    }
    if (tail.size() > 2 * kStderrTailBytes) tail.erase(0, tail.size() - kStderrTailBytes);
  }
  void on_stdout(const char* data, size_t n) {
    out_partial.append(data, n);
    size_t nl;
    while ((nl = out_partial.find('\n')) != std::string::npos) {
      std::string l = out_partial.substr(0, nl);
      out_partial.erase(0, nl + 1);
      if (auto marker = marker_in(l)) {
        reports.line(*marker);
      } else {
        on_stderr((l + "\n").data(), l.size() + 1);  // a plugin's own prints: with the log
      }
    }
  }
  // Reads what is ready on the child's pipes (closing one at its end); the poll's result.
  int drain(Child& c, bool& open_out, bool& open_err, int timeout_ms) {
    pollfd pfd[2] = {{open_out ? c.out : -1, POLLIN, 0}, {open_err ? c.err : -1, POLLIN, 0}};
    int ready = poll(pfd, 2, timeout_ms);
    for (int k = 0; k < 2 && ready > 0; ++k) {
      if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[8192];
      ssize_t n = read(pfd[k].fd, buf, sizeof(buf));
      if (n > 0) {
        k == 0 ? on_stdout(buf, static_cast<size_t>(n)) : on_stderr(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        (k == 0 ? open_out : open_err) = false;
      }
    }
    return ready;
  }
};

struct Outcome {
  int status = 0;  // waitpid's
  bool timed_out = false;
  std::string stalled;         // why the start-up stalled (StartupWatch), when it did
  bool failed_linger = false;  // a rank failed and the launcher did not end the others
};

// Whether a rank has said that it failed: its failure line, or rank 0's record of a failure.
bool rank_failed(const WorkerReports& r) {
  if (!r.rank_failures.empty()) return true;
  if (!r.record.is_object()) return false;
  const std::string status = r.record.value("status", std::string(kStatusOk));
  return status != kStatusOk && status != kStatusSkipped;
}

// Waits for the child while forwarding its output; at the deadline, on interruption, when the
// start-up stalls (`watch`, multi-rank cases) or when a failed rank's launcher lingers, sends
// SIGTERM to its group, then SIGKILL after the grace period.
Outcome supervise(Child& c, ChildOutput& output, const CaseLimits& limits, Clock::time_point start,
                  volatile const int* interrupted, const StartupWatch* watch) {
  Outcome o;
  bool stopped = false, exited = false, open_out = true, open_err = true;
  auto deadline =
      limits.timeout_s > 0
          ? start + std::chrono::milliseconds(static_cast<int64_t>(limits.timeout_s * 1000))
          : Clock::time_point::max();
  Clock::time_point kill_at = Clock::time_point::max();
  Clock::time_point failed_at = Clock::time_point::max();
  auto stop = [&](Clock::time_point now) {
    stopped = true;
    kill_group(c.pid, SIGTERM);
    kill_at = now + std::chrono::milliseconds(static_cast<int64_t>(limits.kill_grace_s * 1000));
  };
  while (!exited || open_out || open_err) {
    int ready = output.drain(c, open_out, open_err, exited ? 0 : 100);
    if (exited) {
      // Once the child is gone, a grandchild holding a pipe open must not keep us waiting.
      if (ready <= 0) open_out = open_err = false;
      continue;
    }
    if (waitpid(c.pid, &o.status, WNOHANG) == c.pid) {
      exited = true;
      continue;
    }
    auto now = Clock::now();
    if (!stopped && (now >= deadline || (interrupted != nullptr && *interrupted))) {
      o.timed_out = now >= deadline;
      stop(now);
    }
    if (!stopped && watch != nullptr) {
      o.stalled = watch->stalled(output.reports, now);
      if (!o.stalled.empty()) stop(now);
    }
    // A rank that failed exits non-zero so that the launcher ends the others; one that does not
    // (the others blocked where no launcher reaches) must not keep the case until its timeout.
    if (watch != nullptr && failed_at == Clock::time_point::max() && rank_failed(output.reports))
      failed_at = now;
    if (!stopped && now - failed_at >= std::chrono::duration<double>(kFailedRankLingerS)) {
      o.failed_linger = true;
      stop(now);
    }
    if (stopped && now >= kill_at) {
      kill_group(c.pid, SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  close(c.out);
  close(c.err);
  kill_group(c.pid, SIGKILL);  // whatever the case left in its group
  return o;
}

// Why a case that sent no record ended: its status and reason.
std::pair<std::string, std::string> failure(const Outcome& o, const ChildOutput& output,
                                            const CaseLimits& limits, int ranks,
                                            const std::string& comm, const RankPlace& place) {
  const WorkerReports& reports = output.reports;
  if (!o.stalled.empty()) return {kStatusFailed, o.stalled};
  auto first_failure = [&]() -> std::pair<std::string, std::string> {
    const json& f = reports.rank_failures.front();
    const int rank = f.value("rank", -1);
    return {f.value("status", std::string(kStatusFailed)),
            "rank " + std::to_string(rank) + (place ? place(rank, false) : std::string()) + ": " +
                f.value("reason", std::string())};
  };
  if (o.timed_out) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "did not stop at its timeout of %g s; killed at %g s",
                  limits.case_timeout_s, limits.timeout_s);
    std::string why = buf;
    std::string behind = laggard(reports, ranks, comm, place);
    if (!behind.empty()) why += ": " + behind;
    // A rank that failed is the cause of the others waiting: named first.
    if (!reports.rank_failures.empty()) {
      auto [status, failed] = first_failure();
      why = failed + " (then the case " + why + ")";
    }
    return {kStatusTimeout, why};
  }
  if (!reports.rank_failures.empty()) {
    auto [status, why] = first_failure();
    if (o.failed_linger) {
      char buf[200];
      std::snprintf(buf, sizeof(buf),
                    "; the launcher had not ended the other ranks %g s later, so dlhost did",
                    kFailedRankLingerS);
      why += buf;
    }
    return {status, why};
  }
  // mpirun names a rank killed by a signal in its own words.
  std::smatch m;
  static const std::regex mpirun_signal(
      "process rank (\\d+) with PID \\d+ on node \\S+ exited on signal (\\d+)");
  if (std::regex_search(output.tail, m, mpirun_signal)) {
    int sig = std::stoi(m[2]);
    return {kStatusCrashed,
            "rank " + m[1].str() + " killed by " + signal_name(sig) + " (" + strsignal(sig) + ")"};
  }
  if (WIFSIGNALED(o.status)) {
    int sig = WTERMSIG(o.status);
    std::string why = "killed by " + signal_name(sig) + " (" + strsignal(sig) + ")";
    if (sig == SIGKILL)
      why += "; not sent by dlhost: the kernel's out-of-memory killer is the usual sender";
    return {kStatusCrashed, why};
  }
  if (WIFEXITED(o.status)) {
    std::string why = (ranks > 1 ? "the launcher" : "the case worker") +
                      std::string(" exited with code ") + std::to_string(WEXITSTATUS(o.status)) +
                      " without a result";
    if (!output.agent_note.empty()) why += ": " + output.agent_note;
    if (WEXITSTATUS(o.status) == 127) why += " (could not start: see stderr_tail)";
    return {kStatusFailed, why};
  }
  return {kStatusCrashed, ""};
}

}  // namespace

json run_case_in_child(const CaseJob& given, const CaseLimits& limits, const json& environment,
                       volatile const int* interrupted) {
  CaseJob job = given;
  if (job.record_file.empty()) {
    static int cases = 0;
    job.record_file =
        (std::filesystem::path(temp_folder()) /
         ("dlhost-record-" + std::to_string(getpid()) + "-" + std::to_string(cases++) + ".json"))
            .string();
  }
  std::remove(
      job.record_file.c_str());  // a stale one (a killed dlhost of the same pid) is not ours
  std::string started_at = utc_now();
  auto start = Clock::now();
  int ranks = static_cast<int>(case_value<int64_t>(job.input.params, "ranks"));
  // An emulated interconnect: the ranks run on test hosts (network namespaces) made for this case
  // and removed when it ends, however it ends.
  std::unique_ptr<TestHosts> hosts;
  CaseLimits launch = limits;
  if (const Interconnect link = case_interconnect(job.input.params);
      ranks > 1 && link.profile != "loopback") {
    if (std::string why = test_hosts_unavailable(link); !why.empty())
      return parent_record(job, environment, kStatusSkipped,
                           "interconnect " + link.profile + ": " + why, 0.0, started_at);
    try {
      hosts = std::make_unique<TestHosts>(
          test_host_count(job.input.params),
          static_cast<int>(case_value<int64_t>(job.input.params, "ranks_per_node")), link);
    } catch (const std::exception& e) {
      return parent_record(job, environment, kStatusFailed,
                           std::string("cannot make the test hosts: ") + e.what(), 0.0, started_at);
    }
    std::vector<std::string> args = hosts->launcher_args();
    launch.launcher_args.insert(launch.launcher_args.begin(), args.begin(), args.end());
  }
  std::vector<std::string> cmd;
  try {
    cmd = case_command(self_exe(), job, launch, host_cores());
  } catch (const Error& e) {
    return parent_record(job, environment,
                         e.code() == DLHOST_CODE_UNIMPLEMENTED ? kStatusSkipped : kStatusFailed,
                         e.what(), 0.0, started_at);
  }
  CaseStore store;
  if (ranks > 1) {
    try {
      start_store(job, limits, store, hosts ? hosts->parent_address() : std::string());
    } catch (const std::exception& e) {
      return parent_record(job, environment, kStatusFailed,
                           std::string("cannot start the rendezvous store: ") + e.what(), 0.0,
                           started_at);
    }
  }
  Child child = spawn(cmd, limits, store.server ? store.child_env.data() : nullptr);
  ChildOutput output;
  const std::string comm = case_value<std::string>(job.input.params, "comm");
  RankPlace place;
  if (hosts)
    place = [&hosts](int rank, bool processes) {
      return " (" + hosts->rank_host(rank, processes) + ")";
    };
  StartupWatch watch{ranks, case_value<double>(job.input.params, "startup_timeout"), comm, place,
                     Clock::now()};
  Outcome outcome =
      supervise(child, output, limits, start, interrupted, ranks > 1 ? &watch : nullptr);
  double duration = std::chrono::duration<double>(Clock::now() - start).count();
  json rec = read_record_file(job.record_file);  // read and removed, however the case ended
  if (interrupted != nullptr && *interrupted && !outcome.timed_out) return json();
  if (rec.is_null()) rec = output.reports.record;
  if (outcome.timed_out || rec.is_null()) {
    auto [status, why] = failure(outcome, output, limits, ranks, comm, place);
    rec = parent_record(job, environment, status, why, duration, started_at);
  }
  if (hosts) {
    rec["interconnect"] = hosts->describe();
    // A cut link explains a rank that stopped: name its host beside the rank.
    if (std::string cut = hosts->link_faults(); !cut.empty() && rec["status"] != kStatusOk)
      rec["reason"] =
          (rec["reason"].is_string() ? rec["reason"].get<std::string>() + "; " : "") + cut;
  }
  const std::string& tail = output.tail;
  if (!tail.empty() && rec["status"] != kStatusOk && rec["status"] != kStatusSkipped)
    rec["stderr_tail"] =
        tail.size() > kStderrTailBytes ? tail.substr(tail.size() - kStderrTailBytes) : tail;
  return rec;
}

int case_local_main(int ranks, const std::string& job_json) {
  // One process per rank, all in this process group (so the case's kill reaches them), each told
  // its place by DLHOST_RANK / DLHOST_WORLD_SIZE. The first rank to fail ends the others, as
  // mpirun does, so none waits forever in a collective.
  std::string exe = self_exe();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "case-local: fork: %s\n", std::strerror(errno));
      for (pid_t p : pids) kill(p, SIGKILL);
      return 2;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      setenv("DLHOST_RANK", std::to_string(r).c_str(), 1);
      setenv("DLHOST_WORLD_SIZE", std::to_string(ranks).c_str(), 1);
      execl(exe.c_str(), exe.c_str(), "case-worker", job_json.c_str(), static_cast<char*>(nullptr));
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
        std::fprintf(stderr, "case-local: rank %d exited on signal %d (%s)\n", rank,
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

int case_worker_main(const std::string& job_json) {
  die_with_launcher();
  CaseJob job = job_from_json(nlohmann::json::parse(job_json));
  RunContext ctx;
  try {
    ctx.rank = detect_rank_env();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "case-worker: %s\n", e.what());
    return 3;
  }
  if (ctx.rank.size > 1) {
    // First thing, so that the parent tells a rank the launcher never started from one that
    // started and waits (StartupWatch).
    const std::string rank = std::to_string(ctx.rank.rank);
    emit_line(kStageMarker + rank + " started");
    ctx.on_stage = [rank](const char* stage) { emit_line(kStageMarker + rank + " " + stage); };
    ctx.on_progress = [rank](int64_t step, int phase) {
      emit_line(std::string(kProgressMarker) + rank + " " + std::to_string(step) + " " +
                std::to_string(phase));
    };
  }
  PluginRegistry registry;
  if (job.plugin_files.empty())
    registry.discover(job.plugin_folders, [&](const auto&) { return job.unsafe_plugins; });
  for (const auto& file : job.plugin_files) registry.load_file(file);
  std::vector<NetworkRef> networks = list_networks(registry);
  // Query only the case's backend before the environment is described (query() is lazy: the
  // comm is queried when the case finds it, and no other plugin is initialized here).
  if (auto b = job.input.params.find("backend"); b != job.input.params.end() && b->is_string())
    registry.find(DLHOST_PLUGIN_BACKEND, b->get<std::string>());
  ctx.registry = &registry;
  ctx.networks = &networks;
  ctx.environment = capture_environment(registry);
  ctx.suite_name = job.suite_name;
  ctx.suite_path = job.suite_path;
  attach_progress_publisher(ctx);  // rank 0's steps for the parent's progress line
  json rec = run_case(job.input, ctx);
  const std::string status = rec["status"].get<std::string>();
  // A TIMEOUT is an orderly stop that every rank agreed on at the same step (train()), not a
  // failure that leaves others waiting: the ranks end normally, so the launcher does not cut
  // rank 0 off while it reports the case's record (with its timing).
  bool ok = status == kStatusOk || status == kStatusSkipped || status == kStatusTimeout;
  if (ctx.rank.rank == 0) {
    std::string text = rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    write_record_file(job.record_file, text);
    emit_line(kRecordMarker + text);
  } else if (!ok)
    emit_line(kRankFailedMarker +
              json{{"rank", ctx.rank.rank}, {"status", status}, {"reason", rec["reason"]}}.dump(
                  -1, ' ', false, nlohmann::json::error_handler_t::replace));
  // A failed rank exits non-zero so the launcher ends the others instead of leaving them
  // waiting in a collective. Without the exit handlers: MPI_Finalize there (comm_mpi registers
  // it) waits for every other rank, which waits for this one in a collective, and the launcher
  // never sees the exit (measured: the case then lasted until dlhost ended it).
  if (ctx.rank.size > 1 && !ok) {
    std::fflush(nullptr);
    _exit(1);
  }
  return 0;
}

}  // namespace dlhost
