// test_comm_bench_data.cpp — comm-bench's exact data (commbench/comm_bench_data.h): expected
// results that are exact in every dtype, wrong elements counted, sizes parsed, and the bus
// bandwidth factors of nccl-tests. Pure host code: needs no MPI.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "commbench/comm_bench_data.h"
#include "dlhost/dlhost.h"

namespace {

namespace cb = dlhost::comm_bench;

TEST(CommBenchData, ExpectedResultsAreExactAndWrongElementsAreCounted) {
  const int world = 3;
  const uint64_t n = 100;
  std::vector<float> sum(n), avg(n), mx(n), gathered(n * world), bcast(n);
  cb::fill_expected(cb::Collective::kAllReduce, sum.data(), n, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM,
                    world, 0);
  cb::fill_expected(cb::Collective::kAllReduce, avg.data(), n, DLHOST_DTYPE_F32, DLHOST_REDUCE_AVG,
                    world, 0);
  cb::fill_expected(cb::Collective::kAllReduce, mx.data(), n, DLHOST_DTYPE_F32, DLHOST_REDUCE_MAX,
                    world, 0);
  cb::fill_expected(cb::Collective::kAllGather, gathered.data(), n, DLHOST_DTYPE_F32, 0, world, 0);
  cb::fill_expected(cb::Collective::kBroadcast, bcast.data(), n, DLHOST_DTYPE_F32, 0, world, 2);
  for (uint64_t i = 0; i < n; ++i) {
    int a = cb::input_value(0, i), b = cb::input_value(1, i), c = cb::input_value(2, i);
    ASSERT_EQ(sum[i], static_cast<float>(a + b + c));
    ASSERT_EQ(avg[i], static_cast<float>(a + b + c) / 3.0f);
    ASSERT_EQ(mx[i], static_cast<float>(std::max({a, b, c})));
    ASSERT_EQ(gathered[n + i], static_cast<float>(b));
    ASSERT_EQ(bcast[i], static_cast<float>(c));
  }
  std::vector<float> got = sum;
  EXPECT_EQ(cb::count_wrong(got.data(), sum.data(), n, DLHOST_DTYPE_F32), 0u);
  got[3] += 1;
  std::memset(&got[50], 0x7f, sizeof(float) * 2);  // comm-bench's poison
  EXPECT_EQ(cb::count_wrong(got.data(), sum.data(), n, DLHOST_DTYPE_F32), 3u);

  std::vector<int32_t> iavg(n);
  cb::fill_expected(cb::Collective::kAllReduce, iavg.data(), n, DLHOST_DTYPE_I32, DLHOST_REDUCE_AVG,
                    2, 0);
  for (uint64_t i = 0; i < n; ++i)
    ASSERT_EQ(iavg[i], (cb::input_value(0, i) + cb::input_value(1, i)) / 2);  // truncates
}

TEST(CommBenchData, SizesAndBandwidthFactors) {
  EXPECT_EQ(cb::parse_size("8"), 8u);
  EXPECT_EQ(cb::parse_size("1K"), 1024u);
  EXPECT_EQ(cb::parse_size("64M"), 64u << 20);
  EXPECT_EQ(cb::parse_size("2G"), 2ull << 30);
  EXPECT_EQ(cb::parse_size("4kB"), 4096u);
  EXPECT_THROW(cb::parse_size("4X"), std::invalid_argument);
  EXPECT_THROW(cb::parse_size("M"), std::invalid_argument);
  EXPECT_THROW(cb::parse_size("-1"), std::invalid_argument);
  // Beyond 2^64 the message was only "stoull" (issue 32).
  for (const char* huge : {"99999999999999999999", "2048G"}) {
    try {
      cb::parse_size(huge);
      ADD_FAILURE() << huge << " was taken";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "'" + std::string(huge) + "' is larger than 1T, the largest size comm-bench takes");
    }
  }
  EXPECT_EQ(cb::size_sweep(1024, 4 << 20, 4),
            (std::vector<uint64_t>{1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20}));
  EXPECT_EQ(cb::size_sweep(8, 100, 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_THROW(cb::size_sweep(8, 4, 2), std::invalid_argument);
  EXPECT_DOUBLE_EQ(cb::busbw_factor(cb::Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(cb::busbw_factor(cb::Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(cb::busbw_factor(cb::Collective::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(cb::busbw_factor(cb::Collective::kAllReduce, 1), 0.0);
}

}  // namespace
