// plots.h — plots rendered by gnuplot (Debian's gnuplot-nox) to PNG and SVG, each with its data
// written beside it as CSV. gnuplot is found at run time; without it only the CSVs are written
// and unavailable_reason() says why. One Plotter per report folder, used from one thread.
//
// Titles, axis and series names and bar labels come from results files, which anyone may hand
// over: in the scripts every such string is an inert gnuplot literal (gnuplot_literal), data
// blocks hold numbers only, file names are made of [A-Za-z0-9_.-] (file_stem), and gnuplot runs
// fenced (gnuplot_process.h). In the CSVs a cell that a spreadsheet would take for a formula is
// neutralised (spreadsheet_cell).
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
  std::string name;  // file stem (made safe and unique by the Plotter)
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  bool x_in_bytes = false;  // tics as 1KiB, 1MiB, ...
  std::vector<Series> series;
};

// One bar per category, stacked from its parts (values[category][part]).
struct StackedBars {
  std::string name, title, y_label;
  std::vector<std::string> categories, parts;  // the CSV's row names and column names
  std::vector<std::vector<double>> values;
  std::vector<std::string> labels;  // the bars' tic labels; empty: the categories
};

// The paper's figure: a group of bars per category (a network), a bar per group member (a tool),
// values[category][member] on a log axis; a value that is not a positive finite number (a tool
// that did not run) draws no bar.
struct GroupedBars {
  std::string name, title, y_label;
  std::vector<std::string> categories, groups;  // the groups are the bars of each category
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

  PlotFiles render(LinePlot plot);
  PlotFiles render(StackedBars plot);
  PlotFiles render(GroupedBars plot);

 private:
  // A safe file stem for `name` that no earlier plot of this report used.
  std::string unique_stem(const std::string& name);
  PlotFiles run_script(const std::string& stem, const std::string& title,
                       const std::string& script);
  std::string folder_, program_, unavailable_reason_;
  std::vector<std::string> failures_, stems_;
};

// The whole gnuplot script of a plot: settings, data blocks (numbers only), the plot command, and
// the PNG and SVG outputs `<name>.png` and `<name>.svg` in the current folder. Pure functions:
// the fuzz target checks their output.
std::string gnuplot_script(const LinePlot& plot);
std::string gnuplot_script(const StackedBars& plot);
std::string gnuplot_script(const GroupedBars& plot);

// A gnuplot string literal that is only ever text: single quotes (inside them gnuplot does no
// backquote, macro or escape substitution), a quote doubled, every control character (a newline
// would end the command) made a space, and cut at `max_bytes` (cut_text).
std::string gnuplot_literal(const std::string& text, size_t max_bytes = 200);

// `name` as a file name: letters, digits, '_', '-' and '.', not starting with '.' or '-', at most
// 80 bytes; anything else becomes '_' (a comm-bench op or a group label cannot name a path).
std::string file_stem(const std::string& name);

// The full path of an executable found on PATH (or `name` itself if it holds a '/' and is
// executable); empty when there is none.
std::string find_program(const std::string& name);

// A cell a spreadsheet would run as a formula (first character =, +, -, @, tab or carriage
// return) gets a leading apostrophe, as OWASP advises; a plain number such as -1.5 stays as it is.
std::string spreadsheet_cell(const std::string& cell);
// Rows as CSV text: RFC 4180 quoting, every cell through spreadsheet_cell.
std::string csv_text(const std::vector<std::vector<std::string>>& rows);
// Writes csv_text(rows) to `path`. Throws std::runtime_error when the file cannot be written.
void write_csv(const std::string& path, const std::vector<std::vector<std::string>>& rows);

}  // namespace dlhost::report
