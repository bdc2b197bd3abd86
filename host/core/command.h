// command.h — how a subcommand that needs the loaded plugins plugs into main.cpp: it registers
// its options on the CLI and returns the subcommand with the function that runs it. Keeps each
// command in its own file (conform.cpp, comm_bench.cpp, ...) and main.cpp short.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

#include "core/networks.h"
#include "core/plugin_registry.h"

namespace dlhost {

struct Command {
  CLI::App* sub = nullptr;
  // Runs when `sub` was chosen; returns the process exit code.
  std::function<int(const PluginRegistry&, const std::vector<NetworkRef>&)> run;
};

// `dlhost conform`: checks a backend against a reference (conform.cpp).
Command add_conform_command(CLI::App& app);
// `dlhost comm-bench`: collective bandwidth of a comm plugin (comm_bench.cpp).
Command add_comm_bench_command(CLI::App& app);

}  // namespace dlhost
