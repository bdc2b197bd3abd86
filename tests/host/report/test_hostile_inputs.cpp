// test_hostile_inputs.cpp — the report side against results files made by an attacker or broken
// by accident (issue 32): gnuplot commands planted in case ids and names never run and the
// saved scripts stay inert; gnuplot itself cannot start a program; CSV cells that a spreadsheet
// would run are neutralised; the reader refuses every bad line with FILE:LINE (only a torn
// record is skipped) and a directory by name; a huge reason is cut; a SKIPPED record written by
// the parent joins its machine's group; bar labels say what varies.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "report/commands.h"
#include "report/compare.h"
#include "report/export.h"
#include "report/gnuplot_process.h"
#include "report/plots.h"
#include "report/report.h"
#include "report/views.h"
#include "test_files.h"
#include "writer_checks.h"

using namespace dlhost::report;
namespace fs = std::filesystem;

namespace {

const std::string kData = DLHOST_REPORT_TEST_DATA;

std::string fresh_folder(const std::string& name) { return test::fresh_folder("hostile/" + name); }
using test::slurp;

// The fixture's first record (OK, lenet, cpu_onednn, 1 thread) to build others from.
json ok_record() {
  std::ifstream in(kData + "/results.jsonl");
  std::string first;
  std::getline(in, first);
  return json::parse(first);
}

// Bytes of a literal, NULs included.
template <size_t N>
std::string bytes(const char (&text)[N]) {
  return std::string(text, N - 1);
}

std::string write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The message of the InputError reading `path` throws, or "" when it reads.
std::string read_error(const std::string& path) {
  Inputs in;
  try {
    read_results_file(path, in);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

int run_cli(std::vector<std::string> args) {
  CLI::App app;
  Commands commands = add_commands(app);
  args.insert(args.begin(), "dlhost");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  std::optional<int> rc = commands.run_chosen();
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  return rc.value_or(-1);
}

}  // namespace

// --- gnuplot ---------------------------------------------------------------------------------

// Payloads of the probe: a newline that would end the string, an EOD that would close the data
// block of the bars (their labels were written into it), backquotes and a quote.
TEST(HostileReport, PlantedGnuplotCommandsDoNotRunAndTheScriptsStayInert) {
  if (find_program("gnuplot").empty())
    GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox); nothing to plant in";
  const std::string folder = fresh_folder("planted");
  const std::string touch = "touch " + folder + "/pwned";
  json t1 = ok_record(), t2 = ok_record();
  t1["case_id"] = "evil.t1\" 1 1 1 1\nEOD\nprint system('" + touch + "_eod')\n$z << EOD\n\"x";
  t2["case_id"] = "evil.t2\nprint system(\"" + touch + "_case\")\n";
  for (json* r : {&t1, &t2}) {
    (*r)["network"]["name"] = "net'\nprint system('" + touch + "_net')\n#";
    (*r)["backend"]["name"] = "`" + touch + "_backquote`";
  }
  t2["resolved"]["threads_used"] = 2;
  t2["params"]["threads"] = 2;
  write_file(folder + "/evil.jsonl", t1.dump() + "\n" + t2.dump() + "\n");
  ReportOptions o{{folder + "/evil.jsonl"}, folder + "/out", "gnuplot"};
  write_report(o);
  for (const char* planted : {"_eod", "_case", "_net", "_backquote"})
    EXPECT_FALSE(fs::exists(folder + "/pwned" + planted)) << planted;
  int scripts = 0;
  for (const auto& f : fs::directory_iterator(folder + "/out")) {
    if (f.path().extension() != ".gp") continue;
    ++scripts;
    EXPECT_EQ(checks::gnuplot_script_problem(slurp(f.path())), "") << f.path();
  }
  EXPECT_GE(scripts, 2);  // the thread scaling and the phases were plotted
  // gnuplot ran on them: the plots came out.
  EXPECT_TRUE(fs::exists(folder + "/out/thread_scaling_E1.png"));
  EXPECT_TRUE(fs::exists(folder + "/out/phases_E1.png"));
}

TEST(HostileReport, ScriptsFromHostileStringsPassTheLint) {
  const std::string nasty = "a'\nEOD\r\x01`x`@m!|<\"b''";
  LinePlot line{"../../etc/x",
                nasty,
                nasty,
                nasty,
                true,
                true,
                true,
                {Series{nasty, {{1, 2}, {2, 3}, {NAN, 1}, {INFINITY, 2}}, false},
                 Series{"EOD", {{1, 1}}, true}}};
  EXPECT_EQ(checks::gnuplot_script_problem(gnuplot_script(line)), "");
  StackedBars bars{
      "phases", nasty, nasty, {nasty, "EOD", "x"}, {nasty, "b"}, {{1, 2}, {NAN, 4}, {5, 6}}, {}};
  EXPECT_EQ(checks::gnuplot_script_problem(gnuplot_script(bars)), "");
  // The lint is not blind: the old quoting (quotes doubled, newlines kept) fails it.
  EXPECT_NE(checks::gnuplot_script_problem("set title 'a\nprint system(''touch x'')'\n"), "");
  EXPECT_NE(checks::gnuplot_script_problem("$d << EOD\n\"x\" 1\nEOD\n"), "");
  EXPECT_EQ(file_stem("../../etc/x"), "_.._.._etc_x");
  EXPECT_EQ(file_stem("-rf"), "_-rf");
  EXPECT_EQ(gnuplot_literal("it's\nfine"), "'it''s fine'");
}

// The second fence: whatever a script says, gnuplot cannot start a program.
TEST(GnuplotFence, NoWayOfStartingAProgramWorksInsideIt) {
  const std::string program = find_program("gnuplot");
  if (program.empty()) GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox)";
  const std::string folder = fresh_folder("fence");
  const std::vector<std::string> ways{
      "print system('touch started_system')",
      "!touch started_bang",
      "x = \"`touch started_backquote`\"",
      "plot '< touch started_pipe; echo 1 2' using 1:2",
      "set print '| touch started_print'\nprint 1",
      "load '< touch started_load'",
      "set terminal svg\nset output '| touch started_output'\nplot x"};
  for (size_t i = 0; i < ways.size(); ++i) {
    const std::string script = "way" + std::to_string(i) + ".gp";
    write_file(folder + "/" + script, ways[i] + "\n");
    run_gnuplot_fenced(program, folder, script, folder + "/way.log", 30);
  }
  for (const char* name : {"system", "bang", "backquote", "pipe", "print", "load", "output"})
    EXPECT_FALSE(fs::exists(folder + "/started_" + std::string(name))) << name;
  // And plotting still works inside the fence.
  write_file(folder + "/fine.gp",
             "set terminal svg\nset output 'fine.svg'\n$d << EOD\n1 2\n2 3\nEOD\nplot $d\n");
  GnuplotRun fine = run_gnuplot_fenced(program, folder, "fine.gp", folder + "/fine.log", 30);
  EXPECT_EQ(fine.exit_code, 0) << fine.message;
  EXPECT_TRUE(fs::exists(folder + "/fine.svg"));
}

