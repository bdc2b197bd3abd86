// test_record.cpp — tests of the record module (host/record, issue 44 item 5): its writer starts
// and ends a record field for field as the runner's and the case process's hand-built code did
// (that code is kept below as the reference, run on the report's fixture records), the typed
// fields read the same from a record as written and as read back, and the one reader of results
// files tells a torn line from a bad one (FILE:LINE), refuses or skips a bad one as its caller
// asks, checks the schema, and keeps every field of a record, known or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "record/record.h"
#include "record/results_file.h"

namespace dlhost::record {
namespace {

using ordered_json = nlohmann::ordered_json;

const std::string kFixtures = std::string(DLHOST_TEST_SOURCE_DIR) + "/tests/host/report/data/";

// The record as run_case (run/runner.cpp) and parent_record (isolate/case_process.cpp) built it
// by hand before the record module: the head, the runner's blocks, then the tail.
ordered_json old_record(const ordered_json& in, const ordered_json& blocks) {
  ordered_json rec;
  rec["schema_version"] = 1;
  rec["case_id"] = in["case_id"].get<std::string>();
  rec["status"] = in["status"].get<std::string>();
  rec["reason"] = in["reason"].get<std::string>();
  rec["suite"] = ordered_json{{"name", in["suite"]["name"].get<std::string>()},
                              {"path", in["suite"]["path"].get<std::string>()},
                              {"source", in["suite"]["source"].get<std::string>()}};
  rec["started_at"] = in["started_at"].get<std::string>();
  rec["params"] = in["params"];
  for (const auto& [key, value] : blocks.items()) rec[key] = value;
  rec["duration_s"] = in["duration_s"].get<double>();
  rec["environment"] = in["environment"];
  return rec;
}

ordered_json new_record(const ordered_json& in, const ordered_json& blocks) {
  ordered_json rec =
      start({in["case_id"].get<std::string>(), in["status"].get<std::string>(),
             in["reason"].get<std::string>(), in["suite"]["name"].get<std::string>(),
             in["suite"]["path"].get<std::string>(), in["suite"]["source"].get<std::string>(),
             in["started_at"].get<std::string>()},
            in["params"]);
  for (const auto& [key, value] : blocks.items()) rec[key] = value;
  finish(rec, in["duration_s"].get<double>(), in["environment"]);
  return rec;
}

// Every whole record of the report's fixture files, in the runner's field order.
std::vector<ordered_json> fixture_records() {
  std::vector<ordered_json> out;
  for (const char* name :
       {"base.jsonl", "new.jsonl", "results.jsonl", "templates.jsonl", "tools_mixed.jsonl"}) {
    std::ifstream in(kFixtures + name);
    std::string line;
    while (std::getline(in, line)) {
      ordered_json rec = ordered_json::parse(line, nullptr, false);
      if (rec.is_object() && rec.begin().key() == "schema_version" &&
          std::next(rec.begin()).key() == "case_id")
        out.push_back(std::move(rec));
    }
  }
  return out;
}

// The blocks between the head and the tail, and what the caller adds after the tail.
void split(const ordered_json& rec, ordered_json& blocks, ordered_json& after) {
  static const std::vector<std::string> head = {"schema_version", "case_id",    "status", "reason",
                                                "suite",          "started_at", "params"};
  bool tail_seen = false;
  for (const auto& [key, value] : rec.items()) {
    if (std::find(head.begin(), head.end(), key) != head.end()) continue;
    if (key == "duration_s" || key == "environment") {
      tail_seen = true;
      continue;
    }
    (tail_seen ? after : blocks)[key] = value;
  }
}

TEST(record_writer, WritesEveryRecordAsTheHandBuiltCodeDid) {
  const std::vector<ordered_json> records = fixture_records();
  ASSERT_GE(records.size(), 20u) << "the report's fixtures moved: " << kFixtures;
  for (const ordered_json& rec : records) {
    ordered_json blocks = ordered_json::object(), after = ordered_json::object();
    split(rec, blocks, after);
    ordered_json written = new_record(rec, blocks);
    EXPECT_EQ(written.dump(), old_record(rec, blocks).dump());
    for (const auto& [key, value] : after.items()) written[key] = value;
    EXPECT_EQ(written.dump(), rec.dump()) << "a field moved or was lost";
  }
}

TEST(record_writer, AParentRecordHasTheHeadAndTheTailOnly) {
  const ordered_json rec =
      start({"lenet.b4", kStatusCrashed, "the case's process died", "smoke", "suites/smoke.yaml",
             "suites/smoke.yaml:3", "2026-12-06T13:00:00Z"},
            ordered_json{{"batch", 4}});
  ordered_json ended = rec;
  finish(ended, 1.5, ordered_json{{"cores", 2}});
  EXPECT_EQ(ended.dump(), R"({"schema_version":1,"case_id":"lenet.b4","status":"CRASHED",)"
                          R"("reason":"the case's process died","suite":{"name":"smoke","path":)"
                          R"("suites/smoke.yaml","source":"suites/smoke.yaml:3"},"started_at":)"
                          R"("2026-12-06T13:00:00Z","params":{"batch":4},"duration_s":1.5,)"
                          R"("environment":{"cores":2}})");
}

TEST(record_fields, ReadTheSameFromARecordAsWrittenAndAsReadBack) {
  for (const ordered_json& written : fixture_records()) {
    const RecordSummary a = RecordSummary::of(written);
    const RecordSummary b = RecordSummary::of(nlohmann::json::parse(written.dump()));
    EXPECT_EQ(a.case_id, b.case_id);
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.reason, b.reason);
    EXPECT_EQ(a.params_hash, b.params_hash);
    EXPECT_EQ(a.timed, b.timed);
    EXPECT_EQ(a.median_ms, b.median_ms);
    EXPECT_EQ(a.iterations, b.iterations);
    EXPECT_EQ(a.ranks, b.ranks);
    EXPECT_EQ(a.backend, b.backend);
    EXPECT_FALSE(a.case_id.empty());
  }
}

const std::string kGood =
    R"({"schema_version": 1, "case_id": "a", "status": "OK", "own_field": {"x": [1, 2]}})";

TEST(results_reader, KeepsEveryFieldOfARecord) {
  ResultsLines lines = parse_results(kGood + "\n", "r.jsonl", BadLines::refuse);
  ASSERT_EQ(lines.records.size(), 1u);
  EXPECT_EQ(lines.records[0].data, nlohmann::json::parse(kGood));
  EXPECT_EQ(lines.records[0].where(), "r.jsonl:1");
}

TEST(results_reader, TellsATornLineFromABadOne) {
  const std::string cut = R"({"schema_version": 1, "case_id": "b", "sta)";
  ResultsLines last = parse_results(kGood + "\n" + cut, "r.jsonl", BadLines::refuse);
  ASSERT_EQ(last.torn.size(), 1u);
  EXPECT_EQ(last.torn[0].line, 2);
  EXPECT_EQ(last.torn[0].what, "skipped a torn last line (a run interrupted while writing it)");
  ResultsLines resumed =
      parse_results(kGood + "\n" + cut + "\n" + kGood + "\n", "r.jsonl", BadLines::refuse);
  ASSERT_EQ(resumed.torn.size(), 1u);
  EXPECT_EQ(resumed.records.size(), 2u);
  EXPECT_EQ(resumed.torn[0].what,
            "skipped a torn line (a run killed while writing it, then resumed)");
  try {
    parse_results(kGood + "\nnot json\n" + kGood + "\n", "r.jsonl", BadLines::refuse);
    FAIL() << "a bad line was taken";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("r.jsonl:2: not a JSON record (", 0), 0u) << e.what();
  }
}

