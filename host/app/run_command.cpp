// run_command.cpp — `dlhost validate` and `dlhost run`: load a suite, select its cases, then (run)
// each case in its own process, its record (with its warnings) appended to the results file and
// printed as one line the moment it ends, under a live progress line on a terminal (RunConsole);
// the cases known to be skipped are told in one line per reason at the start, and a case is named
// by what varies in its part of the suite. Ctrl-C ends the running case and keeps the file valid
// for --resume.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/commands.h"
#include "console/progress_channel.h"
#include "console/run_console.h"
#include "console/skipped_cases.h"
#include "console/warnings.h"
#include "core/compatibility.h"
#include "core/environment.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "isolate/case_process.h"
#include "launch/roles.h"
#include "run/machine_facts.h"
#include "run/record.h"
#include "run/results.h"
#include "run/resume.h"
#include "run/runner.h"
#include "suite/case_names.h"
#include "suite/case_params.h"
#include "suite/skip.h"
#include "suite/suite.h"
#include "suite/tool_runtimes.h"

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
  for (const auto& p : registry.plugins()) c.plugins.push_back(p.name);
  // A matrix repeats the same network and options: each pair is built once.
  auto built = std::make_shared<std::map<std::string, std::optional<std::string>>>();
  c.check_network = [&networks, built](const json& params) {
    const std::string key =
        params.value("network", json()).dump() + params.value("options", json()).dump();
    auto it = built->find(key);
    if (it == built->end()) it = built->emplace(key, network_options_error(networks, params)).first;
    return it->second;
  };
  for (const auto& l : registry.left_out()) c.left_out[l.name] = l.reason;
  if (const LoadedPlugin* best = registry.highest_priority(DLHOST_PLUGIN_BACKEND))
    c.preferred_backend = best->name;
  c.check_option = [&registry](const std::string& plugin, const std::string& option,
                               const std::string& value) {
    return check_plugin_option(registry, plugin, option, value);
  };
  return c;
}

