// plots.cpp — see plots.h. gnuplot reads its data from datablocks inside the script it is given,
// so the CSV beside each plot is for people and spreadsheets, not for gnuplot.
#include "report/plots.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>

#include "output/output_file.h"
#include "report/gnuplot_process.h"

namespace dlhost::report {

std::string find_program(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::istringstream folders(path ? path : "");
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    std::string candidate = (folder.empty() ? "." : folder) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

namespace {

// [+-]digits[.digits][(e|E)[+-]digits], or [+-].digits[...]: a plain decimal number.
bool plain_number(const std::string& s) {
  size_t i = 0, digits = 0;
  auto run = [&] {
    size_t from = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i - from;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  digits += run();
  if (i < s.size() && s[i] == '.') {
    ++i;
    digits += run();
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (run() == 0) return false;
  }
  return i == s.size();
}

}  // namespace

std::string spreadsheet_cell(const std::string& cell) {
  if (cell.empty() || std::string("=+-@\t\r").find(cell[0]) == std::string::npos) return cell;
  return plain_number(cell) ? cell : "'" + cell;
}

std::string csv_text(const std::vector<std::vector<std::string>>& rows) {
  std::string out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string cell = spreadsheet_cell(row[i]);
      bool quote = cell.find_first_of(",\"\n\r") != std::string::npos;
      if (i) out += ',';
      if (quote) out += '"';
      for (char c : cell) out += c == '"' ? std::string("\"\"") : std::string(1, c);
      if (quote) out += '"';
    }
    out += '\n';
  }
  return out;
}

void write_csv(const std::string& path, const std::vector<std::vector<std::string>>& rows) {
  output::write_whole_file(path, csv_text(rows));
}

std::string gnuplot_literal(const std::string& text, size_t max_bytes) {
  std::string out = "'";
  for (char c : cut_text(text, max_bytes)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\'')
      out += "''";
    else if (u < 0x20 || u == 0x7F)
      out += ' ';
    else
      out += c;
  }
  return out + "'";
}

std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 80))
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '_';
  if (out.empty() || out[0] == '.' || out[0] == '-') out.insert(out.begin(), '_');
  return out;
}

