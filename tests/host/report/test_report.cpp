// test_report.cpp — `dlhost report` and `dlhost export` on the fixture results file
// (data/results.jsonl, made by data/make_fixtures.py with chosen times): each table checked cell
// by cell, the plot files checked as PNG and SVG when gnuplot is here, the no-gnuplot path, and
// export's columns.
#include <gtest/gtest.h>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "report/export.h"
#include "report/plots.h"
#include "report/report.h"
#include "report/views.h"
#include "test_files.h"
#include "writer_checks.h"

using namespace dlhost::report;
namespace fs = std::filesystem;

namespace {

const std::string kData = DLHOST_REPORT_TEST_DATA;

using test::fresh_folder;
using test::slurp;

const Section& section(const Document& doc, const std::string& title) {
  for (const auto& s : doc.sections)
    if (s.title == title) return s;
  throw std::runtime_error("no section " + title);
}

const Table& first_table(const Section& s) {
  for (const auto& b : s.blocks)
    if (b.kind == Block::kTable) return b.table;
  throw std::runtime_error("no table in " + s.title);
}

using Rows = std::vector<std::vector<std::string>>;

Document fixture_report(const std::string& folder, const std::string& gnuplot) {
  ReportOptions o;
  o.inputs = {kData + "/results.jsonl", kData + "/comm_bench.json"};
  o.folder = folder;
  o.gnuplot = gnuplot;
  return write_report(o);
}

}  // namespace

TEST(Report, TablesCellByCell) {
  Document doc = fixture_report(fresh_folder("tables"), "");
  const Table& time = first_table(section(doc, "Time per mini-batch (E1)"));
  EXPECT_EQ(time.header, (std::vector<std::string>{"network", "batch", "cpu_onednn 1T",
                                                   "cpu_onednn 2T", "cpu_reference 1T"}));
  EXPECT_EQ(time.rows, (Rows{{"lenet", "64", "11.00", "6.000", "FAILED"},
                             {"lenet", "128", "20.00", "", ""},
                             {"fcnr", "64", "150.5", "SKIPPED", ""},
                             {"alexnet", "64", "CRASHED", "", ""},
                             {"resnet50", "64", "TIMEOUT", "", ""}}));
  // The other machine is its own group.
  const Table& other = first_table(section(doc, "Time per mini-batch (E2)"));
  EXPECT_EQ(other.rows, (Rows{{"lenet", "64", "8.000"}}));

  const Table& threads = first_table(section(doc, "CPU thread scaling (E1)"));
  EXPECT_EQ(threads.rows,
            (Rows{{"lenet cpu_onednn b64", "1 -> 2", "11.00", "6.000", "1.83", "0.92"}}));

  const Table& sweep = first_table(section(doc, "Mini-batch size sweeps (E1)"));
  EXPECT_EQ(sweep.rows, (Rows{{"lenet cpu_onednn 1T", "64", "11.00", "5818.2", "0.172"},
                              {"lenet cpu_onednn 1T", "128", "20.00", "6400.0", "0.156"}}));

  const Table& ranks = first_table(section(doc, "Multi-rank scaling (E1)"));
  EXPECT_EQ(ranks.rows, (Rows{{"lenet.mpi.ranks=1", "1", "strong", "16", "8.000", "5.600", "2.000",
                               "1.600", "1.00", "1.00"},
                              {"lenet.mpi.ranks=2", "2", "strong", "16", "5.000", "3.500", "1.250",
                               "1.000", "1.60", "0.80"}}));

  const Table& phases = first_table(section(doc, "Where a mini-batch goes (E1)"));
  EXPECT_EQ(phases.rows.front(), (std::vector<std::string>{"lenet.cpu_onednn.b64.t1", "11.00",
                                                           "3.000", "6.000", "0.000", "1.000"}));
  EXPECT_EQ(phases.rows.size(), 6u);  // the OK records of E1

  const Table& gflops = first_table(section(doc, "Achieved GFLOP/s (E1)"));
  // 3 x 4616480 FLOPs x 64 samples / 11 ms
  EXPECT_EQ(gflops.rows.front(),
            (std::vector<std::string>{"lenet.cpu_onednn.b64.t1", "lenet", "cpu_onednn", "1", "1",
                                      "64", "0.0046", "80.58"}));

  const Table& bus = first_table(section(doc, "Collective bus bandwidth (comm-bench)"));
  EXPECT_EQ(bus.header, (std::vector<std::string>{"size (B)", "mpi (2 ranks) busbw",
                                                  "mpi_raw (2 ranks) busbw"}));
  EXPECT_EQ(bus.rows.front(), (std::vector<std::string>{"1024", "0.061", "0.630"}));

  const Table& bad = first_table(section(doc, "Cases that did not end OK"));
  ASSERT_EQ(bad.rows.size(), 4u);
  EXPECT_EQ(bad.rows[0], (std::vector<std::string>{"fcnr.cpu_onednn.b64.t2", "SKIPPED",
                                                   "needs 2 threads; this machine has 1",
                                                   kData + "/results.jsonl:5"}));
  EXPECT_EQ(bad.rows[2][1], "CRASHED");
  EXPECT_EQ(bad.rows[3][1], "TIMEOUT");
}

