// test_host_services.cpp — the host services plugins call (status, options, the rendezvous
// store), the statistics of timings, seeded synthetic data, and the results file reader.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "core/graph.h"
#include "core/host_api.h"
#include "core/stats.h"
#include "data/synthetic.h"
#include "record/results_file.h"
#include "run/results.h"

namespace {

TEST(HostApi, StatusRoundTrip) {
  const dlhost_host_api* h = dlhost::host_api();
  EXPECT_EQ(h->struct_size, DLHOST_HOST_API_STRUCT_SIZE);
  EXPECT_EQ(h->abi_major, static_cast<uint32_t>(DLHOST_ABI_MAJOR));
  dlhost_status* s = h->status_create(DLHOST_CODE_UNIMPLEMENTED, "no LRN here");
  EXPECT_EQ(h->status_code(s), DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_STREQ(h->status_message(s), "no LRN here");
  h->status_destroy(s);
  h->status_destroy(nullptr);  // accepts NULL
  try {
    dlhost::check_status(h->status_create(DLHOST_CODE_INTERNAL, "boom"), "compile");
    FAIL() << "no throw";
  } catch (const dlhost::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_INTERNAL);
    EXPECT_STREQ(e.what(), "compile: boom");
  }
}

TEST(HostApi, Options) {
  dlhost_options o;
  o.values["threads"] = "2";
  const dlhost_host_api* h = dlhost::host_api();
  EXPECT_STREQ(h->option_get(&o, "threads"), "2");
  EXPECT_EQ(h->option_get(&o, "absent"), nullptr);
  EXPECT_EQ(h->option_get(nullptr, "threads"), nullptr);
}

TEST(HostApi, StoreSetGetWaitsAndTimesOut) {
  dlhost::reset_store();
  const dlhost_host_api* h = dlhost::host_api();
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(h->store_set("nccl_id", "abcd", 4), nullptr);
  });
  char buf[8] = {};
  size_t size = 0;
  EXPECT_EQ(h->store_get("nccl_id", 5000, buf, sizeof(buf), &size), nullptr);
  writer.join();
  EXPECT_EQ(size, 4u);
  EXPECT_EQ(std::string(buf, 4), "abcd");
  dlhost::StatusPtr dup(h->store_set("nccl_id", "x", 1));
  ASSERT_NE(dup, nullptr);
  EXPECT_EQ(dup->code, DLHOST_CODE_ALREADY_EXISTS);
  size = 99;
  dlhost::StatusPtr small(h->store_get("nccl_id", 0, buf, 2, &size));
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->code, DLHOST_CODE_OUT_OF_RANGE);
  EXPECT_EQ(size, 99u) << "on error *size is left untouched (ABI 1.2)";
  EXPECT_EQ(h->store_size("nccl_id", 0, &size), nullptr);
  EXPECT_EQ(size, 4u);
  dlhost::StatusPtr late(h->store_get("never", 20, buf, sizeof(buf), &size));
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->code, DLHOST_CODE_DEADLINE_EXCEEDED);
}

TEST(Stats, SummaryMatchesNumpy) {
  // numpy.percentile([1..10], [5, 50, 95]) = 1.45, 5.5, 9.55; std(ddof=1) = 3.0277
  std::vector<double> v{10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  auto s = dlhost::summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_NEAR(s.p5, 1.45, 1e-12);
  EXPECT_NEAR(s.p95, 9.55, 1e-12);
  EXPECT_NEAR(s.stddev, 3.0276503540974917, 1e-12);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 10);
  EXPECT_EQ(dlhost::summarize({}).count, 0u);
}

std::unique_ptr<dlhost::Graph> small_classifier() {
  dlhost::GraphBuilder b("t", 16);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {12});
  int32_t y = b.input("labels", DLHOST_DTYPE_I32, {});
  dlhost_fc_attrs fc{DLHOST_FC_ATTRS_STRUCT_SIZE, 7, 1, 1};
  b.softmax_cross_entropy("loss", b.fc("fc", x, fc), y);
  return b.finish();
}

TEST(Synthetic, SeededAndInRange) {
  auto g = small_classifier();
  auto a = dlhost::synthetic_inputs(*g, 1), b = dlhost::synthetic_inputs(*g, 1),
       c = dlhost::synthetic_inputs(*g, 2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].bytes, b[0].bytes);
  EXPECT_NE(a[0].bytes, c[0].bytes);
  const auto* labels = reinterpret_cast<const int32_t*>(a[1].bytes.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_GE(labels[i], 0);
    EXPECT_LT(labels[i], 7);
  }
  auto w = dlhost::initial_params(*g, 3);
  ASSERT_EQ(w.size(), 2u);
  double limit = std::sqrt(6.0 / (12 + 7));
  for (float v : w[0]) EXPECT_LE(std::abs(v), limit);
  for (float v : w[1]) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(w, dlhost::initial_params(*g, 3));
  // The runner loads one parameter at a time: each alone must be the same numbers.
  for (int32_t i = 0; i < 2; ++i) EXPECT_EQ(dlhost::initial_param(*g, 3, i), w[i]);
  EXPECT_NE(dlhost::initial_param(*g, 4, 0), w[0]);
}

TEST(Results, AppendedLinesReadBackAndTornLastLineIsSkipped) {
  std::string path = testing::TempDir() + "/results_test.jsonl";
  std::remove(path.c_str());
  {
    dlhost::ResultsWriter w(path);
    w.append({{"schema_version", 1}, {"case_id", "a"}, {"status", "OK"}});
    w.append({{"schema_version", 1}, {"case_id", "b"}, {"status", "SKIPPED"}});
  }
  {
    std::ofstream torn(path, std::ios::app);
    torn << R"({"case_id": "c", "sta)";  // what a kill during a write leaves
  }
  auto f = dlhost::record::read_results(path, dlhost::record::BadLines::refuse);
  ASSERT_EQ(f.records.size(), 2u);
  EXPECT_EQ(f.records[1].data["case_id"], "b");
  ASSERT_EQ(f.torn.size(), 1u);
  EXPECT_EQ(f.torn[0].line, 3);
}

}  // namespace
