// compare.h — `dlhost compare BASE NEW`: for each case in both results files, the ratio of median
// step times (new / base) with a bootstrap confidence interval, a Mann-Whitney U test on the raw
// per-iteration step times, the geometric mean of the ratios, regressions beyond a threshold,
// cases in one file only, and the environment fields that differ between the files.
//
// A row is judged only when it can be: a case whose parameters differ between the files
// (params_hash) is shown but left out unless asked; a row the test cannot decide (too few
// iterations, a median of 0) says "inconclusive" and why, never "same". As a CI gate
// (--fail-on-regression) a comparison fails on a regression, on a case OK in BASE and not OK in
// NEW, and on a NEW that holds no case comparable with BASE.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "report/records.h"
#include "report/statistics.h"

namespace dlhost::report {

struct CaseComparison {
  std::string case_id;
  size_t base_n = 0, new_n = 0;
  double base_median = 0, new_median = 0;
  double ratio = 0;  // new / base: above 1 is slower
  Interval interval;
  UTest test;
  bool significant = false;
  // "REGRESSION" (significant and slower beyond the threshold), "faster" (significant and faster
  // beyond it), "within threshold" (significant, smaller change), "same" (not significant and
  // the whole interval within the threshold), "inconclusive" (the test cannot decide: `reason`
  // says why), "params differ" (not judged: `reason` names the parameters).
  std::string verdict;
  std::string reason;
  bool params_differ = false;
  bool judged = true;  // counts in the regressions, the geometric mean and the gate
};

struct Comparison {
  double alpha = 0.05, threshold = 0.05;
  std::vector<CaseComparison> cases;
  std::vector<std::string> only_in_base, only_in_new;
  std::vector<std::string> broken;        // "ID: ..." OK in base, not OK (or no samples) in new
  std::vector<std::string> not_compared;  // "ID: why" (not OK in base)
  std::vector<std::string> environment_differences;
  double geometric_mean_ratio = 0;  // NaN when no ratio went into it
  size_t geometric_mean_cases = 0;  // the rows whose ratio it is the mean of
  int regressions = 0, inconclusive = 0, params_differ = 0;
  size_t judged = 0;  // rows judged (the comparable cases)
};

// `include_changed_params`: judge cases whose params_hash differs too (their rows say so).
Comparison compare_records(const std::vector<Record>& base, const std::vector<Record>& candidate,
                           double alpha, double threshold, bool include_changed_params = false);
// Why a CI gate fails on this comparison (a regression, a case OK in base and broken in new, no
// comparable case); empty when it passes.
std::vector<std::string> gate_failures(const Comparison& c);
void print_comparison(const Comparison& c, const std::string& base_name,
                      const std::string& new_name, std::ostream& out);

// For comparing two backends (two builds of one library, say): keeps the records of `backend`
// and drops its name from each case id ("fcn5.cpu_onednn3.b64.t1" -> "fcn5.b64.t1"), so that the
// same network, batch and threads pair up across backends. Throws InputError when no record of
// `backend` is there.
std::vector<Record> cases_of_backend(const std::vector<Record>& records, const std::string& backend,
                                     const std::string& file);

struct CompareOptions {
  std::string base, candidate;
  double alpha = 0.05, threshold = 0.05;
  bool fail_on_regression = false;
  bool include_changed_params = false;
};
// 0; 1 when fail_on_regression and gate_failures is not empty; 2 for bad input (said on `err`).
// `backends` (--backends BASE,NEW): when set, BASE's records of backends.first are compared with
// NEW's of backends.second (cases_of_backend).
int run_compare(const CompareOptions& o, std::ostream& out, std::ostream& err,
                const std::pair<std::string, std::string>& backends = {});

}  // namespace dlhost::report