TEST(Report, WithoutGnuplotTablesComeAndTheReportSaysWhy) {
  std::string folder = fresh_folder("no_gnuplot");
  fixture_report(folder, "no-such-gnuplot-here");
  std::string md = slurp(folder + "/report.md");
  EXPECT_NE(md.find("Plots skipped: gnuplot was not found"), std::string::npos);
  EXPECT_NE(md.find("skipped a torn last line"), std::string::npos);
  EXPECT_NE(md.find("| lenet | 64 | 11.00 | 6.000 | FAILED |"), std::string::npos);
  EXPECT_TRUE(fs::exists(folder + "/thread_scaling_E1.csv"));  // the data still comes
  EXPECT_FALSE(fs::exists(folder + "/thread_scaling_E1.png"));
  EXPECT_EQ(slurp(folder + "/thread_scaling_E1.csv"), "threads,lenet cpu_onednn b64\n1,11\n2,6\n");
  std::string html = slurp(folder + "/report.html");
  EXPECT_NE(html.find("<td class=\"n\">150.5</td>"), std::string::npos);
}

TEST(Report, PlotsArePngAndSvgAndInlined) {
  if (find_program("gnuplot").empty())
    GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox); the plots cannot be checked";
  std::string folder = fresh_folder("plots");
  fixture_report(folder, "gnuplot");
  for (const char* name : {"thread_scaling_E1", "batch_sweep_E1", "speedup_E1", "efficiency_E1",
                           "phases_E1", "busbw_all_reduce"}) {
    SCOPED_TRACE(name);
    std::string png = slurp(folder + "/" + name + ".png");
    ASSERT_GT(png.size(), 8u);
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    boost::property_tree::ptree svg;
    EXPECT_NO_THROW(boost::property_tree::read_xml(folder + "/" + name + ".svg", svg));
    EXPECT_EQ(svg.count("svg"), 1u);
    EXPECT_TRUE(fs::exists(folder + "/" + name + ".csv"));
  }
  std::string html = slurp(folder + "/report.html");
  EXPECT_NE(html.find("src=\"data:image/png;base64,iVBORw0KGgo"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);  // nothing from the network
  EXPECT_EQ(html.find("Plots skipped"), std::string::npos);
}

TEST(Report, BadInputNamesFileAndLine) {
  ReportOptions o;
  o.inputs = {kData + "/invalid_middle.jsonl"};
  o.folder = fresh_folder("bad");
  try {
    write_report(o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid_middle.jsonl:2: not a JSON record"),
              std::string::npos)
        << e.what();
  }
  o.inputs = {kData + "/no_such_file.jsonl"};
  EXPECT_THROW(write_report(o), InputError);
}

TEST(Base64, KnownValues) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
}

