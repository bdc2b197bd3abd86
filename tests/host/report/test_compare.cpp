// test_compare.cpp — `dlhost compare` on fixture files (data/base.jsonl, data/new.jsonl): one
// case unchanged, one 19% slower, one in each file only, a different git revision; the exit
// codes for CI and for bad input; and the command line through CLI11. Then what a comparison
// may not claim: a verdict on changed parameters, "same" where the test cannot decide, a ratio
// of a zero median, a pass of the gate on a broken NEW.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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
              {"params", {{"network", net}, {"backend", backend}, {"lr", 0.01}}},
              {"params_hash", backend + net},  // differs by backend, as a run's would
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
  EXPECT_EQ(c.cases[0].verdict, "faster");  // the backend is compared, not a changed parameter
  EXPECT_EQ(c.params_differ, 0);
  EXPECT_EQ(c.only_in_base, std::vector<std::string>{"fcn5.b64.t1"});
  EXPECT_THROW(cases_of_backend(file, "cpu_nothere", "f.jsonl"), InputError);
}

// --- what a comparison may not claim (issue 32) ----------------------------------------------

namespace {

// base.jsonl's first record with these per-iteration step times (and the median to match).
json with_samples(const std::string& id, const std::vector<double>& step) {
  std::ifstream in(kData + "/base.jsonl");
  std::string first;
  std::getline(in, first);
  json r = json::parse(first);
  r["case_id"] = id;
  r["timing"]["samples"]["step"] = step;
  r["timing"]["step"]["median"] = median(step);
  return r;
}

std::string write_records(const std::string& name, const std::vector<json>& records) {
  const std::string folder = std::string(DLHOST_REPORT_TEST_OUT) + "/compare";
  std::filesystem::create_directories(folder);
  std::ofstream out(folder + "/" + name);
  for (const auto& r : records) out << r.dump() << "\n";
  return folder + "/" + name;
}

std::vector<double> around(double ms, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(ms + 0.01 * ms * i);
  return out;
}

Comparison compare(const std::vector<json>& base, const std::vector<json>& candidate,
                   bool include_changed_params = false) {
  std::vector<Record> b, n;
  for (const auto& r : base) b.push_back(Record{r, "base", static_cast<int>(b.size() + 1)});
  for (const auto& r : candidate) n.push_back(Record{r, "new", static_cast<int>(n.size() + 1)});
  return compare_records(b, n, 0.05, 0.05, include_changed_params);
}

}  // namespace

TEST(Compare, ChangedParamsAreSaidPerRowAndNotJudged) {
  json base = with_samples("lenet.b64", around(10, 10));
  json slower = with_samples("lenet.b64", around(12, 10));
  slower["params"]["warmup"] = 5;
  slower["params_hash"] = "0123456789abcdef";
  Comparison c = compare({base}, {slower});
  ASSERT_EQ(c.cases.size(), 1u);
  EXPECT_EQ(c.cases[0].verdict, "params differ");
  EXPECT_NE(c.cases[0].reason.find("warmup 1 -> 5"), std::string::npos) << c.cases[0].reason;
  EXPECT_EQ(c.regressions, 0);
  EXPECT_EQ(c.geometric_mean_cases, 0u);
  // Asked for, it is judged, and the row still says so.
  c = compare({base}, {slower}, true);
  EXPECT_EQ(c.cases[0].verdict, "REGRESSION");
  EXPECT_NE(c.cases[0].reason.find("params differ: warmup 1 -> 5"), std::string::npos);
  EXPECT_EQ(c.regressions, 1);
}

