// run_command.cpp — `dlhost validate` and `dlhost run`: load a suite, select its cases, then (run)
// each case in its own process, its record appended to the results file and printed as one line
// the moment it ends. Ctrl-C ends the running case and keeps the file valid for --resume.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/compatibility.h"
#include "core/environment.h"
#include "isolate/case_process.h"
#include "run/record.h"
#include "run/results.h"
#include "run/resume.h"
#include "run/runner.h"
#include "suite/schema.h"
#include "suite/skip.h"
#include "suite/suite.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;

// The signal (SIGINT, SIGTERM) that asked the run to stop: the running case is ended, the loop
// stops, the results stay valid. The exit code says which: 130 or 143.
volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int sig) { g_interrupted = sig; }

SuiteCatalog make_catalog(const PluginRegistry& registry, const std::vector<NetworkRef>& networks) {
  SuiteCatalog c;
  for (const auto& n : networks) c.networks.push_back(n.name);
  c.backends = registry.names(DLHOST_PLUGIN_BACKEND);
  c.comms = registry.names(DLHOST_PLUGIN_COMM);
  if (const LoadedPlugin* best = registry.highest_priority(DLHOST_PLUGIN_BACKEND))
    c.preferred_backend = best->name;
  c.check_option = [&registry](const std::string& plugin, const std::string& option,
                               const std::string& value) {
    return check_plugin_option(registry, plugin, option, value);
  };
  return c;
}

// The suite with every skip rule of this machine applied; std::nullopt after printing why it
// cannot be loaded.
std::optional<Suite> load(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
                          const RunOptions& o) {
  try {
    SuiteLimits limits;
    limits.max_cases = o.max_cases;
    Suite suite =
        load_suite(o.suite, make_catalog(registry, networks), host_cores(), o.overrides, limits);
    apply_rank_skips(suite, host_cores(), o.launcher_args);
    return suite;
  } catch (const SuiteError& e) {
    std::fprintf(stderr, "dlhost: %s\n", e.what());
    return std::nullopt;
  }
}

// The cases --case names (all without it); false after printing an id the suite lacks.
bool select_cases(const Suite& suite, const RunOptions& o, std::vector<const CaseSpec*>& out) {
  for (const auto& c : suite.cases)
    if (o.cases.empty() || std::find(o.cases.begin(), o.cases.end(), c.id) != o.cases.end())
      out.push_back(&c);
  for (const auto& id : o.cases) {
    if (std::any_of(out.begin(), out.end(), [&](const CaseSpec* c) { return c->id == id; }))
      continue;
    std::fprintf(stderr, "dlhost: %s has no case '%s'; its cases are:\n", o.suite.c_str(),
                 id.c_str());
    for (const auto& c : suite.cases) std::fprintf(stderr, "  %s\n", c.id.c_str());
    return false;
  }
  return true;
}

void print_dry_run(const std::vector<const CaseSpec*>& selected) {
  for (const auto* c : selected) {
    std::printf("%s\n    %s\n", c->id.c_str(), c->params.dump().c_str());
    if (!c->skip_reason.empty()) std::printf("    SKIPPED: %s\n", c->skip_reason.c_str());
  }
  std::printf("%zu cases\n", selected.size());
}

std::string default_results_path(const std::string& suite_name) {
  std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&t));
  return "results/" + suite_name + "-" + stamp + ".jsonl";
}

// --resume FILE: drops the cases FILE already has a record of (same id, same parameters);
// false after printing why FILE is not this run's to resume.
bool drop_recorded(const std::string& path, const std::string& suite_name,
                   std::vector<const CaseSpec*>& selected) {
  ResumeFile done;
  try {
    done = read_resume_file(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost: --resume: %s\n", e.what());
    return false;
  }
  for (const auto& why : done.skipped)
    std::printf("%s:%s: skipped (an interrupted run's torn line, or not a record)\n", path.c_str(),
                why.c_str());
  std::string conflict = resume_conflict(done, path, suite_name);
  for (size_t i = 0; conflict.empty() && i < selected.size(); ++i)
    conflict = resume_conflict(done, path, selected[i]->id, params_hash(selected[i]->params));
  if (!conflict.empty()) {
    std::fprintf(stderr, "dlhost: --resume: %s\n", conflict.c_str());
    return false;
  }
  size_t before = selected.size();
  selected.erase(std::remove_if(selected.begin(), selected.end(),
                                [&](const CaseSpec* c) { return done.line_by_case.count(c->id); }),
                 selected.end());
  std::printf("resuming %s: %zu of %zu cases already recorded\n", path.c_str(),
              before - selected.size(), before);
  return true;
}

void catch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // Past a file-size limit write() then fails with EFBIG, which append() handles like a full
  // disk, instead of the signal killing dlhost mid-line.
  signal(SIGXFSZ, SIG_IGN);
}

