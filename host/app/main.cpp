// main.cpp — the dlhost command line: global flags and logging, plugin discovery, and the wiring
// of every subcommand (plugins, networks, validate, run, conform, comm-bench, report, export,
// compare, project, and the internal case-worker / case-local) to the function that runs it.
// Nothing here measures or decides: every subcommand registers itself through the one Command
// shape (core/subcommand.h) from its own file (commands.h, conform/, commbench/, report/,
// project/); main collects them, parses, discovers plugins when the chosen one needs them, and
// runs it.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/command.h"
#include "core/log_pattern.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "core/plugin_trust.h"
#include "distributed/rank_env.h"
#include "isolate/case_process.h"
#include "isolate/plugin_probe.h"
#include "isolate/runtime_roles.h"
#include "project/command.h"
#include "report/commands.h"

namespace {

using namespace dlhost;

// The pthread keys a backend's own link-map namespace may use (set_keys_aside_for_namespace).
constexpr pthread_key_t kNamespaceKeys = 16;

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
  spdlog::set_pattern(kLogPattern);
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

// Internal: one case in this process, for `run` (see case_process.h), its ranks started here,
// and the plugin probe; hidden from --help.
Commands add_internal_commands(CLI::App& app) {
  struct Args {
    std::string worker_job, local_job, role_job;
    int local_ranks = 0;
    std::vector<std::string> probe_files;
  };
  auto a = std::make_shared<Args>();
  Commands c;
  auto* worker = app.add_subcommand("case-worker", "")->group("");
  worker->add_option("job", a->worker_job)->required();
  c.add({worker, {}, [a] { return case_worker_main(a->worker_job); }});
  auto* local = app.add_subcommand("case-local", "")->group("");
  local->add_option("ranks", a->local_ranks)->required();
  local->add_option("job", a->local_job)->required();
  c.add({local, {}, [a] { return case_local_main(a->local_ranks, a->local_job); }});
  // One process of a tool runtime's extra role (isolate/runtime_roles.h).
  auto* role = app.add_subcommand("runtime-role", "")->group("");
  role->add_option("job", a->role_job)->required();
  c.add({role, {}, [a] { return runtime_role_main(a->role_job); }});
  auto* probe = app.add_subcommand("plugin-probe", "")->group("");
  probe->add_option("files", a->probe_files);
  c.add({probe, {}, [a] { return plugin_probe_main(a->probe_files); }});
  return c;
}

int run_main(int argc, char** argv);

// A case worker whose backend gets the case's allocator inside a link-map namespace of its own
// (DLHOST_NAMESPACE_ALLOCATOR: runtime_settings.h; plugins/cpu_libtorch/namespace_loader.cpp)
// takes pthread keys 0-15 of this, the default namespace's, libc before any library's
// initializer runs, and leaves them unused. The namespace's libc hands out keys from 0 too, and
// the allocator, loaded first there, takes one in its initializer before anything else could
// set that libc's low keys aside; both libcs keep the values in the same slots of the thread
// descriptor, so the two sides must use different keys: the namespace 0-15, this side 16-31.
void set_keys_aside_for_namespace(int, char**, char** envp) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    const std::string var = *e;
    if (var.rfind("DLHOST_NAMESPACE_ALLOCATOR=", 0) != 0 || var.size() == 27) continue;
    pthread_key_t key = 0;
    do {
      if (pthread_key_create(&key, nullptr) != 0) return;
    } while (key + 1 < kNamespaceKeys);
    return;
  }
}
__attribute__((section(".preinit_array"),
               used)) void (*const set_keys_aside)(int, char**,
                                                   char**) = set_keys_aside_for_namespace;

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
  bool allow_unsafe_plugin_paths = false;
  app.add_flag("--allow-unsafe-plugin-paths", allow_unsafe_plugin_paths,
               std::string("Load plugins even from a file or folder others can write (group- or "
                           "world-writable, or owned by neither root nor you); the same as ") +
                   kAllowUnsafePluginPathsEnv + "=1");

  // Every subcommand, registered through the one Command shape (core/subcommand.h). `folders`
  // and the RunOptions are completed after parsing, before the chosen command runs.
  std::vector<std::string> folders;
  RunOptions run_opts, validate_opts;
  bool quick = false;
  Commands commands;
  commands.add(add_plugins_command(app, folders));
  commands.add(add_networks_command(app));
  commands.add(add_run_command(app, run_opts, quick));
  commands.add(add_validate_command(app, validate_opts));
  commands.add(add_conform_command(app));
  commands.add(add_comm_bench_command(app));
  commands.add(add_new_backend_command(app, plugin_dirs));
  commands.add(add_case_env_command(app));
  commands.add(report::add_commands(app));  // report, export, compare
  commands.add(project::add_command(app));
  commands.add(add_internal_commands(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is a ParseError that exits 0
  }
  if (quick) run_opts.overrides.insert(run_opts.overrides.begin(), {"warmup=1", "iterations=3"});
  set_up_logging(verbose, app.get_option("--log-level")->count() > 0, log_level);
  // Through the environment, so that the plugin probes and case workers judge alike.
  if (allow_unsafe_plugin_paths) ::setenv(kAllowUnsafePluginPathsEnv, "1", 1);

  const Command* chosen = commands.chosen();
  if (chosen == nullptr) throw std::logic_error("no subcommand chosen");  // require_subcommand
  // The internal ones load what their job names; report and project read files, not plugins.
  if (chosen->run_without_plugins) return chosen->run_without_plugins();
  std::atexit(refuse_early_exit);
  run_opts.command_line.assign(argv, argv + argc);
  validate_opts.command_line = run_opts.command_line;

  PluginRegistry registry;
  folders = plugin_dirs;
  for (const auto& f : PluginRegistry::default_search_path()) folders.push_back(f);
  // Each library is tried in a child process first: one that crashes or exits while it loads
  // is refused, and neither this process nor a case worker loads it.
  registry.discover(folders, [&](const std::vector<std::string>& files) {
    run_opts.unsafe_plugins = probe_plugins(files);
    return run_opts.unsafe_plugins;
  });
  run_opts.plugin_folders = folders;
  std::vector<NetworkRef> networks = list_networks(registry);
  return chosen->run(registry, networks);
}

}  // namespace
