// commands.h — the report commands on dlhost's command line: `report`, `export` and `compare`.
// They read results files only, so they run before (and without) plugin discovery:
//
//   auto report_commands = dlhost::report::add_commands(app);   // before parsing
//   if (auto rc = report_commands.run_chosen()) return *rc;     // after parsing
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace dlhost::report {

class Commands {
 public:
  // The exit code of the report command the user chose, or nothing if none was chosen.
  std::optional<int> run_chosen() const;

  struct Entry {
    CLI::App* sub;
    std::function<int()> run;
  };
  std::vector<Entry> entries;
};

Commands add_commands(CLI::App& app);

}  // namespace dlhost::report