namespace {

// A finite number as gnuplot reads it; nothing else is ever written into a data block.
std::string number(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

const char* kCommon =
    "set encoding utf8\nset grid lc rgb '#dddddd'\nset key outside right top noenhanced\n"
    "set title noenhanced\nset border lc rgb '#555555'\n";

// The two outputs of every plot, in the folder gnuplot runs in.
std::string outputs(const std::string& stem, int width, int height) {
  std::string size = std::to_string(width) + "," + std::to_string(height);
  return "set terminal pngcairo size " + size + " font 'sans,10' noenhanced\nset output " +
         gnuplot_literal(stem + ".png") + "\nreplot\nset terminal svg size " + size +
         " font 'sans,10' noenhanced background rgb 'white'\nset output " +
         gnuplot_literal(stem + ".svg") + "\nreplot\nunset output\n";
}

}  // namespace

std::string gnuplot_script(const LinePlot& p) {
  std::ostringstream gp;
  gp << kCommon << "set title " << gnuplot_literal(p.title) << "\nset xlabel "
     << gnuplot_literal(p.x_label) << "\nset ylabel " << gnuplot_literal(p.y_label) << "\n";
  // Headroom, so a reference line on the axis's end (efficiency 1) stays visible.
  if (!p.log_y) gp << "set offsets 0, 0, graph 0.05, 0\n";
  if (p.log_x) gp << "set logscale x 2\n";
  if (p.log_y) gp << "set logscale y 10\n";
  if (p.x_in_bytes) gp << "set format x '%.0b%BB'\n";
  std::ostringstream plot;
  for (size_t s = 0; s < p.series.size(); ++s) {
    // The block holds numbers only, so no line of it can be the EOD that ends it.
    gp << "$s" << s << " << EOD\n";
    for (const auto& [x, y] : p.series[s].points)
      if (std::isfinite(x) && std::isfinite(y) && (!p.log_x || x > 0) && (!p.log_y || y > 0))
        gp << number(x) << " " << number(y) << "\n";
    gp << "EOD\n";
    plot << (s ? ", " : "plot ") << "$s" << s << " using 1:2 with linespoints "
         << (p.series[s].dashed ? "dt 2 lc rgb '#888888' pt -1" : "lw 2 pt 7 ps 0.8") << " title "
         << gnuplot_literal(p.series[s].name);
  }
  gp << plot.str() << "\n" << outputs(file_stem(p.name), 1000, 560);
  return gp.str();
}

namespace {

// What bar charts share after their settings: the category labels as literals on the x tics
// (category i stands at x = i), a data block of numbers only (a row per category, a column per
// bar title; a missing value, or one that `keep` refuses, is 0), and the plot of its columns.
void bars_body(std::ostringstream& gp, int rotation, const std::vector<std::string>& labels,
               const std::vector<std::vector<double>>& values,
               const std::vector<std::string>& titles, bool (*keep)(double)) {
  gp << "set xtics rotate by " << rotation << " left noenhanced (";
  for (size_t c = 0; c < labels.size(); ++c)
    gp << (c ? ", " : "") << gnuplot_literal(labels[c], 80) << " " << c;
  gp << ")\n$d << EOD\n";
  for (size_t c = 0; c < labels.size(); ++c) {
    for (size_t t = 0; t < titles.size(); ++t) {
      const double v = c < values.size() && t < values[c].size() ? values[c][t] : 0.0;
      gp << (t ? " " : "") << number(keep(v) ? v : 0.0);
    }
    gp << "\n";
  }
  gp << "EOD\n";
  for (size_t t = 0; t < titles.size(); ++t)
    gp << (t ? ", '' using " : "plot $d using ") << t + 1 << " title "
       << gnuplot_literal(titles[t]);
  gp << "\n";
}

bool finite(double v) { return std::isfinite(v); }
bool positive(double v) { return std::isfinite(v) && v > 0; }

}  // namespace

std::string gnuplot_script(const StackedBars& p) {
  std::ostringstream gp;
  gp << kCommon << "set title " << gnuplot_literal(p.title) << "\nset ylabel "
     << gnuplot_literal(p.y_label)
     << "\nset style data histograms\nset style histogram rowstacked\n"
     << "set style fill solid 0.85 border -1\nset boxwidth 0.75\nset yrange [0:100]\n"
     << "set bmargin 19\n";
  std::vector<std::string> labels;
  for (size_t c = 0; c < p.categories.size(); ++c)
    labels.push_back(c < p.labels.size() ? p.labels[c] : p.categories[c]);
  bars_body(gp, -60, labels, p.values, p.parts, finite);
  // Wider for many bars, so their labels stay apart.
  int width = std::max(1000, 260 + 26 * static_cast<int>(p.categories.size()));
  gp << outputs(file_stem(p.name), width, 720);
  return gp.str();
}

std::string gnuplot_script(const GroupedBars& p) {
  std::ostringstream gp;
  // The log axis spans the bars with room below the shortest, which would otherwise sit on it.
  double low = 0, high = 0;
  for (const auto& row : p.values)
    for (double v : row)
      if (positive(v)) {
        low = low > 0 ? std::min(low, v) : v;
        high = std::max(high, v);
      }
  gp << kCommon << "set title " << gnuplot_literal(p.title) << "\nset ylabel "
     << gnuplot_literal(p.y_label)
     << "\nset style data histograms\nset style histogram clustered gap 1\n"
     << "set style fill solid 0.85 border -1\nset logscale y 10\nset bmargin 12\n";
  if (low > 0 && std::isfinite(high * 2)) gp << "set yrange [" << number(low / 2) << ":" << number(high * 2) << "]\n";
  // A missing bar (a tool that did not run) is 0, which the log axis leaves out.
  bars_body(gp, -30, p.categories, p.values, p.groups, positive);
  const int bars = static_cast<int>(p.categories.size() * (p.groups.size() + 1));
  gp << outputs(file_stem(p.name), std::max(1000, 300 + 14 * bars), 600);
  return gp.str();
}

Plotter::Plotter(std::string folder, const std::string& gnuplot) : folder_(std::move(folder)) {
  if (gnuplot.empty()) {
    unavailable_reason_ = "plots were turned off (--no-plots)";
    return;
  }
  program_ = find_program(gnuplot);
  if (program_.empty())
    unavailable_reason_ = "gnuplot was not found (`" + gnuplot +
                          "` is not on PATH); install Debian's gnuplot-nox to get the plots";
}

std::string Plotter::unique_stem(const std::string& name) {
  const std::string stem = file_stem(name);
  std::string candidate = stem;
  for (int n = 2; std::find(stems_.begin(), stems_.end(), candidate) != stems_.end(); ++n)
    candidate = stem + "_" + std::to_string(n);
  stems_.push_back(candidate);
  return candidate;
}

PlotFiles Plotter::run_script(const std::string& stem, const std::string& title,
                              const std::string& script) {
  PlotFiles files{title, stem + ".csv", "", ""};
  if (!available()) return files;
  output::write_whole_file(folder_ + "/" + stem + ".gp", script);
  const std::string log = folder_ + "/" + stem + ".gnuplot.log";
  GnuplotRun run = run_gnuplot_fenced(program_, folder_, stem + ".gp", log);
  if (run.exit_code != 0) {
    failures_.push_back(stem + ": gnuplot " +
                        (run.exit_code > 0 ? "exited with " + std::to_string(run.exit_code) + ": "
                                           : std::string("failed: ")) +
                        run.message);
    return files;
  }
  std::remove(log.c_str());
  files.png = stem + ".png";
  files.svg = stem + ".svg";
  return files;
}

PlotFiles Plotter::render(LinePlot p) {
  p.name = unique_stem(p.name);
  // CSV: one row per x, one column per series (empty where a series has no point).
  std::map<double, std::vector<std::string>> by_x;
  for (size_t s = 0; s < p.series.size(); ++s)
    for (const auto& [x, y] : p.series[s].points) {
      auto& row = by_x[x];
      row.resize(p.series.size());
      row[s] = number(y);
    }
  std::vector<std::vector<std::string>> rows{{p.x_label}};
  for (const auto& s : p.series) rows[0].push_back(s.name);
  for (auto& [x, ys] : by_x) {
    ys.resize(p.series.size());
    rows.push_back({number(x)});
    rows.back().insert(rows.back().end(), ys.begin(), ys.end());
  }
  write_csv(folder_ + "/" + p.name + ".csv", rows);
  return run_script(p.name, p.title, gnuplot_script(p));
}

PlotFiles Plotter::render(StackedBars p) {
  p.name = unique_stem(p.name);
  std::vector<std::vector<std::string>> rows{{"case"}};
  rows[0].insert(rows[0].end(), p.parts.begin(), p.parts.end());
  for (size_t c = 0; c < p.categories.size(); ++c) {
    rows.push_back({p.categories[c]});
    for (double v : p.values[c]) rows.back().push_back(number(v));
  }
  write_csv(folder_ + "/" + p.name + ".csv", rows);
  return run_script(p.name, p.title, gnuplot_script(p));
}

PlotFiles Plotter::render(GroupedBars p) {
  p.name = unique_stem(p.name);
  // CSV: a row per category, a column per group member; empty where a bar is missing.
  std::vector<std::vector<std::string>> rows{{"network"}};
  rows[0].insert(rows[0].end(), p.groups.begin(), p.groups.end());
  for (size_t c = 0; c < p.categories.size(); ++c) {
    rows.push_back({p.categories[c]});
    for (size_t g = 0; g < p.groups.size(); ++g) {
      const double v = g < p.values[c].size() ? p.values[c][g] : NAN;
      rows.back().push_back(std::isfinite(v) && v > 0 ? number(v) : "");
    }
  }
  write_csv(folder_ + "/" + p.name + ".csv", rows);
  return run_script(p.name, p.title, gnuplot_script(p));
}

}  // namespace dlhost::report
