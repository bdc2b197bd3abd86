// test_own_clock_marks.cpp — issue 42: a figure whose steps a tool timed with its own clock
// (timing.timer backend_clock: BigDL's optimize() owns its loop) is marked in the tools table and
// in the distributed tools table, with a note under each saying what that clock is; the figures
// the host timed beside it stay unlabelled; a tool runtime's record without compute samples shows
// "-" for its compute, never 0. Records are taken from the report's fixtures and changed here.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/report.h"
#include "test_files.h"

using namespace dlhost::report;

namespace {

using Rows = std::vector<std::vector<std::string>>;
using Json = nlohmann::ordered_json;

std::vector<Json> fixture(const std::string& name) {
  std::vector<Json> out;
  std::ifstream in(std::string(DLHOST_REPORT_TEST_DATA) + "/" + name);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(Json::parse(line));
  return out;
}

Document report_of(const std::vector<Json>& records, const std::string& name) {
  const std::string folder = test::fresh_folder(name);
  const std::string file = folder + "/" + name + ".jsonl";
  {
    std::ofstream out(file);
    for (const Json& r : records) out << r.dump() << "\n";
  }
  ReportOptions o;
  o.inputs = {file};
  o.folder = folder;
  o.gnuplot = "";
  return write_report(o);
}

const Section& section(const Document& doc, const std::string& title) {
  for (const auto& s : doc.sections)
    if (s.title == title) return s;
  throw std::runtime_error("no section " + title);
}

std::vector<const Table*> tables_of(const Section& s) {
  std::vector<const Table*> out;
  for (const auto& b : s.blocks)
    if (b.kind == Block::kTable) out.push_back(&b.table);
  return out;
}

std::string paragraphs_of(const Section& s) {
  std::string out;
  for (const auto& b : s.blocks)
    if (b.kind == Block::kParagraph) out += b.text + "\n";
  return out;
}

// `r` as if `backend` had run it in its own loop.
Json own_clock(Json r, const std::string& backend, const std::string& clock) {
  r["params"]["backend"] = backend;
  r["backend"]["name"] = backend;
  r["case_id"] = r["case_id"].get<std::string>() + "." + backend;
  r["timing"]["timer"] = "backend_clock";
  r["timing"]["clock"] = clock;
  return r;
}

}  // namespace

TEST(OwnClockMarks, ToolsTableMarksTheFigureAndSaysWhy) {
  std::vector<Json> records;
  for (const Json& r : fixture("tools_departures.jsonl"))
    if (r["params"]["network"] == "lenet" && r["params"]["threads"] == 1) records.push_back(r);
  ASSERT_EQ(records.size(), 2u);  // cpu_tensorflow 15 ms, cpu_mxnet 20 ms
  records[1] = own_clock(records[1], "cpu_bigdl", "LocalOptimizer's own iteration time");
  const Document doc = report_of(records, "own_clock_tools");
  const Section& s = section(doc, "Tools side by side (E1)");
  const std::vector<const Table*> tables = tables_of(s);
  ASSERT_EQ(tables.size(), 2u);  // the libraries, CPU 1 thread
  EXPECT_EQ(tables[1]->header, (std::vector<std::string>{"network", "batch", "cpu_tensorflow",
                                                         "cpu_bigdl", "fastest", "x fastest"}));
  // The host-timed figure carries no label; the tool-timed one its mark.
  EXPECT_EQ(tables[1]->rows,
            (Rows{{"lenet", "64", "15.00 *", "20.00 \u00a7", "cpu_tensorflow", "1.33"}}));
  const std::string notes = paragraphs_of(s);
  EXPECT_NE(notes.find("\u00a7 marks a figure timed by the tool's own clock (the record's "
                       "timing.timer is backend_clock)"),
            std::string::npos)
      << notes;
}

TEST(OwnClockMarks, DistributedToolsTableMarksTheStepAndLeavesAnAbsentComputeEmpty) {
  std::vector<Json> records;
  for (const Json& r : fixture("distributed_tools.jsonl"))
    if (r["case_id"] == "lenet.ddp.ranks=1" || r["case_id"] == "lenet.ddp.ranks=2.1gbe")
      records.push_back(r);
  ASSERT_EQ(records.size(), 2u);
  // The 2-rank record as a tool timing its own steps and splitting none: no compute samples.
  Json& two_ranks = records[0]["case_id"] == "lenet.ddp.ranks=2.1gbe" ? records[0] : records[1];
  two_ranks["timing"]["timer"] = "backend_clock";
  two_ranks["timing"]["clock"] = "DistriOptimizer's own iteration time on the driver";
  two_ranks["distributed"]["samples"]["compute"] = Json::array();
  const Document doc = report_of(records, "own_clock_distributed");
  const Section& s = section(doc, "Distributed tools (E1)");
  const std::vector<const Table*> tables = tables_of(s);
  ASSERT_EQ(tables.size(), 1u);
  ASSERT_EQ(tables[0]->rows.size(), 2u);
  const std::vector<std::string>& one = tables[0]->rows[0];
  const std::vector<std::string>& two = tables[0]->rows[1];
  EXPECT_EQ(one[6].find('('), std::string::npos) << one[6];  // host-timed: no mark
  EXPECT_NE(one[7], "-");
  // Row 1's communication took (a); row 2's step is the next note.
  EXPECT_EQ(two[6].substr(two[6].size() - 4), " (b)") << two[6];
  EXPECT_EQ(two[7], "-");
  const std::string notes = paragraphs_of(s);
  EXPECT_NE(notes.find("(b) step timed by the tool's own clock (timing.timer backend_clock), not "
                       "the host's: DistriOptimizer's own iteration time on the driver."),
            std::string::npos)
      << notes;
}
