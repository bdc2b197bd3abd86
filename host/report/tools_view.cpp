// tools_view.cpp — the report's "Tools side by side" section: Shi et al.'s main table and
// figures. One table per hardware (a CPU thread count, or a GPU model) with a row per network
// (and mini-batch) and a column per tool (backend), the fastest of each row marked; then, per
// network, the time per mini-batch against threads with a line per tool, as the paper's figures.
// Only single-process records count; a tool's cell that did not end OK shows its status word.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "report/views.h"

namespace dlhost::report {

namespace {

bool single_process(const Record& r) { return ranks(r) == 1 && !has(r.data, "/distributed"); }

// The thread count the case asked for (the paper's axis); what the backend used otherwise.
int threads_asked(const Record& r) {
  const long long asked = integer_at(r.data, "/params/threads", 0);
  return asked > 0 ? static_cast<int>(asked) : threads(r);
}

// "CPU, 2 threads" or "GPU NVIDIA H200": what a table of the paper is for.
std::string hardware_of(const Record& r) {
  const std::string device = text_at(r.data, "/backend/device/name");
  if (device.rfind("cuda", 0) == 0 || device.rfind("gpu", 0) == 0)
    return "GPU " + text_at(r.data, "/backend/device/model", "?");
  const int t = threads_asked(r);
  return t > 0 ? "CPU, " + std::to_string(t) + (t == 1 ? " thread" : " threads")
               : "CPU, default threads";
}

template <typename T>
void remember(std::vector<T>& order, const T& v) {
  if (std::find(order.begin(), order.end(), v) == order.end()) order.push_back(v);
}

struct Cell {
  bool ok = false;
  double ms = 0;
  std::string status;
};

using Row = std::pair<std::string, int>;  // network, batch

// The single-process records of a group, by hardware, row and tool, in the order first seen.
struct Grid {
  std::vector<std::string> tools, hardware;
  std::map<std::string, std::string> library;  // tool -> its library, as the record says
  std::map<std::string, std::vector<Row>> rows;
  std::map<std::tuple<std::string, Row, std::string>, Cell> cells;  // hardware, row, tool
};

Grid collect(const EnvironmentGroup& g) {
  Grid grid;
  for (const Record* r : g.records) {
    if (!single_process(*r)) continue;
    const std::string tool = backend(*r), hw = hardware_of(*r);
    const Row row{network(*r), batch(*r)};
    remember(grid.tools, tool);
    remember(grid.hardware, hw);
    remember(grid.rows[hw], row);
    const std::string lib = text_at(r->data, "/backend/device/library");
    if (!lib.empty()) grid.library[tool] = lib;
    grid.cells[{hw, row, tool}] =
        is_ok(*r) ? Cell{true, step_median_ms(*r), "OK"} : Cell{false, 0, status(*r)};
  }
  // CPU tables by ascending thread count, then GPUs, as the paper orders its platforms.
  std::stable_sort(grid.hardware.begin(), grid.hardware.end(),
                   [&](const std::string& a, const std::string& b) {
                     auto order = [](const std::string& h) {
                       if (h.rfind("CPU, ", 0) != 0) return 1 << 20;
                       const int t = std::atoi(h.c_str() + 5);
                       return t > 0 ? t : (1 << 19);
                     };
                     return order(a) < order(b);
                   });
  return grid;
}

// One hardware's table: a row per network and mini-batch, a column per tool, the fastest marked.
Table hardware_table(const Grid& grid, const std::string& hw) {
  Table t{{"network", "batch"}, {}, 2};
  for (const auto& tool : grid.tools) t.header.push_back(tool);
  t.header.push_back("fastest");
  t.header.push_back("x fastest");
  for (const auto& row : grid.rows.at(hw)) {
    std::vector<std::string> line{row.first, std::to_string(row.second)};
    const Cell* best = nullptr;
    const Cell* worst = nullptr;
    std::string best_tool;
    for (const auto& tool : grid.tools) {
      auto it = grid.cells.find({hw, row, tool});
      if (it == grid.cells.end() || !it->second.ok) continue;
      if (best == nullptr || it->second.ms < best->ms) best = &it->second, best_tool = tool;
      if (worst == nullptr || it->second.ms > worst->ms) worst = &it->second;
    }
    for (const auto& tool : grid.tools) {
      auto it = grid.cells.find({hw, row, tool});
      if (it == grid.cells.end())
        line.push_back("");
      else if (!it->second.ok)
        line.push_back(it->second.status);
      else
        line.push_back(format_ms(it->second.ms) + (&it->second == best ? " *" : ""));
    }
    line.push_back(best ? best_tool : "-");
    line.push_back(best && best->ms > 0 ? format_number(worst->ms / best->ms, 2) : "-");
    t.rows.push_back(line);
  }
  return t;
}

// The paper's figures: per network and mini-batch, time against threads, a line per tool.
void add_thread_figures(Section& s, const EnvironmentGroup& g,
                        const std::vector<std::string>& tools, Plotter& plotter) {
  std::vector<Row> networks;
  std::map<Row, std::map<std::string, std::map<double, double>>> lines;
  for (const Record* r : g.records) {
    if (!single_process(*r) || !is_ok(*r) || hardware_of(*r).rfind("CPU, ", 0) != 0) continue;
    const int t = threads_asked(*r);
    if (t <= 0) continue;
    const Row row{network(*r), batch(*r)};
    remember(networks, row);
    lines[row][backend(*r)][double(t)] = step_median_ms(*r);
  }
  int plotted = 0;
  for (const auto& row : networks) {
    LinePlot p{
        "tools_" + g.label + "_" + std::to_string(++plotted),
        row.first + " b" + std::to_string(row.second) + ": time per mini-batch (" + g.label + ")",
        "threads",
        "ms per mini-batch",
        true,
        true,
        false,
        {}};
    for (const auto& tool : tools) {
      auto it = lines[row].find(tool);
      if (it == lines[row].end() || it->second.size() < 2) continue;
      p.series.push_back(Series{tool, {it->second.begin(), it->second.end()}, false});
    }
    if (!p.series.empty()) s.add(plotter.render(p));
  }
}

}  // namespace

Section tools_view(const EnvironmentGroup& g, Plotter& plotter) {
  Section s{"Tools side by side (" + g.label + ")", {}};
  const Grid grid = collect(g);
  const std::vector<std::string>& tools = grid.tools;
  if (tools.size() < 2) {
    s.paragraph(tools.empty() ? "No single-process records."
                              : "Only one tool (" + tools[0] +
                                    ") ran here: nothing to set side by "
                                    "side.");
    return s;
  }
  s.paragraph(
      "The paper's question: for this network on this hardware, which tool trains fastest? "
      "Median milliseconds per training mini-batch (forward + backward + update), every tool "
      "given the same graph, initial weights, synthetic data, SGD settings and timer. `*` marks "
      "the fastest tool of a row; `x fastest` is the slowest OK tool's time over the fastest's. "
      "A case that did not end OK shows its status (reasons under \"Cases that did not end "
      "OK\").");
  Table libs{{"tool", "library (as the backend reports it)"}, {}, 99};
  for (const auto& tool : tools) {
    auto it = grid.library.find(tool);
    libs.rows.push_back({tool, it != grid.library.end() ? it->second : "-"});
  }
  s.add(libs);
  for (const auto& hw : grid.hardware) {
    s.paragraph(hw + ":");
    s.add(hardware_table(grid, hw));
  }
  add_thread_figures(s, g, tools, plotter);
  return s;
}

}  // namespace dlhost::report
