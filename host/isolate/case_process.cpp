// case_process.cpp — see case_process.h. The parent's side: the case's command, its rendezvous
// store and test hosts, the supervision of its process group (launch/process_group.h) and, when
// no record comes back, why. What the workers say is read in startup_watch.cpp; the workers
// themselves are case_worker.cpp; the job's JSON is case_job.cpp.
#include "isolate/case_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/environment.h"
#include "core/host_api.h"
#include "isolate/case_output.h"
#include "isolate/startup_watch.h"
#include "launch/launcher.h"
#include "launch/process_group.h"
#include "launch/roles.h"
#include "launch/served_store.h"
#include "launch/test_hosts.h"
#include "record/record.h"
#include "run/memory_need.h"
#include "run/runtime_settings.h"
#include "suite/case_params.h"
#include "suite/skip.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// How long the launcher of a multi-rank case may go on after a rank reported its failure before
// the case is ended: the launcher ends the other ranks when one exits non-zero, at once.
constexpr double kFailedRankLingerS = 10;

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// The launcher's own arguments: the case's launcher_args, then the command line's.
std::vector<std::string> case_launcher_args(const CaseParams& p, const CaseLimits& limits) {
  std::vector<std::string> args = p.launcher_args;
  args.insert(args.end(), limits.launcher_args.begin(), limits.launcher_args.end());
  return args;
}