// --- CSV ------------------------------------------------------------------------------------

TEST(HostileCsv, FormulaCellsAreNeutralisedNumbersAreNot) {
  const std::string folder = fresh_folder("csv");
  std::vector<std::vector<std::string>> rows{
      {"=HYPERLINK(\"http://x\",\"y\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)"},
      {"\tx", "\rx", "-1.5", "1e-05"},
      {"+3", ".5", "plain", "a=b"}};
  write_csv(folder + "/x.csv", rows);
  const std::string text = slurp(folder + "/x.csv");
  EXPECT_EQ(checks::csv_problem(rows, text), "") << text;
  EXPECT_EQ(text.rfind("\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",", 0), 0u) << text;
  EXPECT_NE(text.find(",'@SUM(A1)\n"), std::string::npos) << text;
  EXPECT_NE(text.find(",-1.5,1e-05\n"), std::string::npos) << text;
  EXPECT_NE(text.find("+3,.5,plain,a=b\n"), std::string::npos) << text;
}

TEST(HostileCsv, ExportNeutralisesACaseId) {
  const std::string folder = fresh_folder("export");
  json r = ok_record();
  r["case_id"] = "=cmd|' /C calc'!A0";
  write_file(folder + "/r.jsonl", r.dump() + "\n");
  EXPECT_EQ(run_cli({"export", folder + "/r.jsonl", "--csv", "-o", folder + "/r.csv"}), 0);
  const std::string text = slurp(folder + "/r.csv");
  EXPECT_NE(text.find("\n'=cmd|' /C calc'!A0,OK,"), std::string::npos) << text.substr(0, 600);
}

// --- the results reader ---------------------------------------------------------------------

TEST(HostileReader, EveryBadLineIsAnErrorWithFileAndLine) {
  const std::string folder = fresh_folder("reader");
  const std::string good = ok_record().dump() + "\n";
  auto with_last = [&](const std::string& name, const std::string& last) {
    return write_file(folder + "/" + name, good + last);
  };
  struct Case {
    std::string file, expected;
  };
  json big = ok_record();
  std::string overflow = big.dump();
  overflow.replace(overflow.find("\"duration_s\":"), 13, "\"duration_s\":1e999,\"was\":");
  json v99 = ok_record(), v_text = ok_record(), v_none = ok_record(), weird = ok_record();
  v99["schema_version"] = 99;
  v_text["schema_version"] = "1";
  v_none.erase("schema_version");
  weird["status"] = "WEIRD";
  const std::vector<Case> cases{
      {with_last("utf8.jsonl", "{\"case_id\": \"\xff\xfe\", \"status\": \"OK\"}\n"),
       ":2: not a JSON"},
      {with_last("surrogate.jsonl", "{\"case_id\": \"\\ud800\", \"status\": \"OK\"}\n"),
       ":2: not a JSON"},
      {with_last("nul.jsonl", bytes("{\"case_id\": \"a\0b\", \"status\": \"OK\"}\n")),
       ":2: not a JSON"},
      {with_last("garbage_last.jsonl", "garbage\n"), ":2: not a JSON"},
      {with_last("overflow.jsonl", overflow + "\n"), ":2: not a valid record"},
      {with_last("v99.jsonl", v99.dump() + "\n"), ":2: schema_version 99 is not one"},
      {with_last("v_text.jsonl", v_text.dump() + "\n"), ":2: schema_version \"1\" is not one"},
      {with_last("v_none.jsonl", v_none.dump() + "\n"), ":2: no schema_version"},
      {with_last("weird.jsonl", weird.dump() + "\n"), ":2: status \"WEIRD\" is not one of"},
      {write_file(folder + "/binary.jsonl", bytes("\x7f"
                                                  "ELF\x02\x01\x01\0\0\0\xff\xfe")),
       ":1: not a JSON"},
      {write_file(folder + "/binary_brace.jsonl", bytes("{\x01\x02\0\xff")), ":1: not a JSON"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    std::string message = read_error(c.file);
    EXPECT_NE(message.find(c.file + c.expected), std::string::npos) << message;
  }
}

TEST(HostileReader, OnlyATornRecordIsSkipped) {
  const std::string folder = fresh_folder("torn");
  const std::string good = ok_record().dump();
  // Cut mid-record with no newline (the last line), and cut mid-record then ended by a resumed
  // run's writer (results.cpp) before its next record: both skipped with a warning.
  const std::string cut = good.substr(0, good.size() / 2);
  const std::string utf8_cut = "{\"case_id\": \"caf\xc3";
  for (const auto& [name, text, line] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"last.jsonl", good + "\n" + cut, ":2: skipped a torn last line"},
           {"utf8.jsonl", good + "\n" + utf8_cut, ":2: skipped a torn last line"},
           {"resumed.jsonl", good + "\n" + cut + "\n" + good + "\n", ":2: skipped a torn line"}}) {
    SCOPED_TRACE(name);
    Inputs in;
    ASSERT_NO_THROW(read_results_file(write_file(folder + "/" + name, text), in));
    EXPECT_EQ(in.records.size(), name == "resumed.jsonl" ? 2u : 1u);
    ASSERT_EQ(in.warnings.size(), 1u);
    EXPECT_NE(in.warnings[0].find(name + line), std::string::npos) << in.warnings[0];
  }
}

TEST(HostileReader, ADirectoryIsRefusedByName) {
  const std::string folder = fresh_folder("directory");
  EXPECT_NE(read_error(folder).find(folder + ": is a directory"), std::string::npos)
      << read_error(folder);
  ReportOptions o{{folder}, folder + "/out", ""};
  EXPECT_THROW(write_report(o), InputError);
  EXPECT_EQ(run_cli({"export", folder, "--csv"}), 2);
  EXPECT_EQ(run_cli({"report", folder, "-o", folder + "/out", "--no-plots"}), 2);
  EXPECT_EQ(run_cli({"compare", kData + "/base.jsonl", folder}), 2);
  const std::string binary = write_file(folder + "/../binary.bin", bytes("\0\1\2\3\xff"));
  EXPECT_EQ(run_cli({"export", binary, "--csv"}), 2);
  EXPECT_EQ(run_cli({"compare", kData + "/base.jsonl", binary, "--fail-on-regression"}), 2);
}

// --- the report's text ----------------------------------------------------------------------

TEST(HostileReport, AHugeReasonIsCutWithANote) {
  const std::string folder = fresh_folder("reason");
  json r = ok_record();
  r["status"] = "FAILED";
  r["reason"] = std::string(1 << 20, 'x') + "\nend";
  write_file(folder + "/r.jsonl", r.dump() + "\n");
  ReportOptions o{{folder + "/r.jsonl"}, folder + "/out", ""};
  write_report(o);
  // report.md escapes the note's brackets as any text's (they would be a link's).
  for (const char* file : {"/out/report.md", "/out/report.html"}) {
    SCOPED_TRACE(file);
    const std::string text = slurp(folder + file);
    const std::string end = std::string(file) == "/out/report.md" ? "\\]" : "]";
    EXPECT_LT(text.size(), 64u * 1024);
    EXPECT_NE(
        text.find("cut: 1048580 bytes in all; the whole text is in " + folder + "/r.jsonl:1" + end),
        std::string::npos);
  }
}

// A thread sweep on 2 cores: t1 and t2 ran; t4 was SKIPPED by the parent process, whose
// environment names every backend it looked at and the ISA of the last one (cpu_reference's
// "generic"), with another library text. Its cell belongs in the sweep's own table.
TEST(HostileReport, ASkippedRecordShowsInItsMachinesTable) {
  json t1 = ok_record(), t2 = ok_record(), t4;
  t1["environment"]["isa"] = "avx2";
  t2["environment"]["isa"] = "avx2";
  t2["case_id"] = "lenet.cpu_onednn.b64.t2";
  t2["params"]["threads"] = 2;
  t2["resolved"]["threads_used"] = 2;
  t4 = {{"schema_version", 1},    {"case_id", "lenet.cpu_onednn.b64.t4"},
        {"status", "SKIPPED"},    {"reason", "needs 4 threads; this machine has 2"},
        {"params", t1["params"]}, {"environment", t1["environment"]}};
  t4["params"]["threads"] = 4;
  t4["environment"]["isa"] = "generic";
  t4["environment"]["libraries"] = {{"cpu_onednn", "oneDNN 2.6.3 (parent)"},
                                    {"cpu_reference", "reference (OpenBLAS 0.3.21)"}};
  std::vector<Record> records{{t4, "r", 1}, {t1, "r", 2}, {t2, "r", 3}};
  auto groups = group_by_environment(records);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].records.size(), 3u);
  EXPECT_EQ(text_at(groups[0].environment, "/isa"), text_at(t1["environment"], "/isa"));
  Section time = time_per_minibatch_view(groups[0]);
  const Table* table = nullptr;
  for (const auto& b : time.blocks)
    if (b.kind == Block::kTable) table = &b.table;
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->header, (std::vector<std::string>{"network", "batch", "cpu_onednn 1T",
                                                     "cpu_onednn 2T", "cpu_onednn 4T"}));
  EXPECT_EQ(table->rows[0][4], "SKIPPED");
  // A machine with no OK record still gets a group, of its SKIPPED records.
  json other = t4;
  other["environment"]["cpu_model"] = "Another CPU";
  records.push_back({other, "r", 4});
  EXPECT_EQ(group_by_environment(records).size(), 2u);
}

