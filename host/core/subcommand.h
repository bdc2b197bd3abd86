// subcommand.h — the one shape of a dlhost subcommand: each command's file registers its options on
// the CLI and returns a Command (the subcommand and the function that runs it); main.cpp only
// collects them, parses, and runs the chosen one. A command that reads files only (report,
// project) or loads its own plugins (the internal case-worker) runs before plugin discovery;
// the others get the registry and the networks it found. Keeps each command in its own file
// (conform.cpp, comm_bench.cpp, report/commands.cpp, project/command.cpp, ...) and main.cpp
// short. Header-only, and names the plugin types without their headers, so that the libraries
// that need no plugin (report, project) can register through it too; core/command.h adds the
// plugin types for the commands that use them. Lives in core, not app/: report, project, conform
// and commbench register through it, and app sits above them (a header of app/ included from
// below would point a dependency upward).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace dlhost {

class PluginRegistry;
struct NetworkRef;

struct Command {
  CLI::App* sub = nullptr;
  // Runs when `sub` was chosen, after plugin discovery; returns the process exit code.
  std::function<int(const PluginRegistry&, const std::vector<NetworkRef>&)> run;
  // Set instead of `run` for a command that needs no discovered plugin: runs before discovery
  // (and without it: no plugin is loaded, no probe child started).
  std::function<int()> run_without_plugins;
};

// The commands registered on one command line, in the order they were added.
struct Commands {
  std::vector<Command> list;

  void add(Command c) { list.push_back(std::move(c)); }
  void add(Commands cs) {
    for (Command& c : cs.list) list.push_back(std::move(c));
  }
  // The command the user chose; nullptr when none of these was.
  const Command* chosen() const {
    for (const Command& c : list)
      if (c.sub != nullptr && *c.sub) return &c;
    return nullptr;
  }
  // The exit code of the chosen command if it needs no plugin, else nothing.
  std::optional<int> run_chosen() const {
    const Command* c = chosen();
    if (c == nullptr || !c->run_without_plugins) return std::nullopt;
    return c->run_without_plugins();
  }
};

}  // namespace dlhost
