// test_warnings_view.cpp — the report's Warnings section on constructed records: one row per
// stored warning with its case and FILE:LINE, and records from before warnings counted.
#include <gtest/gtest.h>

#include "report/views.h"

using namespace dlhost::report;

namespace {

Record record(const std::string& id, json warnings, int line) {
  json data{{"case_id", id}, {"status", "OK"}};
  if (!warnings.is_null()) data["warnings"] = std::move(warnings);
  return Record{data, "run.jsonl", line};
}

TEST(WarningsView, OneRowPerWarningWithItsRecord) {
  std::vector<Record> records{
      record("lenet.t3",
             json::array({{{"code", "spread"}, {"message", "IQR/median 26%"}},
                          {{"code", "threads_exceed_cores"}, {"message", "3 on 2"}}}),
             1),
      record("fcnr.t1", json::array(), 2), record("old.t1", nullptr, 3)};
  Section s = warnings_view(records);
  EXPECT_EQ(s.title, "Warnings");
  const Table* table = nullptr;
  std::string text;
  for (const auto& b : s.blocks) {
    if (b.kind == Block::kTable) table = &b.table;
    if (b.kind == Block::kParagraph) text += b.text + "\n";
  }
  ASSERT_NE(table, nullptr);
  using Rows = std::vector<std::vector<std::string>>;
  EXPECT_EQ(table->header, (std::vector<std::string>{"case", "warning", "message", "record"}));
  EXPECT_EQ(table->rows, (Rows{{"lenet.t3", "spread", "IQR/median 26%", "run.jsonl:1"},
                               {"lenet.t3", "threads_exceed_cores", "3 on 2", "run.jsonl:1"}}));
  EXPECT_NE(text.find("2 warning(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("1 record(s) have no warnings field"), std::string::npos) << text;
}

TEST(WarningsView, SaysSoWhenNoneWarned) {
  Section s = warnings_view({record("a", json::array(), 1)});
  ASSERT_EQ(s.blocks.size(), 1u);
  EXPECT_EQ(s.blocks[0].text, "No record carries a warning.");
}

}  // namespace
