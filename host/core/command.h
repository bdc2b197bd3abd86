// command.h — the one subcommand shape (core/subcommand.h) with the plugin types its `run` takes
// (the registry, the networks), for the commands that run on loaded plugins; and the commands
// of conform/ and commbench/, which main.cpp registers. In core, below app, for the reason
// subcommand.h gives.
#pragma once

#include <CLI/CLI.hpp>

#include "core/networks.h"
#include "core/plugin_registry.h"
#include "core/subcommand.h"

namespace dlhost {

// `dlhost conform`: checks a backend against a reference (conform.cpp).
Command add_conform_command(CLI::App& app);
// `dlhost comm-bench`: collective bandwidth of a comm plugin (comm_bench.cpp).
Command add_comm_bench_command(CLI::App& app);

}  // namespace dlhost