// The suite with every skip rule of this machine applied, before any case's process starts;
// std::nullopt after printing why it cannot be loaded.
std::optional<Suite> load(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
                          const RunOptions& o) {
  try {
    SuiteLimits limits;
    limits.max_cases = o.max_cases;
    Suite suite =
        load_suite(o.suite, make_catalog(registry, networks), host_cores(), o.overrides, limits);
    apply_rank_skips(suite, machine_facts(registry, host_cores()), o.launcher_args);
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
                   std::vector<const CaseSpec*>& selected, RunConsole& console) {
  ResumeFile done;
  try {
    done = read_resume_file(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost: --resume: %s\n", e.what());
    return false;
  }
  for (const auto& why : done.skipped)
    console.note(path + ":" + why + ": skipped (an interrupted run's torn line, or not a record)");
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
  console.note("resuming " + path + ": " + std::to_string(before - selected.size()) + " of " +
               std::to_string(before) + " cases already recorded");
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

// The files of the plugins a case names, as absolute paths (its ranks may start elsewhere). A
// name not found here is left out: the worker then skips the case with the same reason as here.
std::vector<std::string> case_plugin_files(const CaseSpec& c, const RunContext& ctx) {
  std::vector<std::string> files;
  auto add = [&](const LoadedPlugin* p) {
    if (p == nullptr) return;
    std::string path = std::filesystem::absolute(p->path).string();
    if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
  };
  // By name alone: find() would query (initialize) a plugin this process has no use for.
  auto loaded = [&](dlhost_plugin_kind kind, const std::string& name) -> const LoadedPlugin* {
    for (const auto& p : ctx.registry->plugins())
      if (p.kind == kind && p.name == name) return &p;
    return nullptr;
  };
  const CaseParams keys = case_params(c.params, c.source);
  if (!keys.backend.empty()) add(loaded(DLHOST_PLUGIN_BACKEND, keys.backend));
  if (keys.comm != "none" && !is_tool_runtime(keys.comm))
    add(loaded(DLHOST_PLUGIN_COMM, keys.comm));
  if (!keys.network.empty() && ctx.networks != nullptr)
    if (const NetworkRef* net = find_network(*ctx.networks, keys.network)) add(net->plugin);
  return files;
}

// The extra roles of the case's tool runtime (isolate/runtime_roles.h), or the backend's refusal.
CaseRuntimeRoles case_runtime_roles(const CaseSpec& c, const RunContext& ctx) {
  CaseRuntimeRoles roles;
  try {
    roles.counts = case_runtime_role_counts(c.params, ctx);
  } catch (const std::exception& e) {
    roles.refused = e.what();
  }
  return roles;
}

// One case's record: in this process (--no-isolate, or skipped), else in its own process(es),
// whose libraries' output goes to the record's stderr tail and, with -v, to the console.
// A null record: interrupted, the case has no result. Throws when no process can be started.
json run_one(const CaseSpec& c, const Suite& suite, const RunOptions& o, const RunContext& ctx,
             RunConsole& console) {
  if (o.in_process || !c.skip_reason.empty()) return run_case(c, ctx);
  CaseJob job{c, suite.name, suite.path, o.plugin_folders, o.unsafe_plugins, {}, "", ""};
  job.plugin_files = case_plugin_files(c, ctx);
  CaseLimits limits;
  const CaseParams keys = case_params(c.params, c.source);
  double timeout = keys.timeout;
  // The case stops itself at its timeout (keeping its steps); the kill is the backstop.
  limits.timeout_s = timeout * 1.1 + 5.0;
  limits.case_timeout_s = timeout;
  limits.memory_limit_mb = keys.memory_limit_mb;
  limits.launcher_args = o.launcher_args;
  limits.to_console = [&console](const std::string& line) { console.error(line); };
  limits.show_library_output = spdlog::should_log(spdlog::level::debug);
  limits.extra_roles = test_extra_roles(std::getenv("DLHOST_TEST_EXTRA_ROLE"));
  limits.runtime_roles = case_runtime_roles(c, ctx);
  return run_case_in_child(job, limits, ctx.environment, &g_interrupted);
}

// What the run tells at its end, through the console (the one line --quiet keeps).
int finish(const std::map<std::string, int>& counts, size_t done, size_t total, int warned,
           const RunOptions& o, const std::string& out_path, RunConsole& console) {
  std::string summary;
  for (const auto& [status, n] : counts)
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  if (warned > 0) summary += "; " + std::to_string(warned) + " with warnings";
  if (g_interrupted) {
    console.summary("interrupted after " + std::to_string(done) + " of " + std::to_string(total) +
                    " cases (" + (summary.empty() ? "none recorded" : summary) +
                    "); finish with: " + resume_command(o.command_line, out_path));
    return g_interrupted == SIGTERM ? 143 : 130;
  }
  console.summary("done: " + (summary.empty() ? std::string("no cases") : summary) +
                  "; results in " + out_path);
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
  } catch (const ResultsWriteInterrupted& e) {
    // The run ends as interrupted; the record that did not land is printed, not lost.
    std::fprintf(stderr, "dlhost: %s\ndlhost: the record of case %s:\n%s\n", e.what(),
                 rec.value("case_id", std::string("?")).c_str(),
                 rec.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    return false;
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

// The console's names of the suite's cases: by the keys that vary within each case's matrix part
// (suite/case_names.h); display only, --case and the records keep the ids.
std::map<std::string, std::string> display_names(const Suite& suite) {
  std::vector<NamedCase> cases;
  for (const auto& c : suite.cases) cases.push_back({c.id, c.params, c.source});
  const std::vector<std::string> names = short_case_names(cases, console_name_options());
  std::map<std::string, std::string> by_id;
  for (size_t i = 0; i < cases.size(); ++i) by_id[cases[i].id] = names[i];
  return by_id;
}

std::vector<PlannedCase> console_plan(const std::vector<const CaseSpec*>& shown,
                                      const std::map<std::string, std::string>& names) {
  std::vector<PlannedCase> plan;
  for (const auto* c : shown) {
    const CaseParams keys = case_params(c->params, c->source);
    plan.push_back({names.at(c->id), keys.warmup, keys.iterations, c->skip_reason.empty()});
  }
  return plan;
}

// Under a case that did not pass: where its libraries' output went, and its last line (not one
// of dlhost's own log lines, "[10:02:03.456] [warning] ...", which the console showed already).
std::vector<std::string> stderr_tail_note(const json& rec) {
  auto t = rec.find("stderr_tail");
  if (t == rec.end() || !t->is_string()) return {};
  static const std::regex dlhost_log(R"(^\[\d\d:\d\d:\d\d\.\d{3}\] \[)");
  std::istringstream in(t->get<std::string>());
  size_t lines = 0;
  std::string line, last;
  while (std::getline(in, line)) {
    ++lines;
    if (!line.empty() && !std::regex_search(line, dlhost_log)) last = line;
  }
  if (lines == 0) return {};
  return {"its output: " + std::to_string(lines) +
          " lines in the record's stderr_tail (-v shows them live)" +
          (last.empty() ? "" : "; the last of its libraries: " + last)};
}

std::vector<std::string> warning_lines(const std::vector<Warning>& warnings) {
  std::vector<std::string> lines;
  for (const auto& w : warnings) lines.push_back("warning [" + w.code + "]: " + w.message);
  return lines;
}

// One case's record with its warnings: the machine's load is measured around the case's process.
json measured_case(const CaseSpec& c, const Suite& suite, const RunOptions& o,
                   const RunContext& ctx, RunConsole& console, std::vector<Warning>& case_warned) {
  CpuTimes before = sample_cpu_times();
  json rec = run_one(c, suite, o, ctx, console);
  if (rec.is_null()) return rec;
  CaseLoad load = load_between(before, sample_cpu_times());
  rec["params_hash"] = params_hash(c.params);
  rec["warnings"] = warnings_json(rec, load);
  case_warned = case_warnings(rec, load);
  return rec;
}

// Runs the selected cases in order; the exit code. The cases known to be skipped before any runs
// are told in one line per reason first (console/skipped_cases.h) and recorded in their place.
int run_cases(const std::vector<const CaseSpec*>& selected, const Suite& suite, const RunOptions& o,
              const RunContext& ctx, ResultsWriter& writer, RunConsole& console,
              ProgressChannel* channel) {
  const std::map<std::string, std::string> names = display_names(suite);
  std::vector<KnownSkip> skips;
  std::vector<const CaseSpec*> shown;
  for (const auto* c : selected) {
    if (c->skip_reason.empty())
      shown.push_back(c);
    else
      skips.push_back({names.at(c->id), c->params, c->skip_reason});
  }
  for (const auto& line : folded_skip_lines(skips)) console.note(line);
  std::map<std::string, int> counts;
  ScalingBaselines baselines;
  size_t done = 0, shown_index = 0;
  int warned = 0;
  console.plan(console_plan(shown, names));
  for (const auto* c : selected) {
    if (g_interrupted) break;
    const bool folded = !c->skip_reason.empty();
    if (!folded) {
      if (channel) channel->reset();
      console.case_started(shown_index);
    }
    json rec;
    std::vector<Warning> case_warned;
    try {
      rec = measured_case(*c, suite, o, ctx, console, case_warned);
    } catch (const std::exception& e) {
      console.error(std::string("dlhost: cannot start the case's process: ") + e.what());
      return 2;
    }
    if (rec.is_null()) break;  // interrupted: the case has no result
    baselines.add(c->params, rec);
    if (!save(writer, rec, o)) {
      if (g_interrupted) break;  // the write blocked and Ctrl-C (or SIGTERM) came
      return 2;
    }
    ++done;
    ++counts[rec["status"].get<std::string>()];
    warned += rec["warnings"].empty() ? 0 : 1;
    if (folded) continue;
    RecordSummary summary = RecordSummary::of(rec);
    summary.case_id = names.at(c->id);
    std::vector<std::string> notes = warning_lines(case_warned);
    for (const auto& n : stderr_tail_note(rec)) notes.push_back(n);
    console.case_finished(case_line(++shown_index, shown.size(), summary), notes);
  }
  return finish(counts, done, selected.size(), warned, o, writer.path(), console);
}

// The shared memory the cases report their steps into; none (no step shown) where it cannot be
// made. Case processes find it through the environment they inherit.
std::unique_ptr<ProgressChannel> open_progress_channel(RunContext& ctx, const RunOptions& o) {
  std::unique_ptr<ProgressChannel> channel;
  try {
    channel = std::make_unique<ProgressChannel>();
  } catch (const std::exception& e) {
    spdlog::debug("no live step progress: {}", e.what());
    return nullptr;
  }
  setenv(kProgressVariable, channel->address().c_str(), 1);
  if (o.in_process) {
    ProgressChannel* c = channel.get();
    ctx.on_progress = [c](int64_t step, int phase) { c->publish(step, phase); };
  }
  return channel;
}

RunContext run_context(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
                       const Suite& suite) {
  RunContext ctx;
  ctx.registry = &registry;
  ctx.networks = &networks;
  ctx.environment = capture_environment(registry);
  ctx.suite_name = suite.name;
  ctx.suite_path = suite.path;
  return ctx;
}

// What the backends publish decides too, for `validate` and `run --dry-run` alike: a case whose
// network needs an op (or precision, or ABI minor) its backend lacks is skipped by `run` at
// compile, so it is counted as skipped here. One graph per backend, network, precision and
// network options.
void apply_capability_skips(Suite& suite, const PluginRegistry& registry,
                            const std::vector<NetworkRef>& networks) {
  std::map<std::string, std::string> known;
  for (CaseSpec& c : suite.cases) {
    if (!c.skip_reason.empty()) continue;
    const std::string key = c.params.value("backend", json()).dump() + "|" +
                            c.params.value("network", json()).dump() + "|" +
                            c.params.value("precision", json()).dump() + "|" +
                            c.params.value("options", json()).dump();
    auto it = known.find(key);
    if (it == known.end())
      it = known.emplace(key, capability_skip_reason(registry, networks, c.params)).first;
    c.skip_reason = it->second;
  }
}

}  // namespace

int cmd_validate(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
                 const RunOptions& o) {
  std::optional<Suite> suite = load(registry, networks, o);
  if (!suite) return 2;
  apply_capability_skips(*suite, registry, networks);
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
    apply_capability_skips(*suite, registry, networks);
    print_dry_run(selected);
    return 0;
  }
  std::string out_path = !o.resume.empty()  ? o.resume
                         : o.output.empty() ? default_results_path(suite->name)
                                            : o.output;
  std::unique_ptr<ResultsWriter> writer;  // first: its lock keeps a second run out
  try {
    writer = std::make_unique<ResultsWriter>(out_path, &g_interrupted);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost: %s\n", e.what());
    return 2;
  }
  if (!o.in_process) {
    try {
      temp_folder();  // each case's record comes back through a file there
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlhost: %s\n", e.what());
      return 2;
    }
  }
  catch_interrupts();  // before the progress channel: it ignores SIGXFSZ, which its memfd can raise
  RunContext ctx = run_context(registry, networks, *suite);
  std::unique_ptr<ProgressChannel> channel = open_progress_channel(ctx, o);
  RunConsole console(console_mode(STDOUT_FILENO, o.quiet), STDOUT_FILENO, channel.get());
  if (!o.resume.empty() && !drop_recorded(o.resume, suite->name, selected, console)) return 2;
  console.note("dlhost " + dlhost_version() + " (" + dlhost_git_revision() + "): suite " +
               suite->name + ", " + std::to_string(selected.size()) + " cases, results -> " +
               out_path);
  for (const auto& line : warning_lines(environment_warnings(ctx.environment))) console.note(line);
  return run_cases(selected, *suite, o, ctx, *writer, console, channel.get());
}

namespace {

// The suite loader names a missing file itself (exit 2), so `suite` has no ExistingFile check.
void add_max_cases(CLI::App* sub, RunOptions& o) {
  sub->add_option("--max-cases", o.max_cases,
                  "Refuse a suite that expands to more cases than this (counted before they are "
                  "built)")
      ->capture_default_str()
      // An unsigned option took "-1" as 2^64-1 (issue 32): a count is a positive number.
      ->check(CLI::Validator(
          [](std::string& v) {
            const bool count = !v.empty() && v.size() < 16 &&
                               v.find_first_not_of("0123456789") == std::string::npos &&
                               v.find_first_not_of('0') != std::string::npos;
            return count ? std::string() : "a number of cases, 1 or more, got '" + v + "'";
          },
          ""));
}

}  // namespace

Command add_run_command(CLI::App& app, RunOptions& o, bool& quick) {
  auto* run = app.add_subcommand("run",
                                 "Run a suite: one line per case as it ends (and, on a terminal, a "
                                 "live line with the running case's step and an ETA), one JSON "
                                 "record per case appended to the results file");
  run->add_option("suite", o.suite, "Suite file (YAML)")->required();
  add_max_cases(run, o);
  run->add_option("--case", o.cases, "Run only this case id (repeatable)");
  run->add_flag("--dry-run", o.dry_run, "Print the expanded matrix and exit");
  run->add_flag("-q,--quiet", o.quiet, "Print only errors and the final summary");
  run->add_flag("--quick", quick,
                "A fast look: 1 warm-up and 3 timed mini-batches per case (same as --set warmup=1 "
                "--set iterations=3)");
  run->add_option("-o,--output", o.output,
                  "Results file (JSON lines, appended); default results/<suite>-<time>.jsonl");
  run->add_option("--resume", o.resume,
                  "Append to this results file, running only the cases it has no record of; a "
                  "file of another suite, or with a case recorded under other parameters, is "
                  "refused")
      ->excludes(run->get_option("--output"));
  run->add_option("--launcher-arg", o.launcher_args,
                  "Extra argument for mpirun/srun of multi-rank cases, after the suite's "
                  "launcher_args (repeatable; e.g. --launcher-arg=--hostfile --launcher-arg=hosts)")
      ->allow_extra_args(false);
  run->add_flag("--no-isolate", o.in_process,
                "Run cases inside this process (for debuggers); a crash then ends the suite");
  run->add_option("--set", o.overrides,
                  "Override a suite key for every case, e.g. --set iterations=5 (repeatable)");
  Command c;
  c.sub = run;
  c.run = [&o](const PluginRegistry& registry, const std::vector<NetworkRef>& networks) {
    return cmd_run(registry, networks, o);
  };
  return c;
}

Command add_validate_command(CLI::App& app, RunOptions& o) {
  auto* validate =
      app.add_subcommand("validate", "Check a suite (keys, types, names) without running it");
  validate->add_option("suite", o.suite, "Suite file (YAML)")->required();
  add_max_cases(validate, o);
  validate->add_option("--set", o.overrides, "Override a suite key, as for run");
  Command c;
  c.sub = validate;
  c.run = [&o](const PluginRegistry& registry, const std::vector<NetworkRef>& networks) {
    return cmd_validate(registry, networks, o);
  };
  return c;
}

}  // namespace dlhost
