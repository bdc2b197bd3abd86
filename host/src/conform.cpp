// conform.cpp — PLACEHOLDER while the command is being written; replaced before it is released.
#include "command.h"

#include <cstdio>

namespace dlhost {

Command add_conform_command(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("conform", "(not available yet)");
  c.run = [](const PluginRegistry&, const std::vector<NetworkRef>&) {
    std::fprintf(stderr, "dlhost: conform is not available in this build\n");
    return 2;
  };
  return c;
}

}  // namespace dlhost
