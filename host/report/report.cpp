// report.cpp — see report.h. The order of sections follows the paper: the machines, the time
// tables, scaling with threads and mini-batch size, multi-rank scaling, the phase split, FLOP
// rates, the communication layer alone, what did not run, and last the warnings.
#include "report/report.h"

#include <map>
#include <stdexcept>

#include "output/output_file.h"
#include "report/plots.h"
#include "report/views.h"

namespace dlhost::report {

namespace {

Section inputs_view(const Inputs& in, const Plotter& plotter) {
  Section s{"Inputs", {}};
  std::map<std::string, int> counts;
  for (const auto& r : in.records) ++counts[status(r)];
  std::string summary;
  for (const auto& [st, n] : counts)
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + st;
  s.paragraph(std::to_string(in.records.size()) + " case record(s) (" +
              (summary.empty() ? "none" : summary) + ") and " +
              std::to_string(in.comm_benches.size()) + " comm-bench file(s).");
  Table files{{"file"}, {}, 99};
  for (const auto& f : in.files) files.rows.push_back({f});
  s.add(files);
  for (const auto& w : in.warnings) s.paragraph("Warning: " + w);
  if (!plotter.available())
    s.paragraph("Plots skipped: " + plotter.unavailable_reason() +
                ". The tables are complete; each plot's data is still written as CSV.");
  return s;
}

}  // namespace

Document build_report(const Inputs& in, const ReportOptions& options) {
  Plotter plotter(options.folder, options.gnuplot);
  Document doc{"dlhost report", {}};
  doc.sections.push_back(inputs_view(in, plotter));
  std::vector<EnvironmentGroup> groups = group_by_environment(in.records);
  if (!groups.empty()) doc.sections.push_back(environments_view(groups));
  for (const auto& g : groups) {
    doc.sections.push_back(time_per_minibatch_view(g));
    doc.sections.push_back(tools_view(g, plotter));
    doc.sections.push_back(thread_scaling_view(g, plotter));
    doc.sections.push_back(batch_sweep_view(g, plotter));
    doc.sections.push_back(multi_rank_view(g, plotter));
    doc.sections.push_back(distributed_tools_view(g, plotter));
    doc.sections.push_back(phase_split_view(g, plotter));
    doc.sections.push_back(gflops_view(g));
  }
  if (!in.comm_benches.empty()) doc.sections.push_back(comm_bench_view(in.comm_benches, plotter));
  doc.sections.push_back(not_ok_view(in.records));
  doc.sections.push_back(warnings_view(in.records));
  if (!plotter.failures().empty()) {
    Section failed{"Plots gnuplot failed on", {}};
    for (const auto& f : plotter.failures()) failed.paragraph(f);
    doc.sections.push_back(failed);
  }
  return doc;
}

Document write_report(const ReportOptions& options) {
  Inputs in;
  for (const auto& path : options.inputs) read_input_file(path, in);
  output::prepare_folder(options.folder);
  Document doc = build_report(in, options);
  output::write_whole_file(options.folder + "/report.md", to_markdown(doc));
  output::write_whole_file(options.folder + "/report.html", to_html(doc, options.folder));
  return doc;
}

}  // namespace dlhost::report
