// plots.cpp — see plots.h. gnuplot reads its data from datablocks inside the script it is given,
// so the CSV beside each plot is for people and spreadsheets, not for gnuplot.
#include "report/plots.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>

extern char** environ;

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

void write_csv(const std::string& path, const std::vector<std::vector<std::string>>& rows) {
  std::ofstream out(path);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string& cell = row[i];
      bool quote = cell.find_first_of(",\"\n\r") != std::string::npos;
      std::string escaped;
      for (char c : cell) escaped += c == '"' ? std::string("\"\"") : std::string(1, c);
      out << (i ? "," : "") << (quote ? "\"" + escaped + "\"" : escaped);
    }
    out << "\n";
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

namespace {

std::string number(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

// A gnuplot string literal: single quotes, a quote doubled.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Runs `program script`, waits, and returns its exit status; its stderr goes to `log`.
int run_gnuplot(const std::string& program, const std::string& script, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv{const_cast<char*>(program.c_str()), const_cast<char*>(script.c_str()),
                          nullptr};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const char* kCommon =
    "set encoding utf8\nset grid lc rgb '#dddddd'\nset key outside right top noenhanced\n"
    "set title noenhanced\nset border lc rgb '#555555'\n";

}  // namespace

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

PlotFiles Plotter::run_script(const std::string& name, const std::string& title,
                              const std::string& body, int width, int height) {
  PlotFiles files{title, name + ".csv", "", ""};
  if (!available()) return files;
  std::string base = folder_ + "/" + name;
  std::ofstream gp(base + ".gp");
  std::string size = std::to_string(width) + "," + std::to_string(height);
  gp << body << "set terminal pngcairo size " << size << " font 'sans,10' noenhanced\nset output "
     << quoted(base + ".png") << "\nreplot\nset terminal svg size " << size << " font 'sans,10' "
     << "noenhanced background rgb 'white'\nset output " << quoted(base + ".svg")
     << "\nreplot\nunset output\n";
  gp.close();
  std::string log = base + ".gnuplot.log";
  int rc = run_gnuplot(program_, base + ".gp", log);
  std::ifstream err(log);
  std::string message((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  if (rc != 0) {
    failures_.push_back(name + ": gnuplot exited with " + std::to_string(rc) + ": " + message);
    return files;
  }
  std::remove(log.c_str());
  files.png = name + ".png";
  files.svg = name + ".svg";
  return files;
}

PlotFiles Plotter::render(const LinePlot& p) {
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

  std::ostringstream gp;
  gp << kCommon << "set title " << quoted(p.title) << "\nset xlabel " << quoted(p.x_label)
     << "\nset ylabel " << quoted(p.y_label) << "\n";
  // Headroom, so a reference line on the axis's end (efficiency 1) stays visible.
  if (!p.log_y) gp << "set offsets 0, 0, graph 0.05, 0\n";
  if (p.log_x) gp << "set logscale x 2\n";
  if (p.log_y) gp << "set logscale y 10\n";
  if (p.x_in_bytes) gp << "set format x '%.0b%BB'\n";
  std::ostringstream plot;
  for (size_t s = 0; s < p.series.size(); ++s) {
    gp << "$s" << s << " << EOD\n";
    for (const auto& [x, y] : p.series[s].points)
      if ((!p.log_x || x > 0) && (!p.log_y || y > 0)) gp << number(x) << " " << number(y) << "\n";
    gp << "EOD\n";
    plot << (s ? ", " : "plot ") << "$s" << s << " using 1:2 with linespoints "
         << (p.series[s].dashed ? "dt 2 lc rgb '#888888' pt -1" : "lw 2 pt 7 ps 0.8") << " title "
         << quoted(p.series[s].name);
  }
  gp << plot.str() << "\n";
  return run_script(p.name, p.title, gp.str());
}

PlotFiles Plotter::render(const StackedBars& p) {
  std::vector<std::vector<std::string>> rows{{"case"}};
  rows[0].insert(rows[0].end(), p.parts.begin(), p.parts.end());
  std::ostringstream gp;
  gp << kCommon << "set title " << quoted(p.title) << "\nset ylabel " << quoted(p.y_label)
     << "\nset style data histograms\nset style histogram rowstacked\n"
     << "set style fill solid 0.85 border -1\nset boxwidth 0.75\nset yrange [0:100]\n"
     << "set xtics rotate by -60 left noenhanced\nset bmargin 19\n$d << EOD\n";
  for (size_t c = 0; c < p.categories.size(); ++c) {
    rows.push_back({p.categories[c]});
    gp << "\"" << p.categories[c] << "\"";
    for (double v : p.values[c]) {
      rows.back().push_back(number(v));
      gp << " " << number(v);
    }
    gp << "\n";
  }
  gp << "EOD\n";
  write_csv(folder_ + "/" + p.name + ".csv", rows);
  for (size_t part = 0; part < p.parts.size(); ++part)
    gp << (part ? ", '' using " : "plot $d using ") << part + 2 << (part ? "" : ":xtic(1)")
       << " title " << quoted(p.parts[part]);
  gp << "\n";
  int width = std::max(1000, 260 + 26 * static_cast<int>(p.categories.size()));
  return run_script(p.name, p.title, gp.str(), width, 720);
}

}  // namespace dlhost::report
