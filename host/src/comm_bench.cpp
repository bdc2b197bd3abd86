// comm_bench.cpp — PLACEHOLDER while the command is being written; replaced before it is released.
#include "command.h"

#include <cstdio>

namespace dlhost {

Command add_comm_bench_command(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("comm-bench", "(not available yet)");
  c.run = [](const PluginRegistry&, const std::vector<NetworkRef>&) {
    std::fprintf(stderr, "dlhost: comm-bench is not available in this build\n");
    return 2;
  };
  return c;
}

}  // namespace dlhost