// A record for a case whose workers did not write one.
json parent_record(const CaseJob& job, const json& environment, const std::string& status,
                   const std::string& reason, double duration_s, const std::string& started_at) {
  json rec = record::start(
      {job.input.id, status, reason, job.suite_name, job.suite_path, job.input.source, started_at},
      job.input.params);
  record::finish(rec, duration_s, environment);
  return rec;
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

std::vector<std::string> case_command(const std::string& exe, const CaseJob& job,
                                      const CaseLimits& limits, int host_cores) {
  const CaseParams p = case_params(job.input.params, job.input.source);
  const int64_t ranks = p.ranks;
  std::vector<std::string> worker{exe, "case-worker", job_to_json(job).dump()};
  if (ranks <= 1) return worker;
  LaunchSpec spec;
  spec.launcher = p.launcher;
  spec.ranks = ranks;
  spec.threads = p.threads;
  spec.oversubscribe = p.oversubscribe;
  spec.ranks_per_node = p.ranks_per_node_given;
  // Rendezvous store: run_case_in_child serves one for every multi-rank case.
  spec.store = true;
  spec.extra_args = case_launcher_args(p, limits);
  return launcher_command(spec, worker, host_cores);
}

namespace {

struct Outcome {
  int status = 0;  // waitpid's
  bool timed_out = false;
  std::string stalled;         // why the start-up stalled (StartupWatch), when it did
  bool failed_linger = false;  // a rank failed and the launcher did not end the others
  std::optional<RoleProcesses::Exit> role_failed;  // an extra role's process failed first
  std::string roles_running;  // the extra roles' processes still running at a timeout
};

// Whether a rank has said that it failed: its failure line, or rank 0's record of a failure.
bool rank_failed(const WorkerReports& r) {
  if (!r.rank_failures.empty()) return true;
  if (!r.record.is_object()) return false;
  const std::string status = r.record.value("status", std::string(kStatusOk));
  return status != kStatusOk && status != kStatusSkipped;
}

// Waits for the case while forwarding its output; ends it at the deadline, on interruption, when
// the start-up stalls (`watch`, multi-rank cases) or when a failed rank's launcher lingers.
Outcome supervise(ProcessGroup& group, CaseOutput& output, const CaseLimits& limits,
                  Clock::time_point start, volatile const int* interrupted,
                  const StartupWatch* watch, RoleProcesses* roles) {
  Outcome o;
  Clock::time_point failed_at = Clock::time_point::max();
  Supervision s;
  s.timeout_s = limits.timeout_s;
  s.start = start;
  s.kill_grace_s = limits.kill_grace_s;
  s.interrupted = interrupted;
  s.on_stdout = [&output](const char* data, size_t n) { output.on_stdout(data, n); };
  s.on_stderr = [&output](const char* data, size_t n) { output.on_stderr(data, n); };
  s.should_stop = [&](Clock::time_point now) {
    // A dead parameter server or scheduler leaves the ranks waiting on it: end the case now.
    if (roles != nullptr && (o.role_failed = roles->failed())) return true;
    if (watch == nullptr) return false;
    o.stalled = watch->stalled(output.reports, now);
    if (!o.stalled.empty()) return true;
    // A rank that failed exits non-zero so that the launcher ends the others; one that does not
    // (the others blocked where no launcher reaches) must not keep the case until its timeout.
    if (failed_at == Clock::time_point::max() && rank_failed(output.reports)) failed_at = now;
    o.failed_linger = now - failed_at >= std::chrono::duration<double>(kFailedRankLingerS);
    return o.failed_linger;
  };
  const GroupOutcome g = group.supervise(s);
  o.status = g.status;
  o.timed_out = g.timed_out;
  if (roles != nullptr && g.timed_out) o.roles_running = roles->running();
  return o;
}

// mpirun names a rank killed by a signal in its own words: the rank and the signal, or nullopt.
std::optional<std::pair<std::string, int>> mpirun_killed_rank(const std::string& tail) {
  std::smatch m;
  static const std::regex mpirun_signal(
      "process rank (\\d+) with PID \\d+ on node \\S+ exited on signal (\\d+)");
  if (!std::regex_search(tail, m, mpirun_signal)) return std::nullopt;
  return std::make_pair(m[1].str(), std::stoi(m[2]));
}

// A process that died of a signal under memory_limit_mb while its network's largest tensor alone
// is over the limit, or while it held 90% of the limit or more (the worker's crash handler says
// how much): the crash followed an allocation the limit refused (TensorFlow's oneDNN ops write
// through the null pointer of a refused output: SIGSEGV), so the case is OOM, with the limit and
// what was asked or held.
std::optional<std::string> crash_under_limit(const Outcome& o, const CaseOutput& output,
                                             const CaseLimits& limits) {
  if (limits.memory_limit_mb <= 0) return std::nullopt;
  const uint64_t limit = static_cast<uint64_t>(limits.memory_limit_mb) << 20;
  std::string over = over_limit_text(need_from_json(output.reports.need), limit);
  if (const uint64_t held = output.reports.crash_data_bytes; over.empty() && held >= limit / 10 * 9)
    over = std::to_string(held >> 20) + " MiB of data held at the crash, near memory_limit_mb " +
           std::to_string(limits.memory_limit_mb);
  if (over.empty()) return std::nullopt;
  std::string who;
  int sig = 0;
  if (auto killed = mpirun_killed_rank(output.tail())) {
    who = "rank " + killed->first + " ";
    sig = killed->second;
  } else if (WIFSIGNALED(o.status)) {
    sig = WTERMSIG(o.status);
  }
  if (sig == 0 || sig == SIGKILL || sig == SIGTERM || sig == SIGINT) return std::nullopt;
  return "RESOURCE_EXHAUSTED: " + who + "killed by " + signal_name(sig) +
         ", out of memory: " + over;
}

// Why a case that sent no record ended: its status and reason.
std::pair<std::string, std::string> failure(const Outcome& o, const CaseOutput& output,
                                            const CaseLimits& limits, int ranks,
                                            const std::string& comm, const RankPlace& place) {
  const WorkerReports& reports = output.reports;
  // The role's death is the cause of whatever the ranks then said.
  if (o.role_failed)
    return {o.role_failed->crashed() ? kStatusCrashed : kStatusFailed,
            o.role_failed->text() + " while the ranks ran; dlhost ended the case"};
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
    if (!o.roles_running.empty()) why += "; extra roles still running: " + o.roles_running;
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
  if (auto oom = crash_under_limit(o, output, limits)) return {kStatusOom, *oom};
  if (auto killed = mpirun_killed_rank(output.tail())) {
    const int sig = killed->second;
    return {kStatusCrashed, "rank " + killed->first + " killed by " + signal_name(sig) + " (" +
                                strsignal(sig) + ")"};
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
    if (!output.agent_note().empty()) why += ": " + output.agent_note();
    if (WEXITSTATUS(o.status) == 127) why += " (could not start: see stderr_tail)";
    return {kStatusFailed, why};
  }
  return {kStatusCrashed, ""};
}

// Where a case's ranks run: its test hosts (an emulated interconnect, made for this case and
// removed when it ends, however it ends), or none; a record instead when they cannot be made.
// A tool runtime's role processes get one more host each (isolate/runtime_roles.h).
std::unique_ptr<TestHosts> case_hosts(const CaseJob& job, const CaseParams& keys,
                                      const json& environment, const std::string& started_at,
                                      json& refused, int role_hosts) {
  const int ranks = static_cast<int>(keys.ranks);
  const Interconnect link = case_interconnect(keys);
  if (ranks <= 1 || link.profile == "loopback") return nullptr;
  if (std::string why = test_hosts_unavailable(link); !why.empty()) {
    refused = parent_record(job, environment, kStatusSkipped,
                            "interconnect " + link.profile + ": " + why, 0.0, started_at);
    return nullptr;
  }
  try {
    return std::make_unique<TestHosts>(test_host_count(keys) + role_hosts,
                                       static_cast<int>(keys.ranks_per_node), link);
  } catch (const std::exception& e) {
    refused =
        parent_record(job, environment, kStatusFailed,
                      std::string("cannot make the test hosts: ") + e.what(), 0.0, started_at);
    return nullptr;
  }
}

// What the parent adds to the record of a case that ended: the test hosts' link (and a cut link
// beside the reason), the tail of stderr for a case that did not pass.
void finish_record(json& rec, const TestHosts* hosts, const std::string& tail) {
  if (hosts != nullptr) {
    rec["interconnect"] = hosts->describe();
    // A cut link explains a rank that stopped: name its host beside the rank.
    if (std::string cut = hosts->link_faults(); !cut.empty() && rec["status"] != kStatusOk)
      rec["reason"] =
          (rec["reason"].is_string() ? rec["reason"].get<std::string>() + "; " : "") + cut;
  }
  if (!tail.empty() && rec["status"] != kStatusOk && rec["status"] != kStatusSkipped)
    rec["stderr_tail"] =
        tail.size() > kStderrTailBytes ? tail.substr(tail.size() - kStderrTailBytes) : tail;
}

// The rendezvous store of a case of several ranks (none for one rank); what stops it is thrown,
// worded for the case's FAILED record. Its address: the parent's on the test hosts' bridge (the
// one address of this host that ranks in the namespaces reach), else as store_address.h chooses.
std::unique_ptr<ServedStore> serve_store(const CaseParams& keys, const CaseLimits& limits,
                                         int ranks, const TestHosts* hosts) {
  if (ranks <= 1) return nullptr;
  try {
    std::string address = hosts ? hosts->parent_address() : std::string();
    if (address.empty())
      address = launcher_named(keys.launcher)
                    .store_endpoint(std::getenv("DLHOST_STORE_HOST"),
                                    spans_other_hosts(keys, limits.launcher_args),
                                    case_launcher_args(keys, limits))
                    .address;
    return std::make_unique<ServedStore>(address);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("cannot start the rendezvous store: ") + e.what());
  }
}

// The case's extra roles (none for most cases), started before its ranks so that the ranks find
// their servers up; they reach the same store. What stops them is thrown, worded as above.
std::unique_ptr<RoleProcesses> start_extra_roles(const CaseLimits& limits, char* const* env,
                                                 const std::string& output) {
  if (limits.extra_roles.empty()) return nullptr;
  try {
    return std::make_unique<RoleProcesses>(limits.extra_roles, env, limits.kill_grace_s, output);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("cannot start the case's extra roles: ") + e.what());
  }
}

