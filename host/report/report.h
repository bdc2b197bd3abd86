// report.h — `dlhost report`: results files (and comm-bench JSON files) in, a folder out with
// report.md, one self-contained report.html, and each plot as PNG + SVG with its CSV beside it.
#pragma once

#include <string>
#include <vector>

#include "report/document.h"
#include "report/records.h"

namespace dlhost::report {

struct ReportOptions {
  std::vector<std::string> inputs;
  std::string folder;
  std::string gnuplot = "gnuplot";  // program name or path; empty: no plots
};

// The whole report as data (plots rendered into options.folder as a side effect).
Document build_report(const Inputs& inputs, const ReportOptions& options);

// Reads the inputs, builds the report and writes report.md and report.html into the folder
// (created if missing). Throws InputError for bad input, std::runtime_error for a write error.
Document write_report(const ReportOptions& options);

}  // namespace dlhost::report