// One case's record: in this process (--no-isolate, or skipped), else in its own process(es).
// A null record: interrupted, the case has no result. Throws when no process can be started.
json run_one(const CaseSpec& c, const Suite& suite, const RunOptions& o, const RunContext& ctx) {
  if (o.in_process || !c.skip_reason.empty()) return run_case(c, ctx);
  CaseJob job{c, suite.name, suite.path, o.plugin_folders, o.unsafe_plugins};
  CaseLimits limits;
  double timeout = case_value<double>(c.params, "timeout");
  // The case stops itself at its timeout (keeping its steps); the kill is the backstop.
  limits.timeout_s = timeout * 1.1 + 5.0;
  limits.case_timeout_s = timeout;
  limits.memory_limit_mb = case_value_if<int64_t>(c.params, "memory_limit_mb").value_or(0);
  limits.launcher_args = o.launcher_args;
  return run_case_in_child(job, limits, ctx.environment, &g_interrupted);
}

int finish(const std::map<std::string, int>& counts, size_t done, size_t total, const RunOptions& o,
           const std::string& out_path) {
  std::string summary;
  for (const auto& [status, n] : counts)
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  if (g_interrupted) {
    std::printf("interrupted after %zu of %zu cases (%s); finish with: %s\n", done, total,
                summary.empty() ? "none recorded" : summary.c_str(),
                resume_command(o.command_line, out_path).c_str());
    return g_interrupted == SIGTERM ? 143 : 130;
  }
  std::printf("done: %s; results in %s\n", summary.empty() ? "no cases" : summary.c_str(),
              out_path.c_str());
  bool bad = counts.count(kStatusFailed) || counts.count(kStatusTimeout) ||
             counts.count(kStatusCrashed) || counts.count(kStatusOom);
  return bad ? 1 : 0;
}

// Appends the record; false after printing it (it is not lost: it can be pasted into the file)
// and the command that runs the rest once there is room.
bool save(ResultsWriter& writer, const json& rec, const RunOptions& o) {
  try {
    writer.append(rec);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "dlhost: %s\ndlhost: the record of case %s, which the file lacks:\n%s\n"
                 "dlhost: once there is room, finish with: %s\n",
                 e.what(), rec.value("case_id", std::string("?")).c_str(),
                 rec.dump(-1, ' ', false, json::error_handler_t::replace).c_str(),
                 resume_command(o.command_line, writer.path()).c_str());
    return false;
  }
}

// Runs the selected cases in order; the exit code.
int run_cases(const std::vector<const CaseSpec*>& selected, const Suite& suite, const RunOptions& o,
              const RunContext& ctx, ResultsWriter& writer, const std::string& out_path) {
  std::map<std::string, int> counts;
  ScalingBaselines baselines;
  size_t index = 0;
  for (const auto* c : selected) {
    if (g_interrupted) break;
    json rec;
    try {
      rec = run_one(*c, suite, o, ctx);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlhost: cannot start the case's process: %s\n", e.what());
      return 2;
    }
    if (rec.is_null()) break;  // interrupted: the case has no result
    rec["params_hash"] = params_hash(c->params);
    baselines.add(c->params, rec);
    if (!save(writer, rec, o)) return 2;
    ++counts[rec["status"].get<std::string>()];
    std::printf("%s\n", case_line(++index, selected.size(), RecordSummary::of(rec)).c_str());
    std::fflush(stdout);
  }
  return finish(counts, index, selected.size(), o, out_path);
}

}  // namespace

int cmd_validate(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
                 const RunOptions& o) {
  std::optional<Suite> suite = load(registry, networks, o);
  if (!suite) return 2;
  std::printf(
      "%s: valid, %zu cases (%zu skipped here)\n", o.suite.c_str(), suite->cases.size(),
      static_cast<size_t>(std::count_if(suite->cases.begin(), suite->cases.end(),
                                        [](const CaseSpec& c) { return !c.skip_reason.empty(); })));
  return 0;
}

int cmd_run(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
            const RunOptions& o) {
  std::optional<Suite> suite = load(registry, networks, o);
  std::vector<const CaseSpec*> selected;
  if (!suite || !select_cases(*suite, o, selected)) return 2;
  if (o.dry_run) {
    print_dry_run(selected);
    return 0;
  }
  std::string out_path = !o.resume.empty()  ? o.resume
                         : o.output.empty() ? default_results_path(suite->name)
                                            : o.output;
  std::unique_ptr<ResultsWriter> writer;  // first: its lock keeps a second run out
  try {
    writer = std::make_unique<ResultsWriter>(out_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost: %s\n", e.what());
    return 2;
  }
  if (!o.resume.empty() && !drop_recorded(o.resume, suite->name, selected)) return 2;
  RunContext ctx;
  ctx.registry = &registry;
  ctx.networks = &networks;
  ctx.environment = capture_environment(registry);
  ctx.suite_name = suite->name;
  ctx.suite_path = suite->path;
  std::printf("dlhost %s (%s): suite %s, %zu cases, results -> %s\n", dlhost_version().c_str(),
              dlhost_git_revision().c_str(), suite->name.c_str(), selected.size(),
              out_path.c_str());
  std::fflush(stdout);
  catch_interrupts();
  return run_cases(selected, *suite, o, ctx, *writer, out_path);
}

}  // namespace dlhost
