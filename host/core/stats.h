// stats.h — summary statistics of per-iteration times (the field's set: mean, median, min, max,
// p5, p95, sample standard deviation). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <vector>

namespace dlhost {

struct Summary {
  std::size_t count = 0;
  double mean = 0, median = 0, min = 0, max = 0, p5 = 0, p95 = 0, stddev = 0;
};

// Percentile by linear interpolation between closest ranks (numpy's default), q in [0, 100].
double percentile(std::vector<double> values, double q);
Summary summarize(const std::vector<double>& values);

}  // namespace dlhost
