// test_warnings.cpp — each warning rule on a constructed record or measurement: it fires past its
// threshold and stays quiet below; /proc/stat's busy time and the governor read from a
// constructed sysfs tree; every code in the results schema.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "console/library_dispatch.h"
#include "console/warnings.h"
#include "core/environment.h"

namespace dlhost {
namespace {

using json = nlohmann::ordered_json;

json environment(const std::string& build = "Release", const std::string& governor = "unknown",
                 int cores = 4) {
  return json{{"cores", cores}, {"build_type", build}, {"cpu_governor", governor}};
}

// An OK record with these step times, threads and ranks.
json record(std::vector<double> steps, int threads = 1, int ranks = 1, json env = environment()) {
  return json{{"status", "OK"},
              {"params", {{"threads", threads}, {"ranks", ranks}}},
              {"resolved", {{"threads_used", threads}}},
              {"timing", {{"samples", {{"step", steps}}}}},
              {"environment", env}};
}

std::vector<std::string> codes(const std::vector<Warning>& ws) {
  std::vector<std::string> out;
  for (const auto& w : ws) out.push_back(w.code);
  return out;
}

const std::vector<double> kSteady{10.0, 10.1, 10.2, 9.9, 10.0};

TEST(Warnings, QuietOnASteadyCase) {
  EXPECT_TRUE(case_warnings(record(kSteady), CaseLoad{5, 0.1, true}).empty());
  EXPECT_TRUE(environment_warnings(environment()).empty());
  EXPECT_TRUE(warnings_json(record(kSteady), CaseLoad{}).empty());
}

TEST(Warnings, SpreadAboveTheThreshold) {
  // q1 = 10, median = 11, q3 = 14: IQR/median = 36%.
  auto ws = case_warnings(record({10, 10, 11, 14, 20}), CaseLoad{});
  ASSERT_EQ(codes(ws), std::vector<std::string>{kWarnSpread});
  EXPECT_NE(ws[0].message.find("IQR/median 36.4% (threshold 10.0%) over 5 timed steps"),
            std::string::npos)
      << ws[0].message;
  EXPECT_NE(ws[0].message.find("--set iterations=20"), std::string::npos);
  WarningThresholds loose;
  loose.spread_iqr_over_median = 0.5;
  EXPECT_TRUE(case_warnings(record({10, 10, 11, 14, 20}), CaseLoad{}, loose).empty());
  // Two steps tell nothing about spread.
  EXPECT_TRUE(case_warnings(record({10, 20}), CaseLoad{}).empty());
}

TEST(Warnings, WarmupShortWhileTheFirstTimedStepsStillSettle) {
  // cpu_mxnet AlexNet-R b1024 after 1 warm-up step (2026-12-07): its steps 2 and 3 still touch
  // fresh memory. First third (658, 633): median 645.5; last third (594, 615): 604.5; +6.8%.
  json settling = record({658, 633, 590, 594, 615});
  settling["timing"]["warmup"] = 1;
  auto ws = case_warnings(settling, CaseLoad{});
  ASSERT_EQ(codes(ws), std::vector<std::string>{kWarnWarmupShort});  // not spread: IQR 6%
  EXPECT_NE(ws[0].message.find("the first 2 timed step(s) (median 645.50 ms) took 6.8% longer "
                               "than the last 2 (604.50 ms; threshold 5.0%)"),
            std::string::npos)
      << ws[0].message;
  EXPECT_NE(ws[0].message.find("--set warmup=3"), std::string::npos) << ws[0].message;
  WarningThresholds loose;
  loose.warmup_head_over_tail = 0.10;
  EXPECT_TRUE(case_warnings(settling, CaseLoad{}, loose).empty());
  // One slow step beside a settled one is not a warm-up: every step of the first third must be
  // more than 2.5% over the last third's median (cpu_tensorflow FCN-8, 2 threads, 2026-12-07).
  EXPECT_TRUE(case_warnings(record({700, 600, 601, 599, 600, 602}), CaseLoad{}).empty());
  EXPECT_TRUE(case_warnings(record({271.1, 323.8, 264.7, 267.1, 265.1}), CaseLoad{}).empty());
  // Three steps are too few to tell a trend from noise; falling steps only.
  EXPECT_TRUE(case_warnings(record({650, 630, 590}), CaseLoad{}).empty());
  EXPECT_TRUE(case_warnings(record({590, 600, 615, 630}), CaseLoad{}).empty());
}

// The record's schema names every code a record may carry: a new rule without it there makes
// every record that has its warning fail validation (tests/e2e validate real runs' records).
TEST(Warnings, EveryCodeIsInTheResultsSchema) {
  std::ifstream in(DLHOST_RESULTS_SCHEMA);
  ASSERT_TRUE(in) << DLHOST_RESULTS_SCHEMA;
  const json schema = json::parse(in);
  const json& codes_enum =
      schema.at("properties").at("warnings").at("items").at("properties").at("code").at("enum");
  for (const char* code :
       {kWarnSpread, kWarnWarmupShort, kWarnGovernor, kWarnDebugBuild, kWarnPluginDebugBuild,
        kWarnThreads, kWarnOtherLoad, kWarnLibraryDispatch})
    EXPECT_NE(std::find(codes_enum.begin(), codes_enum.end(), code), codes_enum.end()) << code;
}

TEST(Warnings, ThreadsAboveCores) {
  EXPECT_EQ(codes(case_warnings(record(kSteady, 8, 1), CaseLoad{})),
            std::vector<std::string>{kWarnThreads});
  // 2 ranks x 3 threads = 6 on 4 cores.
  auto ws = case_warnings(record(kSteady, 3, 2), CaseLoad{});
  ASSERT_EQ(codes(ws), std::vector<std::string>{kWarnThreads});
  EXPECT_NE(ws[0].message.find("3 thread(s) x 2 rank(s) on 4 core(s)"), std::string::npos);
  EXPECT_TRUE(case_warnings(record(kSteady, 2, 2), CaseLoad{}).empty());
  // Ranks spread over nodes: only ranks_per_node share a node's cores.
  json spread_out = record(kSteady, 3, 4);
  spread_out["params"]["ranks_per_node"] = 1;
  EXPECT_TRUE(case_warnings(spread_out, CaseLoad{}).empty());
}

TEST(Warnings, OtherLoadDuringTheCase) {
  EXPECT_EQ(codes(case_warnings(record(kSteady), CaseLoad{5.0, 1.4, true})),
            std::vector<std::string>{kWarnOtherLoad});
  EXPECT_TRUE(case_warnings(record(kSteady), CaseLoad{5.0, 0.3, true}).empty());
  // Too short to judge at the kernel's tick, or not measured.
  EXPECT_TRUE(case_warnings(record(kSteady), CaseLoad{0.2, 3.0, true}).empty());
  EXPECT_TRUE(case_warnings(record(kSteady), CaseLoad{5.0, 3.0, false}).empty());
}

TEST(Warnings, LoadBetweenTwoSamples) {
  // 10 s wall; the machine was busy 25 s of CPU, 8 of them ours: others 1.7 cores.
  CaseLoad load = load_between(CpuTimes{100, 50, 1000}, CpuTimes{125, 58, 1010});
  EXPECT_TRUE(load.measured);
  EXPECT_DOUBLE_EQ(load.wall_s, 10);
  EXPECT_DOUBLE_EQ(load.other_busy_cores, 1.7);
  // Our own time counted more finely than the machine's ticks: never negative.
  EXPECT_DOUBLE_EQ(load_between(CpuTimes{100, 50, 0}, CpuTimes{101, 52, 1}).other_busy_cores, 0);
}

TEST(Warnings, BusySecondsOfProcStat) {
  const std::string stat =
      "cpu  500 0 100 9000 50 0 10 0 0 0\n"
      "cpu0 100 10 20 4000 5 1 2 3 7 0\n"
      "cpu1 400 0 80 5000 45 0 8 0 0 0\n"
      "intr 1 2 3\n";
  // user + nice + system + irq + softirq + steal; idle, iowait and guest (inside user) left out.
  EXPECT_DOUBLE_EQ(busy_seconds(stat, 100, {0}), 1.36);
  EXPECT_DOUBLE_EQ(busy_seconds(stat, 100, {1}), 4.88);
  EXPECT_DOUBLE_EQ(busy_seconds(stat, 100, {}), 6.24);
}

TEST(Warnings, GovernorAndBuildType) {
  EXPECT_EQ(codes(environment_warnings(environment("Release", "powersave"))),
            std::vector<std::string>{kWarnGovernor});
  EXPECT_TRUE(environment_warnings(environment("Release", "performance")).empty());
  EXPECT_TRUE(environment_warnings(environment("Release", "unknown")).empty());
  // The Debug build faked in the record: the rule reads build_type only.
  auto ws = environment_warnings(environment("Debug"));
  ASSERT_EQ(codes(ws), std::vector<std::string>{kWarnDebugBuild});
  EXPECT_NE(ws[0].message.find("'Debug'"), std::string::npos);
  EXPECT_TRUE(environment_warnings(environment("RelWithDebInfo")).empty());
}

TEST(Warnings, RecordCarriesBothKindsAndNoneWithoutTiming) {
  json rec = record({10, 10, 11, 14, 20}, 8, 1, environment("Debug", "ondemand"));
  json ws = warnings_json(rec, CaseLoad{});
  ASSERT_EQ(ws.size(), 4u);
  EXPECT_EQ(ws[0]["code"], kWarnGovernor);
  EXPECT_EQ(ws[1]["code"], kWarnDebugBuild);
  EXPECT_EQ(ws[2]["code"], kWarnSpread);
  EXPECT_EQ(ws[3]["code"], kWarnThreads);
  rec.erase("timing");  // a skipped case measured nothing
  EXPECT_TRUE(warnings_json(rec, CaseLoad{5, 3, true}).empty());
}

TEST(Warnings, UnoptimizedBackendPlugin) {
  json rec = record({10, 10, 10}, 1, 1, environment("Release", "performance"));
  rec["backend"] = {{"name", "acme"}, {"build", nullptr}};
  EXPECT_TRUE(case_warnings(rec, CaseLoad{}).empty());  // the plugin does not say: no warning
  rec["backend"]["build"] = {{"text", "optimized=1 ndebug=1"}, {"optimized", true}};
  EXPECT_TRUE(case_warnings(rec, CaseLoad{}).empty());
  rec["backend"]["build"] = {{"text", "optimized=0 ndebug=0"}, {"optimized", false}};
  auto ws = case_warnings(rec, CaseLoad{});
  ASSERT_EQ(codes(ws), std::vector<std::string>{kWarnPluginDebugBuild});
  EXPECT_NE(ws[0].message.find("'acme'"), std::string::npos);
  EXPECT_NE(ws[0].message.find("CMAKE_BUILD_TYPE=Release"), std::string::npos);
}

TEST(Warnings, GovernorReadFromSysfs) {
  namespace fs = std::filesystem;
  fs::path root = fs::path(DLHOST_PROGRESS_TEST_OUT) / "sysfs_cpu";
  fs::remove_all(root);
  EXPECT_EQ(cpu_governor(root.string()), "unknown");  // no such folder
  for (int c : {0, 1}) fs::create_directories(root / ("cpu" + std::to_string(c)) / "cpufreq");
  fs::create_directories(root / "cpufreq");           // not a CPU: ignored
  EXPECT_EQ(cpu_governor(root.string()), "unknown");  // cpufreq without a governor file
  std::ofstream(root / "cpu0/cpufreq/scaling_governor") << "powersave\n";
  std::ofstream(root / "cpu1/cpufreq/scaling_governor") << "powersave\n";
  EXPECT_EQ(cpu_governor(root.string()), "powersave");
  std::ofstream(root / "cpu1/cpufreq/scaling_governor") << "performance\n";
  EXPECT_EQ(cpu_governor(root.string()), "performance,powersave");
}

}  // namespace
}  // namespace dlhost