TEST(Export, OneRowPerCaseWithNamedColumns) {
  Inputs in;
  read_results_file(kData + "/results.jsonl", in);
  auto rows = export_rows(in.records);
  ASSERT_EQ(rows.size(), 12u);  // header + 11 records (the torn line is skipped)
  const auto& header = rows[0];
  auto col = [&](const std::string& name) {
    auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<size_t>(it - header.begin());
  };
  EXPECT_EQ(header.front(), "case_id");
  EXPECT_EQ(rows[1][col("case_id")], "lenet.cpu_onednn.b64.t1");
  EXPECT_EQ(rows[1][col("status")], "OK");
  EXPECT_EQ(rows[1][col("network")], "lenet");
  EXPECT_EQ(rows[1][col("threads_used")], "1");
  EXPECT_EQ(rows[1][col("step_median_ms")], "11");
  EXPECT_EQ(rows[1][col("step_min_ms")], "10");
  EXPECT_EQ(rows[1][col("forward_median_ms")], "3");
  EXPECT_EQ(rows[1][col("cpu_model")], "AMD EPYC");
  EXPECT_EQ(rows[1][col("speedup_vs_1_rank")], "");  // not data-parallel
  EXPECT_EQ(rows[1][col("file")], kData + "/results.jsonl:1");
  EXPECT_EQ(rows[5][col("status")], "SKIPPED");
  EXPECT_EQ(rows[5][col("step_median_ms")], "");
  EXPECT_EQ(rows[10][col("speedup_vs_1_rank")], "1.6");
  for (const auto& r : rows) EXPECT_EQ(r.size(), header.size());
}

TEST(Report, TimeTableKeepsNetworksInFirstSeenOrder) {
  // Two networks at two thread counts, interleaved: rows must not depend on sort internals.
  std::vector<Record> records;
  int line = 0;
  for (const char* net : {"fcn5", "fcn8", "alexnet"})
    for (int t : {1, 2}) {
      json r = {
          {"case_id", std::string(net) + ".t" + std::to_string(t)},
          {"status", "OK"},
          {"params", {{"network", net}, {"backend", "cpu_onednn"}, {"batch", 64}, {"threads", t}}},
          {"timing", {{"step", {{"median", 10.0 * t}}}}}};
      records.push_back(Record{r, "mem", ++line});
    }
  // A rerun of fcn5.t1 later in the input replaces the first record.
  json rerun = records[0].data;
  rerun["timing"]["step"]["median"] = 12.0;
  records.push_back(Record{rerun, "mem", ++line});
  auto groups = group_by_environment(records);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].superseded, 1);
  Section view = time_per_minibatch_view(groups[0]);
  const Table& t = first_table(view);
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"fcn5", "64", "12.00", "20.00"}));
  EXPECT_EQ(t.rows[1][0], "fcn8");
  EXPECT_EQ(t.rows[2][0], "alexnet");
}

