// test_skipped_cases.cpp — console/skipped_cases: the cases a run knows it will skip are told in
// one line per reason (a newcomer's paper_repro on 2 cores: 4 threads..32 threads x network x
// tool), reasons that differ in their numbers only folding into one.
#include <gtest/gtest.h>

#include "console/skipped_cases.h"

namespace dlhost {
namespace {

using json = nlohmann::ordered_json;

std::string threads_reason(int threads) {
  return "needs " + std::to_string(threads) + " threads; this machine has 2 cores";
}

TEST(skipped_cases, NumbersStandingAloneAreTakenOut) {
  const ReasonShape s = reason_shape("needs 16 threads; this machine has 2 cores");
  EXPECT_EQ(s.text, "needs # threads; this machine has # cores");
  EXPECT_EQ(s.numbers, (std::vector<long long>{16, 2}));
  // Part of a name, of a version, of a path: kept.
  const ReasonShape names =
      reason_shape("backend 'cpu_libtorch2' is not built here: libtorch 1.13");
  EXPECT_EQ(names.text, "backend 'cpu_libtorch2' is not built here: libtorch 1.13");
  EXPECT_TRUE(names.numbers.empty());
  EXPECT_EQ(reason_shape("has 2.").text, "has #.");
  EXPECT_EQ(reason_shape("needs 4 GPUs (2 ranks x 2)").numbers, (std::vector<long long>{4, 2, 2}));
}

TEST(skipped_cases, OneLinePerReasonForEveryNetworkToolAndThreadCount) {
  std::vector<KnownSkip> skips;
  for (const char* network : {"fcn5", "fcn8", "alexnet", "resnet50", "lstm32", "lstm64", "fcnr"})
    for (const char* backend : {"cpu_onednn", "cpu_tensorflow"})
      for (int threads : {4, 8, 16, 32})
        skips.push_back({std::string(network) + "." + backend + ".t" + std::to_string(threads),
                         json{{"network", network}, {"backend", backend}, {"threads", threads}},
                         threads_reason(threads)});
  skips.push_back({"fcnr.cpu_onednn.b1024.t1.data=real",
                   json{{"network", "fcnr"}, {"backend", "cpu_onednn"}, {"threads", 1}},
                   "real data: DLHOST_DATA is not set"});
  const std::vector<std::string> lines = folded_skip_lines(skips);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "SKIPPED 56 cases: needs 4..32 threads; this machine has 2 cores (network: fcn5, "
            "fcn8, alexnet, resnet50, lstm32, ... 7 in all; backend: cpu_onednn, cpu_tensorflow; "
            "threads: 4, 8, 16, 32)");
  EXPECT_EQ(
      lines[1],
      "SKIPPED 1 case: real data: DLHOST_DATA is not set (fcnr.cpu_onednn.b1024.t1.data=real)");
}

TEST(skipped_cases, DifferentWordsAreDifferentLines) {
  std::vector<KnownSkip> skips = {
      {"a", json{{"backend", "cpu_mxnet"}}, "backend 'cpu_mxnet' is not built here"},
      {"b", json{{"backend", "cpu_libtorch"}}, "backend 'cpu_libtorch' is not built here"},
      {"c", json{{"backend", "cpu_mxnet"}, {"threads", 2}},
       "backend 'cpu_mxnet' is not built here"},
  };
  const std::vector<std::string> lines = folded_skip_lines(skips);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "SKIPPED 2 cases: backend 'cpu_mxnet' is not built here (threads: (unset), 2)");
  EXPECT_EQ(lines[1], "SKIPPED 1 case: backend 'cpu_libtorch' is not built here (b)");
  EXPECT_TRUE(folded_skip_lines({}).empty());
}

}  // namespace
}  // namespace dlhost
