// statistics.h — the statistics `dlhost compare` rests on: medians, the Mann-Whitney U test on
// raw per-iteration times, a bootstrap confidence interval for a ratio of medians, and the
// geometric mean of ratios. Pure functions on copies of their inputs; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlhost::report {

double median(std::vector<double> xs);  // NaN for an empty sample

// Two-sided Mann-Whitney U test of "the two samples come from the same distribution".
// u is U of the first sample: the number of pairs (x, y) with x > y, ties counting one half.
// Exact (the permutation distribution of U) when a sample has at most 8 values and no value is
// tied; otherwise the normal approximation with the tie correction of the variance and
// a continuity correction of 0.5 — the same choices as scipy.stats.mannwhitneyu(method="auto").
struct UTest {
  double u = 0;
  double p = 1;
  bool exact = false;
};
UTest mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y);

// The smallest two-sided p a U test can give for samples of these sizes (no ties): 2 / C(n+m, n).
// With 3 and 3 values it is 0.1, so nothing can be significant at alpha 0.05.
double smallest_u_test_p(size_t n, size_t m);

// Percentile bootstrap interval of median(y) / median(x) at confidence 1 - alpha: both samples
// resampled with replacement `resamples` times by a Mersenne Twister seeded with `seed`, so the
// interval is the same on every run and machine.
struct Interval {
  double low = 0, high = 0;
};
Interval bootstrap_ratio_of_medians(const std::vector<double>& x, const std::vector<double>& y,
                                    double alpha, int resamples = 2000, uint64_t seed = 20240601);

double geometric_mean(const std::vector<double>& positive);  // NaN for an empty list

}  // namespace dlhost::report
