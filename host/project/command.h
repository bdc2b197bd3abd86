// command.h — `dlhost project`: reads results files (a 1-rank case's backward profile) and a
// `dlhost comm-bench --json` file (the all-reduce figures to fit alpha and beta to), prints the
// projected time per mini-batch and efficiency for N ranks on a named interconnect, with and
// without overlap, and, given measured multi-rank records, the error of the projection against
// each. Reads files only, so it runs before (and without) plugin discovery:
//
//   auto project_command = dlhost::project::add_command(app);   // before parsing
//   if (auto rc = project_command.run_chosen()) return *rc;     // after parsing
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dlhost::project {

struct Options {
  std::vector<std::string> results;  // records with a backward profile
  std::string case_id;               // only this one ("" every 1-rank record with a profile)
  // comm-bench --json files to fit, at most one per world size: N ranks are projected with the
  // fit of N ranks, else the largest world below N (else the smallest), scaled by `algorithm`.
  std::vector<std::string> comm_benches;
  std::vector<int> ranks{2, 4, 8, 16};
  std::string interconnect = "loopback";
  std::string algorithm = "ring";  // all-reduce cost from one world size to another
  double bandwidth_gbit = 0, latency_us = 0;
  double bucket_mb = 25;
  std::vector<std::string> compare;  // results files with measured multi-rank cases
  std::string json_out;
};

// The lines `dlhost project` prints and its JSON document; throws std::runtime_error (bad
// input, with the file) or std::invalid_argument (bad option).
struct Report {
  std::string text;
  std::string json;
};
Report run_projection(const Options& o);

class Command {
 public:
  std::optional<int> run_chosen() const;
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

Command add_command(CLI::App& app);

}  // namespace dlhost::project
