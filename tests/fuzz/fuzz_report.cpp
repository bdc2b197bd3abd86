// fuzz_report.cpp — libFuzzer target: the results reader and the report's writers on arbitrary
// bytes. The contract: bad input yields one InputError (never another exception, a crash, a
// hang or a sanitizer report); what the reader accepts goes through the views, compare and
// export without throwing; every CSV the export writes reads back as its cells with no formula;
// every gnuplot script made from the records' strings (titles, series names, bar labels) is
// inert, and the Markdown of the views and of a document made of the records' strings in every
// place one can stand (title, headings, paragraphs with code spans, table cells, plot captions)
// holds no structure of their making, both by the independent checks in
// tests/host/report/writer_checks.h.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "../host/report/writer_checks.h"
#include "report/compare.h"
#include "report/document.h"
#include "report/export.h"
#include "report/plots.h"
#include "report/records.h"
#include "report/views.h"

using namespace dlhost::report;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Every string a record holds in the fields the views label with.
std::vector<std::string> labels_of(const std::vector<Record>& records) {
  std::vector<std::string> out;
  for (const auto& r : records) {
    out.push_back(case_id(r));
    out.push_back(network(r));
    out.push_back(backend(r));
    out.push_back(text_at(r.data, "/reason"));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  Inputs in;
  try {
    parse_results_text(text, "fuzz.jsonl", in);
  } catch (const InputError&) {
    return 0;
  }
  // The views that draw no plot, and a comparison of the file with itself.
  Document doc{"fuzz", {}};
  std::vector<EnvironmentGroup> groups = group_by_environment(in.records);
  doc.sections.push_back(environments_view(groups));
  for (const auto& g : groups) {
    doc.sections.push_back(time_per_minibatch_view(g));
    doc.sections.push_back(gflops_view(g));
  }
  // The tools views draw no plot here (no gnuplot), but writes its plots' CSVs: into a folder
  // of this process's own.
  static const std::string plots = [] {
    char folder[] = "/tmp/fuzz_report_XXXXXX";
    if (!mkdtemp(folder)) __builtin_trap();
    static const std::string made = folder;
    std::atexit([] { std::filesystem::remove_all(made); });  // libFuzzer ends by exit()
    return made;
  }();
  Plotter plotter(plots, "");
  for (const auto& g : groups) {
    doc.sections.push_back(tools_view(g, plotter));
    doc.sections.push_back(distributed_tools_view(g, plotter));
  }
  doc.sections.push_back(not_ok_view(in.records));
  doc.sections.push_back(warnings_view(in.records));
  std::ostringstream sink;
  const std::string views_md = to_markdown(doc);
  check(checks::markdown_problem(views_md, 1 + doc.sections.size()).empty());
  sink << views_md << to_html(doc, "");
  Comparison c = compare_records(in.records, in.records, 0.05, 0.05);
  print_comparison(c, "a", "b", sink);
  check(c.regressions == 0);  // a file against itself cannot be slower

  // CSV: the export's rows read back as given, formulas neutralised.
  auto rows = export_rows(in.records);
  check(checks::csv_problem(rows, csv_text(rows)).empty());

  // gnuplot: the records' strings in every place a script holds text.
  std::vector<std::string> strings = labels_of(in.records);
  if (strings.empty()) return 0;
  LinePlot line{strings[0], strings[0], strings.back(), strings[strings.size() / 2],
                true,       true,       true,           {}};
  for (size_t i = 0; i < strings.size(); ++i)
    line.series.push_back(
        Series{strings[i], {{1.0 + static_cast<double>(i), 2.0}, {3.0, -1.0}}, i % 2 == 1});
  check(checks::gnuplot_script_problem(gnuplot_script(line)).empty());
  // Markdown: the records' strings as the title, headings, paragraphs (inside and outside code
  // spans), table cells and plot captions.
  Document strings_doc{strings[0], {}};
  for (size_t i = 0; i < strings.size(); ++i) {
    Section section{strings[i], {}};
    section.paragraph(strings[i] + " `" + strings[strings.size() - 1 - i] + "` " + strings[0]);
    Table table{{strings[i], "x"}, {{strings.back(), strings[i]}, {"1", strings[0]}}, 1};
    section.add(table);
    section.add(PlotFiles{strings[i], "plot.csv", i % 2 ? "plot.png" : "", "plot.svg"});
    strings_doc.sections.push_back(section);
  }
  check(
      checks::markdown_problem(to_markdown(strings_doc), 1 + strings_doc.sections.size()).empty());

  GroupedBars grouped{strings[0], strings.back(), strings[0], strings, {strings.back(), "x"}, {}};
  for (size_t i = 0; i < strings.size(); ++i)
    grouped.values.push_back({static_cast<double>(i), i % 2 ? -1.0 : 1e308});
  check(checks::gnuplot_script_problem(gnuplot_script(grouped)).empty());

  StackedBars bars{strings.back(), strings[0], strings.back(), strings, {strings[0], "x"}, {}, {}};
  for (size_t i = 0; i < strings.size(); ++i) bars.values.push_back({static_cast<double>(i), 1.0});
  std::string common;
  bars.labels = varying_labels(strings, common);
  check(bars.labels.size() == strings.size());
  check(checks::gnuplot_script_problem(gnuplot_script(bars)).empty());
  return 0;
}
