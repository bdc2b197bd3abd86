// plots.h — plots rendered by gnuplot (Debian's gnuplot-nox) to PNG and SVG, each with its data
// written beside it as CSV. gnuplot is found at run time; without it only the CSVs are written
// and unavailable_reason() says why. One Plotter per report folder, used from one thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "report/document.h"

namespace dlhost::report {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool dashed = false;                            // a reference line, e.g. ideal speedup
};

struct LinePlot {
  std::string name;  // file stem, unique within the report
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  bool x_in_bytes = false;  // tics as 1KiB, 1MiB, ...
  std::vector<Series> series;
};

// One bar per category, stacked from its parts (values[category][part]).
struct StackedBars {
  std::string name, title, y_label;
  std::vector<std::string> categories, parts;
  std::vector<std::vector<double>> values;
};

class Plotter {
 public:
  // `gnuplot` is a program name searched on PATH, or a path; empty means "do not plot".
  Plotter(std::string folder, const std::string& gnuplot);
  bool available() const { return !program_.empty(); }
  const std::string& unavailable_reason() const { return unavailable_reason_; }
  // Files of the plots gnuplot failed on, with its message.
  const std::vector<std::string>& failures() const { return failures_; }

  PlotFiles render(const LinePlot& plot);
  PlotFiles render(const StackedBars& plot);

 private:
  // Size in pixels: wider for many bars (their labels stay apart), taller for long labels.
  PlotFiles run_script(const std::string& name, const std::string& title, const std::string& body,
                       int width = 1000, int height = 560);
  std::string folder_, program_, unavailable_reason_;
  std::vector<std::string> failures_;
};

// The full path of an executable found on PATH (or `name` itself if it holds a '/' and is
// executable); empty when there is none.
std::string find_program(const std::string& name);

// Writes rows as CSV (RFC 4180 quoting). Throws std::runtime_error when the file cannot be written.
void write_csv(const std::string& path, const std::vector<std::vector<std::string>>& rows);

}  // namespace dlhost::report
