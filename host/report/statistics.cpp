// statistics.cpp — see statistics.h.
#include "report/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace dlhost::report {

double median(std::vector<double> xs) {
  if (xs.empty()) return std::numeric_limits<double>::quiet_NaN();
  size_t mid = xs.size() / 2;
  std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(mid), xs.end());
  double upper = xs[mid];
  if (xs.size() % 2 == 1) return upper;
  double lower = *std::max_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

namespace {

// Number of arrangements of n x's and m y's whose U (pairs x > y) is u, for every u, from the
// recurrence f(i, j, u) = f(i-1, j, u-j) + f(i, j-1, u) (the largest value is an x or a y).
// Kept as one count vector per i, updated for j = 1..m: memory (n+1) x (n*m+1).
std::vector<double> u_counts(size_t n, size_t m) {
  std::vector<std::vector<double>> f(n + 1, std::vector<double>(n * m + 1, 0.0));
  for (auto& counts : f) counts[0] = 1;  // j = 0: no y, U = 0
  for (size_t j = 1; j <= m; ++j)
    for (size_t i = 1; i <= n; ++i)  // f[i] holds (i, j-1); f[i-1] already holds (i-1, j)
      for (size_t u = i * j + 1; u-- > j;) f[i][u] += f[i - 1][u - j];
  return f[n];
}

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

UTest mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y) {
  UTest t;
  if (x.empty() || y.empty()) return t;
  // Ranks of the pooled sample, ties sharing their mean rank.
  std::vector<std::pair<double, int>> pooled;
  for (double v : x) pooled.push_back({v, 0});
  for (double v : y) pooled.push_back({v, 1});
  std::sort(pooled.begin(), pooled.end());
  double rank_sum_x = 0, tie_term = 0;
  bool ties = false;
  for (size_t i = 0; i < pooled.size();) {
    size_t j = i;
    while (j < pooled.size() && pooled[j].first == pooled[i].first) ++j;
    double tied = static_cast<double>(j - i);
    double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (size_t k = i; k < j; ++k)
      if (pooled[k].second == 0) rank_sum_x += mean_rank;
    if (tied > 1) ties = true;
    tie_term += tied * tied * tied - tied;
    i = j;
  }
  double n = static_cast<double>(x.size()), m = static_cast<double>(y.size());
  t.u = rank_sum_x - n * (n + 1) / 2;
  if (!ties && std::min(x.size(), y.size()) <= 8) {
    // U's distribution is symmetric about n*m/2, so counting with the smaller sample as x gives
    // the same two-sided p.
    std::vector<double> counts =
        u_counts(std::min(x.size(), y.size()), std::max(x.size(), y.size()));
    double total = 0, at_most = 0, at_least = 0;
    for (size_t u = 0; u < counts.size(); ++u) {
      total += counts[u];
      if (static_cast<double>(u) <= t.u) at_most += counts[u];
      if (static_cast<double>(u) >= t.u) at_least += counts[u];
    }
    t.p = std::min(1.0, 2 * std::min(at_most, at_least) / total);
    t.exact = true;
    return t;
  }
  double mean = n * m / 2;
  double var = n * m / 12 * ((n + m + 1) - tie_term / ((n + m) * (n + m - 1)));
  if (var <= 0) return t;  // every value equal: no evidence of a difference
  double z = (std::abs(t.u - mean) - 0.5) / std::sqrt(var);
  t.p = std::min(1.0, 2 * normal_sf(std::max(z, 0.0)));
  return t;
}

double smallest_u_test_p(size_t n, size_t m) {
  if (n == 0 || m == 0) return 1;
  double arrangements = 1;  // C(n + m, n)
  for (size_t k = 1; k <= n; ++k)
    arrangements = arrangements * static_cast<double>(m + k) / static_cast<double>(k);
  return std::min(1.0, 2 / arrangements);
}

Interval bootstrap_ratio_of_medians(const std::vector<double>& x, const std::vector<double>& y,
                                    double alpha, int resamples, uint64_t seed) {
  if (x.empty() || y.empty()) return {};
  // mt19937_64's sequence is fixed by the standard; the modulo's bias is below 2^-50 here.
  std::mt19937_64 rng(seed);
  std::vector<double> ratios, bx(x.size()), by(y.size());
  ratios.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    for (auto& v : bx) v = x[rng() % x.size()];
    for (auto& v : by) v = y[rng() % y.size()];
    double base = median(bx);
    if (base > 0) ratios.push_back(median(by) / base);
  }
  if (ratios.empty()) return {};
  std::sort(ratios.begin(), ratios.end());
  auto quantile = [&](double q) {
    double pos = q * static_cast<double>(ratios.size() - 1);
    size_t lo = static_cast<size_t>(std::floor(pos));
    size_t hi = std::min(lo + 1, ratios.size() - 1);
    return ratios[lo] + (pos - static_cast<double>(lo)) * (ratios[hi] - ratios[lo]);
  };
  return {quantile(alpha / 2), quantile(1 - alpha / 2)};
}

double geometric_mean(const std::vector<double>& positive) {
  if (positive.empty()) return std::numeric_limits<double>::quiet_NaN();
  double log_sum = 0;
  for (double v : positive) log_sum += std::log(v);
  return std::exp(log_sum / static_cast<double>(positive.size()));
}

}  // namespace dlhost::report
