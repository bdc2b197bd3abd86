// test_statistics.cpp — the statistics behind `dlhost compare`, on samples whose answers are
// known. Expected U and p values were computed once with scipy 1.10.1 (Debian bookworm's
// python3-scipy), scipy.stats.mannwhitneyu(x, y) with its defaults (two-sided, method="auto",
// use_continuity=True), and are hard-coded here.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "report/statistics.h"

using namespace dlhost::report;

TEST(Median, OddEvenEmpty) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(MannWhitney, SeparatedSmallSamplesExact) {
  // scipy: statistic=0.0, pvalue=0.007936507936507936 (= 2 / C(10, 5))
  UTest t = mann_whitney_u({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10});
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 0);
  EXPECT_NEAR(t.p, 0.007936507936507936, 1e-12);
  // The other way round U is n*m and p the same.
  UTest back = mann_whitney_u({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(back.u, 25);
  EXPECT_NEAR(back.p, t.p, 1e-12);
}

TEST(MannWhitney, InterleavedExact) {
  // scipy: statistic=2.0, pvalue=0.06349206349206349
  UTest t = mann_whitney_u({3.1, 4.2, 5.3, 1.0, 2.5}, {4.0, 6.1, 7.7, 8.2});
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 2);
  EXPECT_NEAR(t.p, 0.06349206349206349, 1e-12);
}

TEST(MannWhitney, OneSmallOneLargeSampleExact) {
  // scipy: statistic=0.0, pvalue=0.005494505494505495 (= 2 / C(14, 3)); exact since n = 3 <= 8
  UTest t =
      mann_whitney_u({1.1, 2.2, 3.3}, {4.4, 5.5, 6.6, 7.7, 8.8, 9.9, 10.1, 11.2, 12.3, 13.4, 14.5});
  EXPECT_TRUE(t.exact);
  EXPECT_NEAR(t.p, 0.005494505494505495, 1e-12);
}

TEST(MannWhitney, TiesUseNormalApproximationWithTieCorrection) {
  // scipy: statistic=18.5, pvalue=0.018795060662434297
  UTest t = mann_whitney_u({1, 2, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 4, 6, 8, 10, 12, 14, 16, 18, 20});
  EXPECT_FALSE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 18.5);
  EXPECT_NEAR(t.p, 0.018795060662434297, 1e-9);
}

TEST(MannWhitney, ShiftedLargeSamplesSignificant) {
  std::vector<double> base, shifted, interleaved;
  for (int i = 0; i < 10; ++i) {
    base.push_back(10.0 + i * 0.1);
    shifted.push_back(12.0 + i * 0.1);
    interleaved.push_back(10.05 + i * 0.1);
  }
  // scipy: statistic=0.0, pvalue=0.00018267179110955002
  UTest t = mann_whitney_u(base, shifted);
  EXPECT_FALSE(t.exact);
  EXPECT_NEAR(t.p, 0.00018267179110955002, 1e-9);
  // Equal distributions (interleaved): scipy statistic=45.0, pvalue=0.7337299956962472
  UTest same = mann_whitney_u(base, interleaved);
  EXPECT_DOUBLE_EQ(same.u, 45);
  EXPECT_NEAR(same.p, 0.7337299956962472, 1e-9);
  EXPECT_GT(same.p, 0.05);
}

TEST(MannWhitney, AllEqualIsNotSignificant) {
  UTest t = mann_whitney_u({5, 5, 5, 5}, {5, 5, 5});
  EXPECT_DOUBLE_EQ(t.p, 1);
}

TEST(MannWhitney, SmallestPossibleP) {
  EXPECT_NEAR(smallest_u_test_p(3, 3), 0.1, 1e-12);  // 2 / C(6, 3)
  EXPECT_NEAR(smallest_u_test_p(5, 5), 2.0 / 252, 1e-12);
}

TEST(Bootstrap, RatioIntervalCoversTheShiftAndIsReproducible) {
  std::vector<double> base, doubled;
  for (int i = 0; i < 20; ++i) {
    base.push_back(10 + (i % 7) * 0.1);
    doubled.push_back(2 * (10 + (i % 5) * 0.1));
  }
  double ratio = median(doubled) / median(base);
  Interval a = bootstrap_ratio_of_medians(base, doubled, 0.05);
  Interval b = bootstrap_ratio_of_medians(base, doubled, 0.05);
  EXPECT_DOUBLE_EQ(a.low, b.low);  // fixed seed
  EXPECT_DOUBLE_EQ(a.high, b.high);
  EXPECT_LE(a.low, ratio);
  EXPECT_GE(a.high, ratio);
  EXPECT_GT(a.low, 1.9);  // clearly about 2, clearly not 1
  EXPECT_LT(a.high, 2.1);
  // Identical samples: the interval holds 1.
  Interval same = bootstrap_ratio_of_medians(base, base, 0.05);
  EXPECT_LE(same.low, 1.0);
  EXPECT_GE(same.high, 1.0);
}

TEST(GeometricMean, OfRatios) {
  EXPECT_NEAR(geometric_mean({2.0, 0.5}), 1.0, 1e-12);
  EXPECT_NEAR(geometric_mean({1.0, 4.0}), 2.0, 1e-12);
  EXPECT_TRUE(std::isnan(geometric_mean({})));
}