// The paper's table: one table per hardware, a column per tool, the fastest marked; the tools'
// records land in one group although each lists only its own backend's library.
TEST(Report, ToolsSideBySidePerHardware) {
  std::vector<Record> records;
  int line = 0;
  auto add = [&](const std::string& net, const std::string& tool, int threads, double ms,
                 const std::string& st = "OK", const std::string& device = "cpu0") {
    json r = {
        {"case_id", net + "." + tool + ".t" + std::to_string(threads)},
        {"status", st},
        {"params", {{"network", net}, {"backend", tool}, {"batch", 64}, {"threads", threads}}},
        {"backend",
         {{"name", tool},
          {"device",
           {{"name", device}, {"model", "NVIDIA H200"}, {"library", tool + " lib 1.0"}}}}},
        {"timing", {{"step", {{"median", ms}}}}},
        {"environment",
         {{"cpu_model", "Xeon"}, {"cores", 2}, {"libraries", {{tool, tool + " lib 1.0"}}}}}};
    records.push_back(Record{r, "mem", ++line});
  };
  add("lenet", "cpu_onednn", 1, 10.0);
  add("lenet", "cpu_onednn", 2, 6.0);
  add("lenet", "cpu_libtorch", 1, 12.0);
  add("lenet", "cpu_libtorch", 2, 5.0);
  add("lenet", "cpu_tensorflow", 1, 0, "SKIPPED");
  add("resnet56", "cpu_onednn", 1, 100.0);
  add("lenet", "gpu_cudnn", 0, 1.5, "OK", "cuda0");
  auto groups = group_by_environment(records);
  ASSERT_EQ(groups.size(), 1u);
  const std::string folder = fresh_folder("tools");
  Plotter plotter(folder, "");
  Section view = tools_view(groups[0], plotter);
  std::vector<const Table*> tables;
  std::vector<std::string> paragraphs;
  for (const auto& b : view.blocks) {
    if (b.kind == Block::kTable) tables.push_back(&b.table);
    if (b.kind == Block::kParagraph) paragraphs.push_back(b.text);
  }
  ASSERT_EQ(tables.size(), 4u);  // the tools' libraries, CPU 1 thread, CPU 2 threads, the GPU
  EXPECT_EQ(tables[0]->rows[0], (std::vector<std::string>{"cpu_onednn", "cpu_onednn lib 1.0"}));
  EXPECT_EQ(tables[1]->header,
            (std::vector<std::string>{"network", "batch", "cpu_onednn", "cpu_libtorch",
                                      "cpu_tensorflow", "gpu_cudnn", "fastest", "x fastest"}));
  EXPECT_EQ(tables[1]->rows,
            (Rows{{"lenet", "64", "10.00 *", "12.00", "SKIPPED", "", "cpu_onednn", "1.20"},
                  {"resnet56", "64", "100.0 *", "", "", "", "cpu_onednn", "1.00"}}));
  EXPECT_EQ(tables[2]->rows,
            (Rows{{"lenet", "64", "6.000", "5.000 *", "", "", "cpu_libtorch", "1.20"}}));
  EXPECT_EQ(tables[3]->rows, (Rows{{"lenet", "64", "", "", "", "1.500 *", "gpu_cudnn", "1.00"}}));
  EXPECT_NE(std::find(paragraphs.begin(), paragraphs.end(), "CPU, 1 thread:"), paragraphs.end());
  EXPECT_NE(std::find(paragraphs.begin(), paragraphs.end(), "GPU NVIDIA H200:"), paragraphs.end());
  // The figure's data: lenet against threads, a line per tool that ran at two thread counts.
  EXPECT_EQ(slurp(folder + "/tools_E1_1.csv"), "threads,cpu_onednn,cpu_libtorch\n1,10,12\n2,6,5\n");
}

// Real data: the phase split gains a `data` column (the wait for the input pipeline) where a
// record has `timing.data`; a synthetic record beside it shows "-" there.
TEST(Report, PhaseSplitHasADataColumnForRealData) {
  const std::string folder = fresh_folder("real_data");
  std::ifstream in(kData + "/results.jsonl");
  std::string first;
  std::getline(in, first);
  auto synthetic = nlohmann::ordered_json::parse(first);
  auto real = synthetic;
  real["case_id"] = synthetic["case_id"].get<std::string>() + ".data=real";
  real["timing"]["data"] = synthetic["timing"]["update"];
  real["timing"]["data"]["median"] = 0.25;
  std::ofstream(folder + "/real.jsonl") << synthetic.dump() << "\n" << real.dump() << "\n";
  ReportOptions o;
  o.inputs = {folder + "/real.jsonl"};
  o.folder = folder;
  o.gnuplot = "";
  Document doc = write_report(o);
  const Table& phases = first_table(section(doc, "Where a mini-batch goes (E1)"));
  ASSERT_EQ(phases.header, (std::vector<std::string>{"case", "step", "data", "forward", "backward",
                                                     "exposed comm", "update"}));
  ASSERT_EQ(phases.rows.size(), 2u);
  EXPECT_EQ(phases.rows[0][2], "-");
  EXPECT_EQ(phases.rows[1][2], "0.250");
}

// The data-parallel table reads the distributed block through the record module's typed
// figures (record/fields.h: distributed_of): every cell of the fixture's two MPI records.
TEST(Report, MultiRankTableCellByCell) {
  ReportOptions o;
  o.inputs = {kData + "/results.jsonl"};
  o.folder = fresh_folder("multi_rank");
  o.gnuplot = "";
  Document doc = write_report(o);
  const Table& t = first_table(section(doc, "Multi-rank scaling (E1)"));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"lenet.mpi.ranks=1", "1", "strong", "16", "8.000",
                                                 "5.600", "2.000", "1.600", "1.00", "1.00"}));
  EXPECT_EQ(t.rows[1], (std::vector<std::string>{"lenet.mpi.ranks=2", "2", "strong", "16", "5.000",
                                                 "3.500", "1.250", "1.000", "1.60", "0.80"}));
}