// The record file of a case that names none: in the temporary folder, per dlhost and case.
std::string fresh_record_file() {
  static int cases = 0;
  return (std::filesystem::path(temp_folder()) /
          ("dlhost-record-" + std::to_string(getpid()) + "-" + std::to_string(cases++) + ".json"))
      .string();
}

}  // namespace

json run_case_in_child(const CaseJob& given, const CaseLimits& limits, const json& environment,
                       volatile const int* interrupted) {
  CaseJob job = given;
  if (job.record_file.empty()) job.record_file = fresh_record_file();
  // A stale one (a killed dlhost of the same pid) is not ours.
  std::remove(job.record_file.c_str());
  const std::string started_at = utc_now();
  const auto start = Clock::now();
  const CaseParams keys = case_params(job.input.params, job.input.source);
  const int ranks = static_cast<int>(keys.ranks);
  // The allocator the case names must be here (its worker preloads it: runtime_settings.h).
  if (AllocatorChoice a = choose_allocator(keys, allocator_folders()); !a.skip_reason.empty())
    return parent_record(job, environment, kStatusSkipped, a.skip_reason, 0.0, started_at);
  json refused;
  std::unique_ptr<TestHosts> hosts =
      case_hosts(job, keys, environment, started_at, refused, limits.runtime_roles.processes());
  if (!refused.is_null()) return refused;
  CaseLimits launch = limits;
  if (hosts) {
    std::vector<std::string> args = hosts->launcher_args();
    launch.launcher_args.insert(launch.launcher_args.begin(), args.begin(), args.end());
  }
  json role_places;  // where a tool runtime's role processes run (isolate/runtime_roles.h)
  std::vector<std::string> cmd;
  try {
    role_places = add_runtime_roles(job, launch, hosts.get());  // before the job is written
    cmd = case_command(self_exe(), job, launch, host_cores());
  } catch (const Error& e) {
    return parent_record(job, environment,
                         e.code() == DLHOST_CODE_UNIMPLEMENTED ? kStatusSkipped : kStatusFailed,
                         e.what(), 0.0, started_at);
  }
  std::unique_ptr<ServedStore> store;
  std::unique_ptr<RoleProcesses> roles;
  SpawnOptions spawn;
  spawn.memory_limit_mb = limits.memory_limit_mb;
  try {
    store = serve_store(keys, limits, ranks, hosts.get());
    spawn.env = store ? store->job_environment() : nullptr;
    roles = start_extra_roles(launch, spawn.env, job.record_file + ".roles");
  } catch (const std::exception& e) {
    return parent_record(job, environment, kStatusFailed, e.what(), 0.0, started_at);
  }
  ProcessGroup group(cmd, spawn);
  CaseOutput output(
      limits.to_console
          ? limits.to_console
          : [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); },
      limits.show_library_output);
  const std::string& comm = keys.comm;
  RankPlace place;
  if (hosts)
    place = [&hosts](int rank, bool processes) {
      return " (" + hosts->rank_host(rank, processes) + ")";
    };
  StartupWatch watch{ranks, keys.startup_timeout, comm, place, Clock::now()};
  Outcome outcome = supervise(group, output, limits, start, interrupted,
                              ranks > 1 ? &watch : nullptr, roles.get());
  if (roles) {
    if (!outcome.role_failed) outcome.role_failed = roles->failed();  // died as the ranks ended
    roles->end();  // cleaned up like the ranks: SIGTERM, SIGKILL after the grace, reaped
  }
  output.finish();
  double duration = std::chrono::duration<double>(Clock::now() - start).count();
  json rec = read_record_file(job.record_file);  // read and removed, however the case ended
  if (interrupted != nullptr && *interrupted && !outcome.timed_out) return json();
  if (rec.is_null()) rec = output.reports.record;
  // A failed role ends the case unless the ranks finished first with their result.
  const bool role_failed =
      outcome.role_failed && !(rec.is_object() && rec.value("status", "") == kStatusOk);
  if (outcome.timed_out || rec.is_null() || role_failed) {
    auto [status, why] = failure(outcome, output, limits, ranks, comm, place);
    rec = parent_record(job, environment, status, why, duration, started_at);
  }
  finish_record(rec, hosts.get(), with_roles_output(output.tail(), job.record_file + ".roles"));
  if (!role_places.empty()) rec["runtime_roles"] = role_places;
  return rec;
}

}  // namespace dlhost
