// command.h — `dlhost project`: reads results files (a 1-rank case's backward profile) and a
// `dlhost comm-bench --json` file (the all-reduce figures to fit alpha and beta to), prints the
// projected time per mini-batch and efficiency for N ranks on a named interconnect, with and
// without overlap, and, given measured multi-rank records, the error of the projection against
// each. As google/benchmark separates running from its reporters, `compute` reads the files and
// does every computation into a plain record (Projected), and `text_report` / `json_report`
// only write that record out. Reads files only, so it runs before (and without) plugin
// discovery (Command::run_without_plugins).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/subcommand.h"
#include "project/projection.h"
#include "suite/schema.h"

namespace dlhost::project {

struct Options {
  std::vector<std::string> results;  // records with a backward profile
  std::string case_id;               // only this one ("" every 1-rank record with a profile)
  // comm-bench --json files to fit, at most one per world size: N ranks are projected with the
  // fit of N ranks, else the largest world below N (else the smallest), scaled by `algorithm`.
  std::vector<std::string> comm_benches;
  std::vector<int> ranks{2, 4, 8, 16};
  std::string interconnect = key_default<std::string>("interconnect");  // the suite key's
  std::string algorithm = "ring";             // all-reduce cost from one world size to another
  double bandwidth_gbit = 0, latency_us = 0;  // custom: --link-gbit, --link-latency-us
  double bucket_mb = key_default<double>("bucket_mb");  // the suite key's, the runner's
  std::vector<std::string> compare;  // results files with measured multi-rank cases
  std::string json_out;
};

// One comm-bench file and its fit.
struct FittedFile {
  std::string file;
  Fit fit;
  bool in_place = false;  // its all-reduces were in place (as the runner issues them)
  std::string comm;       // the comm plugin it measured ("" when the file does not say)
};

// A measured multi-rank record against the projection of the same network, backend, per-rank
// batch and interconnect.
struct Comparison {
  std::string measured_case;
  int ranks = 0;
  bool oversubscribed = false;  // ranks x threads beyond the record's cores
  long long threads_total = 0, cores = 0;
  bool overlap = true;
  double measured_step_ms = 0, measured_exposed_ms = 0, measured_compute_ms = 0;
  double projected_step_ms = 0, projected_exposed_ms = 0, error_percent = 0;
  // From the compute the ranks measured side by side: the error of the communication model alone.
  double projected_step_ms_from_measured_compute = 0, error_percent_from_measured_compute = 0;
  // A tool's own runtime (the record's distributed.runtime; "" for dlhost's comms): how it was
  // modelled, and its own comm time (NaN without one), shown beside, never as exposed time.
  std::string runtime, model;
  double runtime_comm_ms = 0;
};

// A measured record of a tool's own runtime that is not projected, and why in one line (a
// parameter server's push and pull, an asynchronous mode, no fit of the runtime's collective,
// no 1-rank profile of the tool): never a number the model cannot stand behind.
struct NotProjected {
  std::string measured_case, runtime, reason;
};

// One profiled 1-rank case: its projection for each rank count asked, and the comparisons.
struct CaseProjection {
  std::string case_id, network, backend;
  int per_rank_batch = 0;
  ComputeProfile profile;
  uint64_t gradient_bytes = 0;
  std::vector<Projection> by_ranks;  // in the order of Options::ranks
  std::vector<Comparison> comparisons;
};

// Everything `dlhost project` reports: the record the writers read.
struct Projected {
  std::vector<FittedFile> fits;
  std::vector<Link> links;  // the link for each of Options::ranks, in that order
  std::vector<int> ranks;
  double bucket_mb = 0;
  std::string interconnect;
  bool compared = false;  // --compare given (the JSON then has "comparisons", even empty)
  std::vector<CaseProjection> cases;
  std::vector<NotProjected> not_projected;  // tool runtimes' records among the compared ones
};

// Reads the files and projects; throws std::runtime_error (bad input, with the file) or
// std::invalid_argument (bad option).
Projected compute(const Options& o);
// The lines `dlhost project` prints, and its JSON document (schema dlhost.project/1).
std::string text_report(const Projected& p);
std::string json_report(const Projected& p);

// Both, from compute(o).
struct Report {
  std::string text;
  std::string json;
};
Report run_projection(const Options& o);

Command add_command(CLI::App& app);

}  // namespace dlhost::project