// Records of language models carry tokens/s; cases with `matmul_peak` carry the backend's
// measured matmul peak. The GFLOP/s section then has a second table with both and the model
// FLOP utilisation; a group whose records have neither keeps the one table and its paragraph.
TEST(Report, TokensPerSecondAndModelFlopUtilisation) {
  const std::string folder = fresh_folder("tokens");
  std::ifstream in(kData + "/results.jsonl");
  std::string first;
  std::getline(in, first);
  auto plain = nlohmann::ordered_json::parse(first);  // 80.57856 GFLOP/s, 5818.18 samples/s
  auto tokens = plain;
  tokens["case_id"] = "gpt2_tiny.tokens";
  tokens["network"]["tokens_per_sample"] = 128;
  tokens["timing"]["tokens_per_second"] = 5818.181818181818 * 128;
  auto peak = tokens;
  peak["case_id"] = "gpt2_tiny.peak";
  peak["matmul_peak"] = {{"m", 1024},
                         {"n", 1024},
                         {"k", 1024},
                         {"pass", "forward"},
                         {"gemm_flops", 2.0 * 1024 * 1024 * 1024},
                         {"iterations", 10},
                         {"median_ms", 10.0},
                         {"gflops", 201.44}};
  std::ofstream(folder + "/lm.jsonl") << plain.dump() << "\n"
                                      << tokens.dump() << "\n"
                                      << peak.dump() << "\n";
  ReportOptions o;
  o.inputs = {folder + "/lm.jsonl"};
  o.folder = folder;
  o.gnuplot = "";
  Document doc = write_report(o);
  const Section& s = section(doc, "Achieved GFLOP/s (E1)");
  std::vector<const Table*> tables;
  for (const auto& b : s.blocks)
    if (b.kind == Block::kTable) tables.push_back(&b.table);
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[1]->header, (std::vector<std::string>{"case", "tokens/sample", "tokens/s",
                                                         "TFLOP/s", "matmul peak TFLOP/s", "MFU"}));
  // 80.57856 / 201.44 = 0.400; the record without either field has no row.
  EXPECT_EQ(tables[1]->rows,
            (Rows{{"gpt2_tiny.tokens", "128", "744727.3", "0.081", "-", "-"},
                  {"gpt2_tiny.peak", "128", "744727.3", "0.081", "0.201", "0.400"}}));
  EXPECT_NE(slurp(folder + "/report.md").find("model FLOP utilisation"), std::string::npos);

  // Without the fields: one table and the paragraph of before.
  ReportOptions old;
  old.inputs = {kData + "/results.jsonl"};
  old.folder = fresh_folder("tokens_none");
  old.gnuplot = "";
  Document none = write_report(old);
  const Section& before = section(none, "Achieved GFLOP/s (E1)");
  int count = 0;
  for (const auto& b : before.blocks) count += b.kind == Block::kTable;
  EXPECT_EQ(count, 1);
  EXPECT_NE(slurp(old.folder + "/report.md").find("so the fraction-of-peak column is left out"),
            std::string::npos);
}

namespace {

std::vector<const Table*> tables_of(const Section& s) {
  std::vector<const Table*> out;
  for (const auto& b : s.blocks)
    if (b.kind == Block::kTable) out.push_back(&b.table);
  return out;
}

// The report of tools_mixed.jsonl in a fresh folder.
Document mixed_report(const std::string& name, const std::string& gnuplot, std::string& folder) {
  ReportOptions o;
  o.inputs = {kData + "/tools_mixed.jsonl"};
  o.folder = folder = fresh_folder(name);
  o.gnuplot = gnuplot;
  return write_report(o);
}

std::string paragraphs_of(const Section& s) {
  std::string out;
  for (const auto& b : s.blocks)
    if (b.kind == Block::kParagraph) out += b.text + "\n";
  return out;
}

}  // namespace

