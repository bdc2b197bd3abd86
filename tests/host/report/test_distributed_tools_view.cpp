// test_distributed_tools_view.cpp — the report's distributed tools table (Du et al.'s, issue 41)
// on data/distributed_tools.jsonl (made by data/make_distributed_tools.py with chosen times):
// checked cell by cell — each tool's speedup against its own 1 rank (not the record's vs_1_rank,
// whose baseline was another comm's), a runtime's comm time with what it measures, a runtime
// without one shown absent with its reason (never 0), a SKIPPED runtime case with its status,
// weak scaling — and its plot's data, in the Markdown and the HTML report.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/report.h"
#include "test_files.h"

using namespace dlhost::report;

namespace {

using Rows = std::vector<std::vector<std::string>>;

Document tools_report(const std::string& folder) {
  ReportOptions o;
  o.inputs = {std::string(DLHOST_REPORT_TEST_DATA) + "/distributed_tools.jsonl"};
  o.folder = folder;
  o.gnuplot = "";  // the plot's CSV only
  return write_report(o);
}

const Section* find_section(const Document& doc, const std::string& title) {
  for (const auto& s : doc.sections)
    if (s.title == title) return &s;
  return nullptr;
}

}  // namespace

TEST(DistributedToolsView, TableCellByCell) {
  const std::string folder = test::fresh_folder("distributed_tools");
  const Document doc = tools_report(folder);
  const Section* s = find_section(doc, "Distributed tools (E1)");
  ASSERT_NE(s, nullptr) << "no distributed tools section";
  const Table* table = nullptr;
  std::string text;
  const PlotFiles* plot = nullptr;
  for (const auto& b : s->blocks) {
    if (b.kind == Block::kTable) table = &b.table;
    if (b.kind == Block::kParagraph) text += b.text + "\n";
    if (b.kind == Block::kPlot) plot = &b.plot;
  }
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->header, (std::vector<std::string>{"tool", "network", "batch", "threads", "link",
                                                     "ranks", "step", "compute", "communication",
                                                     "speedup", "efficiency"}));
  const std::string mpi = "cpu_onednn + mpi", ddp = "cpu_libtorch2 + torch_ddp",
                    ps = "cpu_tensorflow + tf_ps (async)", ps_sync = "cpu_tensorflow + tf_ps";
  EXPECT_EQ(
      table->rows,
      (Rows{
          {mpi, "lenet", "16", "1", "-", "1", "8.000", "7.000", "0.500 (a)", "1.00", "1.00"},
          {mpi, "lenet", "16", "1", "10gbe", "2", "5.000", "3.500", "2.000 (a)", "1.60", "0.80"},
          {mpi, "lenet", "16", "1", "1gbe", "2", "6.250", "3.500", "4.000 (a)", "1.28", "0.64"},
          {ddp, "lenet", "16", "1", "-", "1", "10.00", "9.800", "0.200 (b)", "1.00", "1.00"},
          // Against torch_ddp's own 1 rank (10 ms), not the record's vs_1_rank (mpi's 8 ms).
          {ddp, "lenet", "16", "1", "10gbe", "2", "7.500", "7.000", "3.000 (b)", "1.33", "0.67"},
          {ddp, "lenet", "16", "1", "1gbe", "2", "12.50", "11.00", "9.000 (b)", "0.80", "0.40"},
          {ps, "lenet", "16", "1", "-", "1", "20.00", "20.00", "absent (c)", "1.00", "1.00"},
          {ps, "lenet", "16", "1", "1gbe", "2", "12.50", "12.50", "absent (c)", "1.60", "0.80"},
          // The sync mode is a tool of its own: against its own 1 rank (16 ms), not async's.
          {ps_sync, "lenet", "16", "1", "-", "1", "16.00", "10.00", "6.000 (d)", "1.00", "1.00"},
          {ps_sync, "lenet", "16", "1", "1gbe", "2", "10.00", "6.000", "4.000 (d)", "1.60", "0.80"},
          {"cpu_mxnet + mxnet_kvstore", "lenet", "16", "1", "10gbe", "2", "SKIPPED", "-", "-", "-",
           "-"},
          // No 1-rank case of cpu_onednn + gloo: no speedup, rather than mpi's.
          {"cpu_onednn + gloo", "lenet", "16", "1", "1gbe", "2", "7.000", "3.500", "5.000 (e)", "-",
           "-"},
          // Weak scaling: the global batch doubles, speedup N T1/TN = 2 x 100 / 125.
          {mpi, "fcnr", "8", "1", "-", "1", "100.0", "99.00", "1.000 (a)", "1.00", "1.00"},
          {mpi, "fcnr", "16", "1", "10gbe", "2", "125.0", "100.0", "30.00 (a)", "1.60", "0.80"}}));
  // The notes say what each figure is, and why tf_ps has none.
  EXPECT_NE(text.find("(a) dlhost's all-reduce (mpi)"), std::string::npos) << text;
  EXPECT_NE(text.find("(b) torch_ddp, its own comm time: from the first bucket's start"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(c) tf_ps exposes no communication time: push and pull wait inside the "
                      "session's run."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(d) tf_ps, its own comm time: pull plus push"), std::string::npos) << text;
  EXPECT_NE(text.find("(e) dlhost's all-reduce (gloo)"), std::string::npos) << text;

  // The scaling plot: a line per tool, network and link from that tool's own 1 rank.
  ASSERT_NE(plot, nullptr);
  const std::string csv = test::slurp(folder + "/" + plot->csv);
  EXPECT_NE(csv.find("cpu_libtorch2 + torch_ddp lenet 10gbe"), std::string::npos) << csv;
  EXPECT_NE(csv.find("cpu_tensorflow + tf_ps (async) lenet 1gbe"), std::string::npos) << csv;
  EXPECT_NE(csv.find("cpu_tensorflow + tf_ps lenet 1gbe"), std::string::npos) << csv;
  EXPECT_EQ(csv.find("cpu_onednn + gloo"), std::string::npos) << "gloo has no 1-rank point\n"
                                                              << csv;
  // And the HTML report has the section too.
  EXPECT_NE(test::slurp(folder + "/report.html").find("Distributed tools (E1)"), std::string::npos);
}

TEST(DistributedToolsView, SaysSoWithoutDistributedCases) {
  ReportOptions o;
  o.inputs = {std::string(DLHOST_REPORT_TEST_DATA) + "/tools_mixed.jsonl"};
  o.folder = test::fresh_folder("distributed_tools_none");
  o.gnuplot = "";
  const Document doc = write_report(o);
  const Section* s = find_section(doc, "Distributed tools (E1)");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->blocks.size(), 1u);
  EXPECT_EQ(s->blocks[0].text, "No records of cases with a comm or several ranks.");
}
