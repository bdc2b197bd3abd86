// commands.h — the subcommands of host/app, each registered through the one Command shape
// (core/subcommand.h): `plugins` and `networks` (list_commands.cpp), `validate` and `run`
// (run_command.cpp), `new-backend` (new_backend.cpp). Each returns the process's exit code.
// Not thread-safe (they print, and `run` installs signal handlers).
#pragma once

#include <string>
#include <vector>

#include "core/command.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "suite/suite.h"

namespace dlhost {

// `dlhost case-env --set KEY=VALUE...`: a case's runtime environment as JSON (for bench/).
Command add_case_env_command(CLI::App& app);

// `dlhost new-backend NAME`: writes a buildable backend plugin with every op UNIMPLEMENTED.
// Loads no plugin; `plugin_dirs` (--plugin-path) are read for the names of plugins there.
Command add_new_backend_command(CLI::App& app, const std::vector<std::string>& plugin_dirs);

// `dlhost plugins` and `dlhost networks`. `folders`: every folder searched, in order
// (--plugin-path ones first), for the `searched:` line; main fills it before the command runs.
Command add_plugins_command(CLI::App& app, const std::vector<std::string>& folders);
Command add_networks_command(CLI::App& app);

// `verbose`: also each plugin's declared options and a backend's capabilities.
int cmd_plugins(const PluginRegistry& registry, bool as_json, bool verbose,
                const std::vector<std::string>& folders);
int cmd_networks(const std::vector<NetworkRef>& networks, bool as_json, bool describe);

struct RunOptions {
  std::string suite;
  std::vector<std::string> cases, overrides;
  std::string output, resume;
  bool dry_run = false;
  bool in_process = false;                    // --no-isolate: debugging only
  bool quiet = false;                         // only errors and the final summary
  std::vector<std::string> plugin_folders;    // what the case workers search
  std::vector<RefusedPlugin> unsafe_plugins;  // what the plugin probe refused: workers skip them
  std::vector<std::string> launcher_args;     // added to every multi-rank case's launcher
  size_t max_cases = SuiteLimits{}.max_cases;
  std::vector<std::string> command_line;  // this dlhost's argv, repeated in the resume hint
};

// `dlhost run` and `dlhost validate`; main completes the options after parsing (--quick, the
// command line, what plugin discovery found) before the command runs.
Command add_run_command(CLI::App& app, RunOptions& o, bool& quick);
Command add_validate_command(CLI::App& app, RunOptions& o);

// Loads the suite and says whether it is valid and how many of its cases are skipped here.
int cmd_validate(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
                 const RunOptions& options);
// Runs the suite's (selected) cases, appending each record to the results file as it ends.
int cmd_run(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
            const RunOptions& options);

}  // namespace dlhost
