// commands.h — the subcommands main.cpp wires to the command line: `plugins` and `networks`
// (list_commands.cpp), `validate` and `run` (run_command.cpp). Each returns the process's exit
// code. Not thread-safe (they print, and `run` installs signal handlers).
#pragma once

#include <string>
#include <vector>

#include "core/command.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "suite/suite.h"

namespace dlhost {

// `verbose`: also each plugin's declared options and a backend's capabilities.
// `dlhost new-backend NAME`: writes a buildable backend plugin with every op UNIMPLEMENTED.
Command add_new_backend_command(CLI::App& app);

// `folders`: every folder searched, in order (--plugin-path ones first), for the `searched:` line.
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

// Loads the suite and says whether it is valid and how many of its cases are skipped here.
int cmd_validate(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
                 const RunOptions& options);
// Runs the suite's (selected) cases, appending each record to the results file as it ends.
int cmd_run(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
            const RunOptions& options);

}  // namespace dlhost