TEST(results_reader, SkipsBadLinesWithTheirNumbersWhenAsked) {
  const std::string text =
      kGood + "\n" + R"({"schema_version": 2, "case_id": "a", "status": "OK"})" + "\n[1]\n" +
      R"({"schema_version": 1, "case_id": "c", "status": "DONE"})" + "\n" + kGood + "\n";
  EXPECT_THROW(parse_results(text, "r.jsonl", BadLines::refuse), InputError);
  ResultsLines lines = parse_results(text, "r.jsonl", BadLines::skip);
  EXPECT_EQ(lines.records.size(), 2u);
  ASSERT_EQ(lines.bad.size(), 3u);
  EXPECT_EQ(lines.bad[0].line, 2);
  EXPECT_EQ(lines.bad[0].what.rfind("schema_version 2 is not one this dlhost reads", 0), 0u);
  EXPECT_EQ(lines.bad[1].line, 3);
  EXPECT_EQ(lines.bad[1].what, "not a dlhost result record (not an object)");
  EXPECT_EQ(lines.bad[2].line, 4);
  EXPECT_EQ(lines.bad[2].what.rfind("status \"DONE\" is not one of", 0), 0u);
}

TEST(results_reader, RefusesADirectoryByName) {
  try {
    read_results(testing::TempDir(), BadLines::skip);
    FAIL() << "a directory was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory, not a results file"), std::string::npos);
  }
}

}  // namespace
}  // namespace dlhost::record