TEST(PlotLabels, SayOnlyWhatVaries) {
  std::string common;
  auto labels = varying_labels(
      {"fcn5.cpu_onednn.b64.t1.comm=none.ranks=1.launcher=mpirun.comm_memory=auto",
       "fcn5.cpu_onednn.b64.t2.comm=none.ranks=1.launcher=mpirun.comm_memory=auto",
       "fcn5.cpu_libtorch.b64.t2.comm=none.ranks=1.launcher=mpirun.comm_memory=auto"},
      common);
  EXPECT_EQ(labels,
            (std::vector<std::string>{"cpu_onednn.t1", "cpu_onednn.t2", "cpu_libtorch.t2"}));
  EXPECT_EQ(common, "fcn5.b64.comm=none.ranks=1.launcher=mpirun.comm_memory=auto");
  // A dot inside a value stays with it; one id keeps its whole.
  labels = varying_labels({"lenet.lr=0.01", "lenet.lr=0.1"}, common);
  EXPECT_EQ(labels, (std::vector<std::string>{"lr=0.01", "lr=0.1"}));
  labels = varying_labels({"lenet.b64"}, common);
  EXPECT_EQ(labels, (std::vector<std::string>{"lenet.b64"}));
  EXPECT_EQ(common, "");
}

// A record's string printed on a terminal cannot drive it (escape sequences, a fake line).
TEST(HostileTerminal, ComparisonAndErrorsPrintNoControlCharacter) {
  const std::string folder = fresh_folder("terminal");
  json r = ok_record();
  r["case_id"] =
      "x\x1b]0;owned\x07\x1b[2J\nfake line \xc2\x9b"
      "31m";
  const std::string file = write_file(folder + "/r.jsonl", r.dump() + "\n");
  std::ostringstream out, err;
  EXPECT_EQ(run_compare(CompareOptions{file, file, 0.05, 0.05, false}, out, err), 0);
  for (const std::string& text : {out.str(), err.str()}) {
    EXPECT_EQ(text.find('\x1b'), std::string::npos);
    EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos);
    EXPECT_EQ(text.find("\nfake line"), std::string::npos);
  }
  EXPECT_NE(out.str().find("x?]0;owned??[2J?fake line ?31m"), std::string::npos) << out.str();
  // Raw control bytes in a line: the parser's message quotes them, made printable.
  write_file(folder + "/raw.jsonl", "{\"case_id\": \"\x1b[2J\", \"status\": \"OK\"}\n");
  const std::string message = read_error(folder + "/raw.jsonl");
  EXPECT_NE(message.find("raw.jsonl:1: not a JSON record"), std::string::npos) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
}

