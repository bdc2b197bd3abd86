// test_compare.cpp — `dlhost compare` on fixture files (data/base.jsonl, data/new.jsonl): one
// case unchanged, one 19% slower, one in each file only, a different git revision; the exit
// codes for CI and for bad input; and the command line through CLI11.
#include <gtest/gtest.h>

#include <sstream>

#include "report/commands.h"
#include "report/compare.h"

using namespace dlhost::report;

namespace {
const std::string kData = DLHOST_REPORT_TEST_DATA;

Comparison fixture_comparison() {
  Inputs base, candidate;
  read_results_file(kData + "/base.jsonl", base);
  read_results_file(kData + "/new.jsonl", candidate);
  return compare_records(base.records, candidate.records, 0.05, 0.05);
}
}  // namespace

TEST(Compare, VerdictsRatiosAndLists) {
  Comparison c = fixture_comparison();
  ASSERT_EQ(c.cases.size(), 2u);
  const auto& same = c.cases[0];
  EXPECT_EQ(same.case_id, "same.b64.t1");
  EXPECT_FALSE(same.significant);  // scipy p = 0.7337
  EXPECT_EQ(same.verdict, "same");
  EXPECT_LE(same.interval.low, 1.0);
  EXPECT_GE(same.interval.high, 1.0);

  const auto& slower = c.cases[1];
  EXPECT_NEAR(slower.base_median, 10.45, 1e-9);
  EXPECT_NEAR(slower.new_median, 12.45, 1e-9);
  EXPECT_NEAR(slower.ratio, 12.45 / 10.45, 1e-12);
  EXPECT_NEAR(slower.test.p, 0.00018267179110955002, 1e-9);  // scipy
  EXPECT_TRUE(slower.significant);
  EXPECT_EQ(slower.verdict, "REGRESSION");
  EXPECT_LT(slower.interval.low, slower.ratio);
  EXPECT_GT(slower.interval.low, 1.1);  // the whole interval is a slow-down
  EXPECT_GT(slower.interval.high, slower.ratio);

  EXPECT_EQ(c.regressions, 1);
  EXPECT_NEAR(c.geometric_mean_ratio, std::sqrt(same.ratio * slower.ratio), 1e-12);
  EXPECT_EQ(c.only_in_base, std::vector<std::string>{"gone.b64.t1"});
  EXPECT_EQ(c.only_in_new, std::vector<std::string>{"added.b64.t1"});
  ASSERT_EQ(c.environment_differences.size(), 1u);
  EXPECT_EQ(c.environment_differences[0], "git_revision: base 8d9dd34, new feedbee");
}

TEST(Compare, ExitCodes) {
  std::ostringstream out, err;
  CompareOptions o{kData + "/base.jsonl", kData + "/new.jsonl", 0.05, 0.05, false};
  EXPECT_EQ(run_compare(o, out, err), 0);
  EXPECT_NE(out.str().find("REGRESSION"), std::string::npos);
  EXPECT_NE(out.str().find("only in base (1):\n  gone.b64.t1"), std::string::npos);
  o.fail_on_regression = true;
  EXPECT_EQ(run_compare(o, out, err), 1);
  o.threshold = 0.25;  // a 19% slow-down is then within the threshold
  EXPECT_EQ(run_compare(o, out, err), 0);
  // The same file against itself: nothing significant.
  CompareOptions self{kData + "/new.jsonl", kData + "/new.jsonl", 0.05, 0.05, true};
  EXPECT_EQ(run_compare(self, out, err), 0);
}

TEST(Compare, BadInputIsExit2WithFileAndLine) {
  std::ostringstream out, err;
  CompareOptions o{kData + "/base.jsonl", kData + "/invalid_middle.jsonl", 0.05, 0.05, false};
  EXPECT_EQ(run_compare(o, out, err), 2);
  EXPECT_NE(err.str().find("invalid_middle.jsonl:2: not a JSON record"), std::string::npos)
      << err.str();
  std::ostringstream err2;
  o.candidate = kData + "/no_such_file.jsonl";
  EXPECT_EQ(run_compare(o, out, err2), 2);
  EXPECT_NE(err2.str().find("no_such_file.jsonl: cannot open"), std::string::npos);
}

TEST(Compare, TornLastLineIsSkippedWithAWarning) {
  std::ostringstream out, err;
  CompareOptions o{kData + "/results.jsonl", kData + "/results.jsonl", 0.05, 0.05, true};
  EXPECT_EQ(run_compare(o, out, err), 0);
  EXPECT_NE(err.str().find("results.jsonl:12: skipped a torn last line"), std::string::npos)
      << err.str();
  // 3 + 3 samples: the U test cannot reach 0.05, and the output says so.
  EXPECT_NE(out.str().find("smallest possible p is 0.1"), std::string::npos) << out.str();
}

TEST(Commands, CompareThroughTheCommandLine) {
  CLI::App app;
  Commands commands = add_commands(app);
  std::string base = kData + "/base.jsonl", candidate = kData + "/new.jsonl";
  std::vector<const char*> argv{
      "dlhost",  "compare", base.c_str(), candidate.c_str(), "--fail-on-regression",
      "--alpha", "0.01"};
  app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  testing::internal::CaptureStdout();
  std::optional<int> rc = commands.run_chosen();
  std::string printed = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 1);
  EXPECT_NE(printed.find("significant when p < 0.01"), std::string::npos);
}

// --backends: two backends of one file pair up by network, batch and threads; a backend whose
// name is a prefix of another's (cpu_onednn, cpu_onednn3) takes only its own records.
TEST(Compare, PairsTwoBackendsOfOneFile) {
  auto record = [](const std::string& backend, const std::string& net, double ms) {
    Record r;
    r.data = {{"case_id", net + "." + backend + ".b64.t1"},
              {"status", "OK"},
              {"backend", {{"name", backend}}},
              {"timing", {{"samples", {{"step", std::vector<double>(9, ms)}}}}}};
    r.data["timing"]["samples"]["step"][0] = ms * 1.01;  // not all tied
    return r;
  };
  const std::vector<Record> file = {record("cpu_onednn", "lenet", 10.0),
                                    record("cpu_onednn3", "lenet", 8.0),
                                    record("cpu_onednn", "fcn5", 100.0)};
  const auto base = cases_of_backend(file, "cpu_onednn", "f.jsonl");
  const auto candidate = cases_of_backend(file, "cpu_onednn3", "f.jsonl");
  ASSERT_EQ(base.size(), 2u);
  ASSERT_EQ(candidate.size(), 1u);
  EXPECT_EQ(case_id(candidate[0]), "lenet.b64.t1");
  Comparison c = compare_records(base, candidate, 0.05, 0.05);
  ASSERT_EQ(c.cases.size(), 1u);
  EXPECT_EQ(c.cases[0].case_id, "lenet.b64.t1");
  EXPECT_NEAR(c.cases[0].ratio, 0.8, 1e-12);
  EXPECT_EQ(c.cases[0].verdict, "faster");
  EXPECT_EQ(c.only_in_base, std::vector<std::string>{"fcn5.b64.t1"});
  EXPECT_THROW(cases_of_backend(file, "cpu_nothere", "f.jsonl"), InputError);
}