TEST(Compare, RowsTheTestCannotDecideAreInconclusiveWithTheReason) {
  // n = 3/3, three times slower: the exact U test cannot go below p = 0.1.
  Comparison c = compare({with_samples("a", around(10, 3))}, {with_samples("a", around(30, 3))});
  EXPECT_EQ(c.cases[0].verdict, "inconclusive");
  EXPECT_NE(c.cases[0].reason.find("n = 3/3: the U test cannot reach p < 0.05 (the smallest "
                                   "possible p is 0.1)"),
            std::string::npos)
      << c.cases[0].reason;
  // n = 20 against n = 1.
  c = compare({with_samples("a", around(10, 20))}, {with_samples("a", {30})});
  EXPECT_EQ(c.cases[0].verdict, "inconclusive");
  EXPECT_NE(c.cases[0].reason.find("n = 20/1"), std::string::npos);
  // No spread at all, 3/3: the normal approximation would say p = 0.047; the row says why not.
  c = compare({with_samples("a", {10, 10, 10})}, {with_samples("a", {30, 30, 30})});
  EXPECT_EQ(c.cases[0].verdict, "inconclusive");
  EXPECT_NE(c.cases[0].reason.find("neither sample has any spread"), std::string::npos)
      << c.cases[0].reason;
  EXPECT_EQ(c.regressions, 0);
  EXPECT_EQ(c.inconclusive, 1);
  // Enough iterations but noise wider than the threshold: not "same" either.
  std::vector<double> noisy_base{10, 14, 9, 13, 10, 15, 9, 12, 11, 14};
  std::vector<double> noisy_new{11, 15, 9, 14, 10, 16, 9, 13, 12, 15};
  c = compare({with_samples("a", noisy_base)}, {with_samples("a", noisy_new)});
  EXPECT_FALSE(c.cases[0].significant);
  EXPECT_EQ(c.cases[0].verdict, "inconclusive");
  EXPECT_NE(c.cases[0].reason.find("the interval reaches beyond the threshold of 5%"),
            std::string::npos);
}

TEST(Compare, AZeroMedianIsNoRatioAndTheGeometricMeanSaysWhatItCounts) {
  Comparison c = compare(
      {with_samples("zero", std::vector<double>(10, 0.0)), with_samples("fine", around(10, 10))},
      {with_samples("zero", around(10, 10)), with_samples("fine", around(10, 10))});
  ASSERT_EQ(c.cases.size(), 2u);
  EXPECT_EQ(c.cases[0].verdict, "inconclusive");
  EXPECT_NE(c.cases[0].reason.find("median of 0 ms in base"), std::string::npos);
  EXPECT_EQ(c.regressions, 0);
  EXPECT_EQ(c.geometric_mean_cases, 1u);
  EXPECT_NEAR(c.geometric_mean_ratio, 1.0, 1e-12);
  std::ostringstream out;
  print_comparison(c, "b", "n", out);
  EXPECT_NE(out.str().find("geometric mean of the ratios over 1 case(s): 1.0000 (1 row(s) left "
                           "out"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("inf"), std::string::npos);
}

TEST(Compare, TheGateFailsOnBreakageNotOnlyOnRegressions) {
  json a = with_samples("a", around(10, 10)), b = with_samples("b", around(10, 10));
  const std::string base = write_records("gate_base.jsonl", {a, b});
  json crashed_a = {
      {"schema_version", 1}, {"case_id", "a"}, {"status", "CRASHED"}, {"reason", "signal 11"}};
  json crashed_b = crashed_a;
  crashed_b["case_id"] = "b";
  struct Case {
    std::string name;
    std::vector<json> records;
    int rc;
    std::string says;
  };
  for (const auto& k : std::vector<Case>{
           {"empty.jsonl", {}, 1, "no case of new is comparable with base"},
           {"all_crashed.jsonl", {crashed_a, crashed_b}, 1, "2 case(s) OK in base and not in new"},
           {"one_crashed.jsonl", {a, crashed_b}, 1, "1 case(s) OK in base and not in new"},
           {"other_cases.jsonl", {with_samples("c", around(10, 10))}, 1, "no case of new is"},
           {"fine.jsonl", {a, b}, 0, "fail-on-regression: pass"}}) {
    SCOPED_TRACE(k.name);
    std::ostringstream out, err;
    CompareOptions o{base, write_records(k.name, k.records), 0.05, 0.05, true};
    EXPECT_EQ(run_compare(o, out, err), k.rc) << out.str() << err.str();
    EXPECT_NE(out.str().find(k.says), std::string::npos) << out.str();
    o.fail_on_regression = false;
    EXPECT_EQ(run_compare(o, out, err), 0);  // without the gate, a report only
  }
  // NEW that is not a results file at all: bad input, exit 2.
  std::ostringstream out, err;
  CompareOptions garbage{base, write_records("garbage.jsonl", {json("not a record")}), 0.05, 0.05,
                         true};
  EXPECT_EQ(run_compare(garbage, out, err), 2);
  CompareOptions folder{base, std::string(DLHOST_REPORT_TEST_OUT) + "/compare", 0.05, 0.05, true};
  EXPECT_EQ(run_compare(folder, out, err), 2);
  EXPECT_NE(err.str().find("/compare: is a directory"), std::string::npos) << err.str();
}
