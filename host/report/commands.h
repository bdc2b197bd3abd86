// commands.h — the report commands on dlhost's command line: `report`, `export` and `compare`.
// They read results files only, so they run before (and without) plugin discovery
// (Command::run_without_plugins, core/subcommand.h).
#pragma once

#include <CLI/CLI.hpp>

#include "core/subcommand.h"

namespace dlhost::report {

using dlhost::Command;
using dlhost::Commands;

// report, export and compare, each run without plugins.
Commands add_commands(CLI::App& app);

}  // namespace dlhost::report
