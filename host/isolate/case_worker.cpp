// case_worker.cpp — the worker side of case_process.h: `dlhost case-worker JOB` runs the case as
// one rank and reports on stdout in marker lines (startup_watch.h; its log lines too:
// case_output.h); `dlhost case-local N JOB` is the `launcher: local` of a multi-rank case
// (dlhost's fork launcher, launch/process_group.h).
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "dlhost/cpu_info.hpp"

#include "console/progress_channel.h"
#include "core/environment.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "distributed/rank_env.h"
#include "isolate/case_output.h"
#include "isolate/case_process.h"
#include "isolate/startup_watch.h"
#include "launch/process_group.h"
#include "run/memory_need.h"
#include "run/runtime_settings.h"
#include "suite/case_params.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;

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

// Under memory_limit_mb: the action each crash signal had before report_data_at_crash.
struct sigaction g_before_crash[NSIG];

// A crash signal's handler under memory_limit_mb: one marker line with the data the process held
// (VmData of /proc/self/status, the figure RLIMIT_DATA bounds), so that the parent can tell a
// crash at the limit (an allocation refused, then a null pointer written) from another; then the
// signal again, under the action it had before (the default, or a library's own logger).
// Async-signal-safe: open, read, write, sigaction and raise only.
void report_data_at_crash(int sig) {
  char status[8192];
  ssize_t n = -1;
  if (int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC); fd >= 0) {
    n = read(fd, status, sizeof(status) - 1);
    close(fd);
  }
  const char* at = n > 0 ? (status[n] = '\0', std::strstr(status, "VmData:")) : nullptr;
  if (at != nullptr) {
    at += 7;
    while (*at == ' ' || *at == '\t') ++at;
    char line[64];
    size_t len = std::strlen(kCrashDataMarker);
    std::memcpy(line, kCrashDataMarker, len);
    while (*at >= '0' && *at <= '9' && len < sizeof(line) - 2) line[len++] = *at++;
    line[len++] = '\n';
    (void)!write(STDOUT_FILENO, line, len);
  }
  sigaction(sig, &g_before_crash[sig], nullptr);
  raise(sig);
}

void report_data_at_crashes() {
  struct sigaction report {};
  report.sa_handler = report_data_at_crash;
  sigemptyset(&report.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE})
    sigaction(sig, &report, &g_before_crash[sig]);
}

// Set in the worker's environment once it runs under its case's runtime settings: the case id.
constexpr const char* kAppliedMark = "DLHOST_CASE_ENVIRONMENT";

// Starts this worker again under the case's runtime settings (runtime_settings.h) unless it
// already runs under them: a preloaded allocator, OpenBLAS's core and OpenMP's variables take
// effect only in a fresh process, before any library loads. The pid, the process group and the
// parent-death signal survive execve, so the launcher and the parent see the same process.
// Returns when nothing is to change, or when the exec fails (the case then runs as it is and its
// record's environment says so).
void run_under_case_environment(const CaseJob& job, const std::string& job_json) {
  const char* applied = std::getenv(kAppliedMark);
  if (applied != nullptr && job.input.id == applied) return;
  CaseParams keys;
  try {
    keys = case_params(job.input.params, job.input.source);
  } catch (const CaseParamError&) {
    return;  // the case runs as it is, and its record says which key is wrong (run_case)
  }
  const CaseEnvironment env = case_environment(keys, allocator_folders(), sdk::cpu_info().flags);
  for (const auto& [variable, value] : env.set) setenv(variable.c_str(), value.c_str(), 1);
  for (const std::string& variable : env.unset) unsetenv(variable.c_str());
  setenv(kAppliedMark, job.input.id.c_str(), 1);
  std::string exe = self_exe(), command = "case-worker", job_text = job_json;
  char* argv[] = {exe.data(), command.data(), job_text.data(), nullptr};
  std::fflush(nullptr);
  execv(exe.c_str(), argv);
  std::fprintf(stderr, "case-worker: cannot start again under the case's settings: %s\n",
               std::strerror(errno));
}

}  // namespace

int case_local_main(int ranks, const std::string& job_json) {
  // One process per rank, all in this process group (so the case's kill reaches them), each told
  // its place by DLHOST_RANK / DLHOST_WORLD_SIZE. The first rank to fail ends the others, as
  // mpirun does, so none waits forever in a collective.
  return run_local_ranks(ranks, {self_exe(), "case-worker", job_json}, "case-local");
}

int case_worker_main(const std::string& job_json) {
  die_with_launcher();
  // dlhost's own log lines apart from the libraries' output, which has stderr to itself.
  install_worker_log_sink();
  CaseJob job = job_from_json(nlohmann::json::parse(job_json));
  run_under_case_environment(job, job_json);
  RunContext ctx;
  try {
    ctx.rank = detect_rank_env();
  } catch (const std::exception& e) {
    spdlog::error("case-worker: {}", e.what());
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
  ctx.runtime_cluster = job.runtime_cluster;
  attach_progress_publisher(ctx);  // rank 0's steps for the parent's progress line
  if (data_limit_bytes() > 0) {
    ctx.on_need = [](const TensorNeed& need) { emit_line(kNeedMarker + need_json(need).dump()); };
    report_data_at_crashes();  // after the plugins loaded: a library's own handler is chained
  }
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