// Issue 43, item 10: report.md passed record strings through: HTML, links and remote images in a
// network or library string reached the Markdown raw, and a newline in backend.device.model
// injected a heading and a table. Every string is now text; report.html stays escaped.
TEST(HostileReport, MarkdownHoldsNoStructureOfARecordsMaking) {
  const std::string folder = fresh_folder("markdown");
  const std::string script = "<script>alert(1)</script>";
  const std::string image = "<img src=x onerror=alert(1)>";
  const std::string link = "[x](javascript:alert(1))";
  const std::string remote = "![t](http://evil.example/t.png)";
  json a = ok_record();
  a["network"]["name"] = "lenet" + script;
  a["backend"]["device"]["model"] = "EPYC\n# Injected heading\n| a | b |\n|---|---|\n| 1 | 2 |";
  a["backend"]["device"]["library"] = image + " " + link;
  a["environment"]["cpu_model"] = "AMD\r\n- a list *and* _emphasis_ `code` &amp; &#60;b&#62;";
  a["environment"]["libraries"]["cpu_onednn"] = remote;
  json b = a;
  b["case_id"] = "  1. " + link;
  b["backend"]["name"] = "cpu_tool" + remote;
  b["params"]["backend"] = b["backend"]["name"];
  b["status"] = "FAILED";
  b["reason"] = "\n> quoted\n    code\n```\nfence\n" + script;
  write_file(folder + "/r.jsonl", a.dump() + "\n" + b.dump() + "\n");
  ReportOptions o{{folder + "/r.jsonl"}, folder + "/out", ""};
  const Document doc = write_report(o);
  const std::string md = slurp(folder + "/out/report.md");
  EXPECT_EQ(checks::markdown_problem(md, 1 + doc.sections.size()), "") << md;
  for (const std::string& raw : {script, image, link, remote, std::string("\n# Injected"),
                                 std::string("<b>"), std::string("&#60;")})
    EXPECT_EQ(md.find(raw), std::string::npos) << raw;
  // The strings are still there, as text.
  EXPECT_NE(md.find("lenet&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(md.find("\\[x\\](javascript:alert(1))"), std::string::npos);
  EXPECT_NE(md.find("&amp;amp;"), std::string::npos);
  const std::string html = slurp(folder + "/out/report.html");
  for (const std::string& raw : {script, image, std::string("<b>")})
    EXPECT_EQ(html.find(raw), std::string::npos) << raw;
}

// The checker itself finds what the writer used to let through.
TEST(HostileReport, TheMarkdownCheckFindsInjections) {
  EXPECT_EQ(checks::markdown_problem("# t\n\ntext\n", 1), "");
  EXPECT_NE(checks::markdown_problem("# t\n\na <script>\n", 1), "");
  EXPECT_NE(checks::markdown_problem("# t\n\n[x](javascript:1)\n", 1), "");
  EXPECT_NE(checks::markdown_problem("# t\n# u\n", 1), "");
  EXPECT_NE(checks::markdown_problem("# t\n\n| a | b |\n|---|---|\n| 1 | 2 | 3 |\n", 1), "");
  EXPECT_NE(checks::markdown_problem("# t\n\n- list\n", 1), "");
  EXPECT_NE(checks::markdown_problem("# t\n\n&#60;\n", 1), "");
}

// The tools table reads `params` and its `options` of any shape: a record's params need not be
// an object, nor its options.
TEST(HostileReport, ParamsOfAnyShapeDoNotStopTheToolsTable) {
  json a = ok_record(), b = ok_record(), c = ok_record();
  b["case_id"] = "b";
  b["backend"]["name"] = "cpu_other";
  b["params"]["options"] = json::array({1, 2});
  c["case_id"] = "c";
  c["backend"]["name"] = "cpu_third";
  c["params"] = "not an object";
  a["params"]["options"] = {{"cpu_onednn", 7}, {"networks_paper", "x"}};
  a["network"]["plugin"] = "networks_paper";
  std::vector<Record> records{{a, "r", 1}, {b, "r", 2}, {c, "r", 3}};
  auto groups = group_by_environment(records);
  ASSERT_EQ(groups.size(), 1u);
  Plotter plotter(fresh_folder("params_shapes"), "");
  Section s;
  ASSERT_NO_THROW(s = tools_view(groups[0], plotter));
  EXPECT_EQ(s.title, "Tools side by side (E1)");
}