// Issue 40: a run mixing what it compares. The table keyed a cell on (hardware, network, batch,
// tool) and the later record stood: the bf16 run was set against XLA, the fp32 graph-mode figures
// vanished, a TIMEOUT replaced an OK cell and a SKIPPED real-data case its synthetic twin.
TEST(Report, ToolsTableKeysACellOnEverythingThatDiffers) {
  std::string folder;
  Document doc = mixed_report("tools_mixed", "", folder);
  const Section& s = section(doc, "Tools side by side (E1)");
  const std::vector<const Table*> tables = tables_of(s);
  ASSERT_EQ(tables.size(), 2u);  // the libraries, CPU 1 thread
  const Table& t = *tables[1];
  EXPECT_EQ(t.header, (std::vector<std::string>{"network", "batch", "setting", "cpu_tensorflow",
                                                "cpu_tensorflow (mode=xla)", "cpu_onednn",
                                                "cpu_mxnet", "fastest", "x fastest"}));
  EXPECT_EQ(t.first_numeric_column, 3u);
  std::string shown;
  for (const auto& row : t.rows) {
    for (const auto& cell : row) shown += cell + " | ";
    shown += "\n";
  }
  ASSERT_EQ(t.rows.size(), 4u) << shown;
  // fp32: cpu_onednn ran three times OK (20, 22, 19: the median 20) and once TIMEOUT; cpu_mxnet
  // fused its step where the others did not.
  // The XLA figure's timed steps were still settling (warmup_short): marked like a disturbance.
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"lenet", "16", "precision=fp32", "30.00",
                                                 "25.00 !", "20.00 * (x3) (+ TIMEOUT)",
                                                 "28.00 [fused]", "cpu_onednn", "1.50"}));
  // bf16 is a row of its own: never set against fp32.
  EXPECT_EQ(t.rows[1], (std::vector<std::string>{"lenet", "16", "precision=bf16", "", "", "14.00 *",
                                                 "", "cpu_onednn", "1.00"}));
  // The synthetic case's OK figures stand; the real-data case (SKIPPED) has its own row; the
  // figure taken beside other load is marked.
  EXPECT_EQ(t.rows[2],
            (std::vector<std::string>{"fcnr", "1024", "data=synthetic, evaluate=false", "700.0 !",
                                      "", "662.9 *", "", "cpu_onednn", "1.06"}));
  EXPECT_EQ(t.rows[3], (std::vector<std::string>{"fcnr", "1024", "data=real, evaluate=true", "", "",
                                                 "SKIPPED", "", "-", "-"}));
  const std::string notes = paragraphs_of(s);
  EXPECT_NE(notes.find("(xN): the same case ran N times"), std::string::npos) << notes;
  EXPECT_NE(notes.find("(+ STATUS): the case also has records that did not end OK"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("! marks a figure that may not be the tool's own steady step"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("lenet b16 (precision=fp32), cpu_tensorflow (mode=xla): warmup_short "
                       "(tools_mixed.jsonl:2)"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("fcnr b1024 (data=synthetic, evaluate=false), cpu_tensorflow: other_load, "
                       "spread (tools_mixed.jsonl:10)"),
            std::string::npos)
      << notes;
  // The time table: a SKIPPED real-data case no longer replaces the synthetic figure.
  const Table& time = first_table(section(doc, "Time per mini-batch (E1)"));
  ASSERT_EQ(time.rows.size(), 2u);
  EXPECT_EQ(time.header[3], "cpu_onednn 1T");
  EXPECT_EQ(time.rows[0][3], "19.00 / 14.00");  // the later fp32 record of the id, then bf16
  EXPECT_EQ(time.rows[1][3], "662.9 (+ SKIPPED)");
  // The chart's data: a bar per tool and row with an OK figure; none for the SKIPPED row.
  EXPECT_EQ(slurp(folder + "/tools_bars_E1_CPU__1_thread.csv"),
            "network,cpu_tensorflow,cpu_tensorflow (mode=xla),cpu_onednn,cpu_mxnet\n"
            "lenet b16 precision=fp32,30,25,20,28\n"
            "lenet b16 precision=bf16,,,14,\n"
            "\"fcnr b1024 data=synthetic, evaluate=false\",700,,662.9,\n");
}

// Issue 40, rule 2: where a backend says it is knowingly faster than its framework's own users get
// it (resolved.departures, ABI 1.5), its figure carries a numbered mark and the note under the
// table gives the cause in the backend's words; one declaration, one number; the Markdown stays
// inert whatever the declaration holds.
TEST(Report, ToolsTableMarksAFigureFasterThanItsFrameworksUsersGetItWithTheCause) {
  ReportOptions o;
  o.inputs = {kData + "/tools_departures.jsonl"};
  const std::string folder = o.folder = fresh_folder("tools_departures");
  o.gnuplot = "";
  const Document doc = write_report(o);
  const Section& s = section(doc, "Tools side by side (E1)");
  const std::vector<const Table*> tables = tables_of(s);
  ASSERT_EQ(tables.size(), 3u);  // the libraries, CPU 1 thread, CPU 2 threads
  for (const Table* t : {tables[1], tables[2]}) {
    ASSERT_EQ(t->header,
              (std::vector<std::string>{"network", "batch", "cpu_tensorflow", "cpu_mxnet",
                                        "cpu_onednn", "fastest", "x fastest"}));
    ASSERT_EQ(t->rows.size(), 2u);
    // lenet: no backend declared anything there.
    EXPECT_EQ(t->rows[1], (std::vector<std::string>{"lenet", "64", "15.00 *", "20.00", "",
                                                    "cpu_tensorflow", "1.33"}));
  }
  EXPECT_EQ(tables[1]->rows[0],
            (std::vector<std::string>{"resnet56", "128", "900.0 \u20201", "950.0 \u20202",
                                      "800.0 *", "cpu_onednn", "1.19"}));
  EXPECT_EQ(tables[2]->rows[0],
            (std::vector<std::string>{"resnet56", "128", "900.0 \u20201", "950.0 \u20202 \u20203",
                                      "800.0 *", "cpu_onednn", "1.19"}));
  const std::string notes = paragraphs_of(s);
  EXPECT_NE(notes.find("\u2020 marks a figure whose backend says it is knowingly faster there than "
                       "the framework's own users get it"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("\u20201 cpu_tensorflow (resnet56 b128): batch norm: FusedBatchNormV3, "
                       "which Keras's layer does not use: 2.0 s against 5.4 s a step."),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("\u20202 cpu_mxnet (resnet56 b128): global average pool: mean, not "
                       "Gluon's GlobalAvgPool2D: about 5.3 s of Gluon's 13 s step."),
            std::string::npos)
      << notes;
  const std::string md = slurp(folder + "/report.md");
  EXPECT_EQ(checks::markdown_problem(md, 1 + doc.sections.size()), "") << md;
  EXPECT_EQ(md.find("<b>"), std::string::npos);
  EXPECT_NE(md.find("900.0 \u20201"), std::string::npos);
  const std::string html = slurp(folder + "/report.html");
  EXPECT_EQ(html.find("<b>x</b>"), std::string::npos);
  EXPECT_NE(html.find("950.0 \u20202 \u20203"), std::string::npos);
}

// The paper's figure: a grouped bar chart per hardware, drawn for a run at one thread count (it
// had no picture at all), as PNG and SVG, referenced by report.md and inlined in report.html.
TEST(Report, ToolsBarChartPerHardwareIsDrawnAndReferenced) {
  if (find_program("gnuplot").empty())
    GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox); the chart cannot be drawn";
  std::string folder;
  mixed_report("tools_chart", "gnuplot", folder);
  const std::string stem = "tools_bars_E1_CPU__1_thread";
  const std::string png = slurp(folder + "/" + stem + ".png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  boost::property_tree::ptree svg;
  EXPECT_NO_THROW(boost::property_tree::read_xml(folder + "/" + stem + ".svg", svg));
  const std::string md = slurp(folder + "/report.md");
  EXPECT_NE(md.find("](" + stem + ".png)"), std::string::npos);
  EXPECT_NE(md.find("](" + stem + ".svg)"), std::string::npos);
  const std::string html = slurp(folder + "/report.html");
  EXPECT_NE(html.find("<img alt=\"Time per mini-batch, CPU, 1 thread (E1)\" "
                      "src=\"data:image/png;base64,iVBORw0KGgo"),
            std::string::npos);
  // The script: clustered bars on a log axis, the missing bars 0 (which the log axis leaves out).
  const std::string gp = slurp(folder + "/" + stem + ".gp");
  EXPECT_NE(gp.find("set style histogram clustered"), std::string::npos);
  EXPECT_NE(gp.find("set logscale y 10"), std::string::npos);
  EXPECT_NE(gp.find("\n0 0 14 0\n"), std::string::npos) << gp;
}

// A fused record (timing.fused_step) has no breakdown: the phase table says so once, not in
// every phase column.
TEST(Report, PhaseTableShowsAFusedRecordOnce) {
  std::string folder;
  Document doc = mixed_report("fused_phases", "", folder);
  const Table& t = first_table(section(doc, "Where a mini-batch goes (E1)"));
  const auto fused = std::find_if(t.rows.begin(), t.rows.end(), [](const auto& row) {
    return row[0] == "lenet.cpu_mxnet.b16.t1";
  });
  ASSERT_NE(fused, t.rows.end());
  EXPECT_EQ(*fused, (std::vector<std::string>{"lenet.cpu_mxnet.b16.t1", "28.00",
                                              "fused step: no breakdown", "", "", ""}));
}

// Issue 43, item 7: `matmul_peak: 1` measured 0.004 GFLOP/s and the report showed an MFU of
// 14662.7 as valid. An MFU above 1 is flagged impossible, with a note saying why.
TEST(Report, AnMfuAboveOneIsFlaggedImpossible) {
  const std::string folder = fresh_folder("impossible_mfu");
  std::ifstream in(kData + "/results.jsonl");
  std::string first;
  std::getline(in, first);
  auto r = nlohmann::ordered_json::parse(first);  // 80.57856 GFLOP/s
  r["matmul_peak"] = {{"m", 1},
                      {"n", 1},
                      {"k", 1},
                      {"pass", "forward"},
                      {"gemm_flops", 2.0},
                      {"iterations", 10},
                      {"median_ms", 0.5},
                      {"gflops", 0.004}};
  std::ofstream(folder + "/peak.jsonl") << r.dump() << "\n";
  ReportOptions o{{folder + "/peak.jsonl"}, folder + "/out", ""};
  Document doc = write_report(o);
  const Section& s = section(doc, "Achieved GFLOP/s (E1)");
  const std::vector<const Table*> tables = tables_of(s);
  ASSERT_EQ(tables.size(), 2u);
  ASSERT_EQ(tables[1]->rows.size(), 1u);
  EXPECT_EQ(tables[1]->rows[0].back(), "20144.640 (impossible)");
  EXPECT_NE(paragraphs_of(s).find("(impossible): an MFU above 1 cannot be"), std::string::npos);
}

// Issue 43, item 10: a count beyond what a 64-bit integer holds printed 0.
TEST(Report, HugeNumbersPrintAsTheyAre) {
  EXPECT_EQ(format_number(1e308, 1), "1.000e+308");
  EXPECT_EQ(format_number(123.456, 1), "123.5");
  const std::string folder = fresh_folder("huge_tokens");
  std::ifstream in(kData + "/results.jsonl");
  std::string first;
  std::getline(in, first);
  auto r = nlohmann::ordered_json::parse(first);
  r["network"]["tokens_per_sample"] = 1e308;
  r["timing"]["tokens_per_second"] = 5.0;
  std::ofstream(folder + "/tokens.jsonl") << r.dump() << "\n";
  ReportOptions o{{folder + "/tokens.jsonl"}, folder + "/out", ""};
  Document doc = write_report(o);
  const std::vector<const Table*> tables = tables_of(section(doc, "Achieved GFLOP/s (E1)"));
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[1]->rows.at(0).at(1), "1e+308");
}
