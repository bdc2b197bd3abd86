// main.cpp — the dlhost command line: global flags and logging, plugin discovery, and the wiring
// of every subcommand (plugins, networks, validate, run, conform, comm-bench, report, export,
// compare, project, and the internal case-worker / case-local) to the function that runs it.
// Nothing here measures or decides: the subcommands live in commands.h, conform/, commbench/,
// report/ and project/.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/command.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "distributed/rank_env.h"
#include "isolate/case_process.h"
#include "isolate/plugin_probe.h"
#include "project/command.h"
#include "report/commands.h"

namespace {

using namespace dlhost;

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

CLI::App* add_run(CLI::App& app, RunOptions& o, bool& quick) {
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
  return run;
}

CLI::App* add_validate(CLI::App& app, RunOptions& o) {
  auto* validate =
      app.add_subcommand("validate", "Check a suite (keys, types, names) without running it");
  validate->add_option("suite", o.suite, "Suite file (YAML)")->required();
  add_max_cases(validate, o);
  validate->add_option("--set", o.overrides, "Override a suite key, as for run");
  return validate;
}

// The level travels to case workers (and ranks) through the environment.
void set_up_logging(bool verbose, bool level_given, std::string log_level) {
  if (verbose) log_level = "debug";
  if (level_given || verbose) {
    setenv("DLHOST_LOG_LEVEL", log_level.c_str(), 1);
  } else if (const char* inherited = std::getenv("DLHOST_LOG_LEVEL")) {
    log_level = inherited;
  }
  auto logger = spdlog::stderr_color_mt("dlhost");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::from_str(log_level));
}

// Set when a command returns: an exit() before that came from a plugin or a library (in its
// entry, a constructor), and must not look like success to a CI job.
bool g_command_returned = false;

void refuse_early_exit() {
  if (g_command_returned) return;
  std::fprintf(stderr,
               "dlhost: a plugin or library called exit() before the command finished; nothing "
               "after this point ran\n");
  std::fflush(stdout);
  _exit(2);
}

int run_main(int argc, char** argv);

}  // namespace

// Usage and input errors exit 2 (see README "Exit codes"), whatever CLI11 or the allocator says.
int main(int argc, char** argv) {
  // Started by a launcher (a rank of comm-bench or of a case): dies with it from the start, the
  // seconds of plugin loading included.
  try {
    if (detect_rank_env().launcher != "none") die_with_launcher();
  } catch (const std::invalid_argument&) {
    // A bad launcher environment is reported by the command that reads the ranks.
  }
  try {
    int rc = run_main(argc, argv);
    g_command_returned = true;
    return rc;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dlhost: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost: %s\n", e.what());
  }
  g_command_returned = true;
  return 2;
}

namespace {

int run_main(int argc, char** argv) {
  CLI::App app{
      "dlhost — benchmarks deep-learning training across compute libraries, hardware and "
      "communication layers, through plugins"};
  app.require_subcommand(1);
  // Options the subcommand does not know fall through to these global ones, so that
  // `dlhost run suite.yaml --plugin-path build-acme -v` works as well as before the subcommand
  // (a subcommand's own -v, as in `plugins -v`, still wins). Inherited by every subcommand.
  app.fallthrough();
  bool verbose = false;
  std::string log_level = "warn";
  std::vector<std::string> plugin_dirs;
  app.add_flag("-v,--verbose", verbose, "Log at debug level");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--plugin-path", plugin_dirs,
                 "Extra plugin folder, searched before the build folder, DLHOST_PLUGIN_PATH and "
                 "the install folder (repeatable; before or after the subcommand)");

  bool as_json = false, describe = false;
  auto* plugins = app.add_subcommand(
      "plugins", "List the plugins found, their devices, and the files refused (with why)");
  plugins->add_flag("--json", as_json, "Print JSON");
  bool plugins_verbose = false;
  plugins->add_flag("-v,--verbose", plugins_verbose,
                    "Also list each plugin's options and each backend's capabilities");
  auto* nets = app.add_subcommand(
      "networks", "List the networks: input shape, parameters, forward FLOPs per sample");
  nets->add_flag("--json", as_json, "Print JSON");
  nets->add_flag("-d,--describe", describe, "Print each network's description");
  RunOptions run_opts, validate_opts;
  bool quick = false;
  add_run(app, run_opts, quick);
  auto* validate = add_validate(app, validate_opts);
  std::vector<Command> commands{add_conform_command(app), add_comm_bench_command(app),
                                add_new_backend_command(app)};
  auto report_commands = dlhost::report::add_commands(app);  // report, export, compare
  auto project_command = dlhost::project::add_command(app);

  // Internal: one case in this process, for `run` (see case_process.h).
  std::string worker_job, local_job;
  int local_ranks = 0;
  auto* worker = app.add_subcommand("case-worker", "")->group("");
  worker->add_option("job", worker_job)->required();
  auto* local = app.add_subcommand("case-local", "")->group("");
  local->add_option("ranks", local_ranks)->required();
  local->add_option("job", local_job)->required();
  std::vector<std::string> probe_files;
  auto* probe = app.add_subcommand("plugin-probe", "")->group("");
  probe->add_option("files", probe_files);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is a ParseError that exits 0
  }
  if (quick) run_opts.overrides.insert(run_opts.overrides.begin(), {"warmup=1", "iterations=3"});
  set_up_logging(verbose, app.get_option("--log-level")->count() > 0, log_level);

  // A case worker loads the plugins its job names, nothing else.
  if (*worker) return case_worker_main(worker_job);
  if (*local) return case_local_main(local_ranks, local_job);
  if (*probe) return plugin_probe_main(probe_files);
  if (auto rc = report_commands.run_chosen()) return *rc;  // they read files, not plugins
  if (auto rc = project_command.run_chosen()) return *rc;
  std::atexit(refuse_early_exit);
  run_opts.command_line.assign(argv, argv + argc);
  validate_opts.command_line = run_opts.command_line;

  PluginRegistry registry;
  std::vector<std::string> folders = plugin_dirs;
  for (const auto& f : PluginRegistry::default_search_path()) folders.push_back(f);
  // Each library is tried in a child process first: one that crashes or exits while it loads
  // is refused, and neither this process nor a case worker loads it.
  registry.discover(folders, [&](const std::vector<std::string>& files) {
    run_opts.unsafe_plugins = probe_plugins(files);
    return run_opts.unsafe_plugins;
  });
  run_opts.plugin_folders = folders;
  std::vector<NetworkRef> networks = list_networks(registry);

  for (const auto& c : commands)
    if (*c.sub) return c.run(registry, networks);
  if (*plugins) return cmd_plugins(registry, as_json, plugins_verbose, folders);
  if (*nets) return cmd_networks(networks, as_json, describe);
  if (*validate) return cmd_validate(registry, networks, validate_opts);
  return cmd_run(registry, networks, run_opts);
}

}  // namespace
