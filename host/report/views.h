// views.h — the paper's views of a set of records, each one section of a report: time per
// mini-batch (network x backend x threads), thread scaling, batch-size sweeps, multi-rank speedup
// and efficiency, the forward/backward/exposed-communication/update split, achieved GFLOP/s,
// comm-bench bus bandwidth, every case that did not end OK, and the warnings `dlhost run`
// stored. Views only read records.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "report/document.h"
#include "report/plots.h"
#include "report/records.h"

namespace dlhost::report {

// Records that share an environment_key (CPU model, cores, library versions), in input order.
// When a case id appears more than once in a group, the later record stands in `records`;
// `all` keeps every record of the group (repeats included), for the views that aggregate them.
struct EnvironmentGroup {
  std::string label;  // E1, E2, ... in order of first appearance
  std::string key;
  json environment;                              // of the group's first record
  std::map<std::string, std::string> libraries;  // every record's, merged (they agree)
  std::vector<const Record*> records;
  std::vector<const Record*> all;  // every record of the group, in input order
  int superseded = 0;              // earlier records of a case id that a later one replaced
};
std::vector<EnvironmentGroup> group_by_environment(const std::vector<Record>& records);

// Numbers as the tables print them: milliseconds with 3-4 significant digits; a number with
// `decimals` decimals, or in scientific notation where that would print more than 15 digits
// before the point (1e308 is "1.000e+308", never 309 digits).
std::string format_ms(double ms);
std::string format_number(double v, int decimals);
// A count a record holds (tokens per sample): the integer, or scientific notation beyond 1e15
// (a double no 64-bit integer holds is never printed as 0).
std::string format_count(double v);

// Plot labels for case ids that say only what varies: each id's dot-separated parts ("fcn5",
// "cpu_onednn", "b64", "comm=none"; a part starting with a digit stays with the one before, so
// "lr=0.01" is one) less the parts every id holds, which go to `common`. An id left with no part
// (one id, or an id whose parts all the others hold) keeps its whole.
std::vector<std::string> varying_labels(const std::vector<std::string>& ids, std::string& common);

Section environments_view(const std::vector<EnvironmentGroup>& groups);
Section time_per_minibatch_view(const EnvironmentGroup& g);
// Shi et al.'s table per hardware (network x tool, the fastest marked) and their time-vs-threads
// figure per network, a line per tool (tools_view.cpp).
Section tools_view(const EnvironmentGroup& g, Plotter& plotter);
Section thread_scaling_view(const EnvironmentGroup& g, Plotter& plotter);
Section batch_sweep_view(const EnvironmentGroup& g, Plotter& plotter);
Section multi_rank_view(const EnvironmentGroup& g, Plotter& plotter);
// Du et al.'s distributed tools table: tool (backend + comm or own runtime) x network x ranks x
// link, speedup against the same tool on 1 rank, and its plot (distributed_tools_view.cpp).
Section distributed_tools_view(const EnvironmentGroup& g, Plotter& plotter);
Section phase_split_view(const EnvironmentGroup& g, Plotter& plotter);
Section gflops_view(const EnvironmentGroup& g);
Section comm_bench_view(const std::vector<CommBenchRun>& runs, Plotter& plotter);
Section not_ok_view(const std::vector<Record>& records);
Section warnings_view(const std::vector<Record>& records);  // warnings_view.cpp

}  // namespace dlhost::report
