// test_comm_bench_data.cpp — comm-bench's exact data (commbench/comm_bench_data.h) and its
// collective descriptors (commbench/collectives.h): expected results that are exact in every
// dtype, wrong elements counted, sizes parsed, each collective's row shape, bus bandwidth factor
// (nccl-tests') and the plugin call it issues. Pure host code: needs no MPI.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "commbench/collectives.h"
#include "commbench/comm_bench_data.h"
#include "dlhost/dlhost.h"

namespace {

namespace cb = dlhost::comm_bench;

TEST(CommBenchData, ExpectedResultsAreExactAndWrongElementsAreCounted) {
  const int world = 3;
  const uint64_t n = 100;
  std::vector<float> sum(n), avg(n), mx(n), gathered(n * world), bcast(n);
  cb::kAllReduce.fill_expected(sum.data(), n, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM, world, 0);
  cb::kAllReduce.fill_expected(avg.data(), n, DLHOST_DTYPE_F32, DLHOST_REDUCE_AVG, world, 0);
  cb::kAllReduce.fill_expected(mx.data(), n, DLHOST_DTYPE_F32, DLHOST_REDUCE_MAX, world, 0);
  cb::kAllGather.fill_expected(gathered.data(), n, DLHOST_DTYPE_F32, 0, world, 0);
  cb::kBroadcast.fill_expected(bcast.data(), n, DLHOST_DTYPE_F32, 0, world, 2);
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
  cb::kAllReduce.fill_expected(iavg.data(), n, DLHOST_DTYPE_I32, DLHOST_REDUCE_AVG, 2, 0);
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
  EXPECT_DOUBLE_EQ(cb::kAllReduce.busbw_factor(4), 1.5);
  EXPECT_DOUBLE_EQ(cb::kAllGather.busbw_factor(4), 0.75);
  EXPECT_DOUBLE_EQ(cb::kBroadcast.busbw_factor(4), 1.0);
  EXPECT_DOUBLE_EQ(cb::kAllReduce.busbw_factor(1), 0.0);
}

TEST(CommBenchCollectives, EachDescriptorSaysWhatItsRowMovesAndFindsByName) {
  // nccl-tests' sizes: all_reduce and broadcast move the size per rank; all_gather's size is the
  // gathered buffer, each rank's block a world-th of it; too small for one element: count 0.
  const cb::RowShape ar = cb::kAllReduce.shape(1024, 4, 4);
  EXPECT_EQ(ar.count, 256u);
  EXPECT_EQ(ar.recv_count, 256u);
  EXPECT_EQ(ar.bytes, 1024u);
  const cb::RowShape bc = cb::kBroadcast.shape(1000, 8, 4);
  EXPECT_EQ(bc.count, 125u);
  EXPECT_EQ(bc.recv_count, 125u);
  EXPECT_EQ(bc.bytes, 1000u);
  const cb::RowShape ag = cb::kAllGather.shape(1000, 4, 3);  // 83 elements each, 996 B gathered
  EXPECT_EQ(ag.count, 83u);
  EXPECT_EQ(ag.recv_count, 249u);
  EXPECT_EQ(ag.bytes, 996u);
  EXPECT_EQ(cb::kAllGather.shape(8, 4, 4).count, 0u);

  ASSERT_EQ(cb::collectives().size(), 3u);
  for (const cb::Collective* c : cb::collectives()) EXPECT_EQ(cb::find_collective(c->name), c);
  EXPECT_EQ(cb::find_collective("reduce_scatter"), nullptr);
  EXPECT_TRUE(cb::kAllReduce.reduces && cb::kAllReduce.in_place && !cb::kAllReduce.rooted);
  EXPECT_TRUE(cb::kBroadcast.rooted && cb::kBroadcast.root_input_in_recv);
  EXPECT_FALSE(cb::kAllGather.reduces || cb::kAllGather.rooted || cb::kAllGather.in_place);
}

// A comm table whose collectives only record what they were called with.
struct Call {
  std::string op;
  const void* send = nullptr;
  const void* recv = nullptr;
  uint64_t count = 0;
  int32_t dtype = 0, redop = 0, root = 0, space = 0;
};
Call g_call;

dlhost_status* fake_all_reduce(dlhost_comm*, const void* send, void* recv, uint64_t count,
                               int32_t dtype, int32_t op, int32_t space, dlhost_request**) {
  g_call = {"all_reduce", send, recv, count, dtype, op, -1, space};
  return nullptr;
}
dlhost_status* fake_broadcast(dlhost_comm*, void* buffer, uint64_t count, int32_t dtype,
                              int32_t root, int32_t space, dlhost_request**) {
  g_call = {"broadcast", nullptr, buffer, count, dtype, 0, root, space};
  return nullptr;
}
dlhost_status* fake_all_gather(dlhost_comm*, const void* send, void* recv, uint64_t count,
                               int32_t dtype, int32_t space, dlhost_request**) {
  g_call = {"all_gather", send, recv, count, dtype, 0, -1, space};
  return nullptr;
}

TEST(CommBenchCollectives, EachDescriptorIssuesItsOwnCallWithItsParameters) {
  dlhost_comm_api api{};
  api.all_reduce = fake_all_reduce;
  api.broadcast = fake_broadcast;
  api.all_gather = fake_all_gather;
  float send[4] = {}, recv[4] = {};
  dlhost_request* request = nullptr;
  cb::IssueArgs a{send, recv, 4, DLHOST_DTYPE_F32, DLHOST_REDUCE_MAX, 2, DLHOST_MEMORY_HOST, false};
  for (const cb::Collective* c : cb::collectives()) {
    g_call = {};
    EXPECT_EQ(c->issue(&api, nullptr, a, &request), nullptr);
    EXPECT_EQ(g_call.op, c->name);
    EXPECT_EQ(g_call.recv, recv);
    EXPECT_EQ(g_call.count, 4u);
    EXPECT_EQ(g_call.dtype, DLHOST_DTYPE_F32);
  }
  cb::kAllReduce.issue(&api, nullptr, a, &request);
  EXPECT_EQ(g_call.send, send);
  EXPECT_EQ(g_call.redop, DLHOST_REDUCE_MAX);
  a.in_place = true;  // as data parallelism issues it: the receive buffer is the input
  cb::kAllReduce.issue(&api, nullptr, a, &request);
  EXPECT_EQ(g_call.send, recv);
  cb::kBroadcast.issue(&api, nullptr, a, &request);
  EXPECT_EQ(g_call.root, 2);
}

}  // namespace
