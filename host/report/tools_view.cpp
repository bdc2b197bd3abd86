// tools_view.cpp — the report's "Tools side by side" section: Shi et al.'s main table and
// figures. One table per hardware (a CPU thread count, or a GPU model) with a row per network,
// mini-batch and setting and a column per tool (backend, with its own options), the fastest of
// each row marked; the paper's figure, a grouped bar chart per hardware (network x tool, time per
// mini-batch, log scale); then, per network, the time per mini-batch against threads with a line
// per tool, as the paper's figures. Only single-process records count.
//
// A cell is keyed on everything that differs between records, so no figure stands for another:
//  - rows: network, mini-batch, and the case keys that differ between that network's records on
//    that hardware (precision, data, fused_step, iterations, a network plugin's options...), so
//    bf16 is never set against fp32 and a real-data case never shares a cell with a synthetic one;
//  - columns: the tool and its own options (`cpu_tensorflow (mode=xla)`);
//  - within a cell, how the step was timed (timing.timer, timing.fused_step): records that differ
//    there are shown apart, labelled, where the table mixes them.
// Records of one cell and one way of timing are the same case repeated (rounds, --resume, several
// files): their figure is the median of their medians, with the count. A record that did not end
// OK never hides an OK one of its cell: the OK figure shows, the other outcome beside it. A figure
// whose record carries a disturbance warning (other_load, spread, warmup_short) is marked, with a
// note. A figure whose backend says it is knowingly faster there than its framework's own users
// get it (the record's resolved.departures, ABI 1.5 model_info) is marked with a numbered dagger,
// and the note under the table gives the backend's words: the cause and its measured size (issue
// 40, rule 2).
// A figure whose steps the tool's own clock timed (timing.timer backend_clock: a tool that owns
// its loop, BigDL's optimize(); issue 42) is marked with a section sign and a note.
#include <algorithm>
#include <cmath>
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
  const record::Device device = record::read_backend(r.data).value_or(record::Backend{}).device;
  if (device.name.rfind("cuda", 0) == 0 || device.name.rfind("gpu", 0) == 0)
    return "GPU " + (device.model.empty() ? std::string("?") : device.model);
  const int t = threads_asked(r);
  return t > 0 ? "CPU, " + std::to_string(t) + (t == 1 ? " thread" : " threads")
               : "CPU, default threads";
}

template <typename T>
void remember(std::vector<T>& order, const T& v) {
  if (std::find(order.begin(), order.end(), v) == order.end()) order.push_back(v);
}

std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Case keys that place a record in the table (its axes: network, tool, batch, threads) or that a
// single process's figure does not depend on (bookkeeping, and how ranks would be launched and
// talk); `options` is split by plugin below. Every other key is a setting of the case.
const std::set<std::string> kNotSettings = {
    "network",       "backend",   "batch",           "threads",      "timeout",
    "tags",          "options",   "ranks",           "comm",         "launcher",
    "launcher_args", "scaling",   "overlap",         "bucket_mb",    "comm_memory",
    "interconnect",  "link_gbit", "link_latency_us", "oversubscribe"};

// "mode=xla, jit=1": a plugin's options as the table labels them.
std::string options_text(const json& options) {
  std::string out;
  if (options.is_object())
    for (const auto& [key, v] : options.items())
      out += (out.empty() ? "" : ", ") + key + "=" + value_text(v);
  return out;
}

// The member `key` of `j` when `j` is an object that has it; else null. Records come from
// anyone: `params` or `options` may be any JSON value.
const json& member(const json& j, const std::string& key) {
  static const json none;
  if (!j.is_object()) return none;
  auto it = j.find(key);
  return it == j.end() ? none : *it;
}

// The tool's column: the backend and the options the case gave that backend's plugin. Options of
// other plugins (a suite's options map reaches every case of its entry) are not the tool's.
std::string column_of(const Record& r) {
  const std::string tool = backend(r);
  const std::string own = options_text(member(member(member(r.data, "params"), "options"), tool));
  return own.empty() ? tool : tool + " (" + own + ")";
}

// The case's settings: every case key but the table's axes and the bookkeeping, and the options
// of the network's plugin (`network_plugin`: known from any OK record of the network).
std::map<std::string, std::string> settings_of(const Record& r, const std::string& network_plugin) {
  std::map<std::string, std::string> out;
  const json& params = member(r.data, "params");
  if (!params.is_object()) return out;
  for (const auto& [key, v] : params.items())
    if (!kNotSettings.count(key)) out[key] = value_text(v);
  const json& own = member(member(params, "options"), network_plugin);
  if (!network_plugin.empty() && own.is_object())
    for (const auto& [key, v] : own.items()) out[network_plugin + "." + key] = value_text(v);
  return out;
}

// How the step was timed: the timer and whether the backend fused the step into one call. Only
// an OK record says; records that differ here are never aggregated.
struct Timing {
  std::string timer;
  bool fused = false;
  bool operator<(const Timing& o) const {
    return std::tie(timer, fused) < std::tie(o.timer, o.fused);
  }
  bool operator==(const Timing& o) const { return timer == o.timer && fused == o.fused; }
};

Timing timing_of(const Record& r) { return Timing{record::timer(r), record::fused_step(r)}; }

// The timer of a tool that owns its loop (run/owned_loop.h): its own clock, not the host's.
constexpr const char* kOwnClock = "backend_clock";

// The warnings that say the figure may not be the tool's own steady step: the machine disturbed
// it, or timing began before the step settled (docs/report.md, Warnings).
std::vector<std::string> disturbances_of(const Record& r) {
  std::vector<std::string> out;
  for (const record::Warning& w : record::read_warnings(r.data).value_or(record::Warnings{}))
    if (w.code == "other_load" || w.code == "spread" || w.code == "warmup_short")
      remember(out, w.code);
  return out;
}

// What the backend declared its model does faster than its framework's users get it (ABI 1.5).
std::vector<std::string> departures_in(const Record& r) {
  std::vector<std::string> out;
  if (const std::optional<record::Resolved> resolved = record::read_resolved(r.data))
    for (const std::string& d : resolved->departures)
      if (!d.empty()) remember(out, d);
  return out;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One figure of a cell: the OK records of one way of timing, aggregated.
struct Figure {
  Timing timing;
  std::vector<double> medians;
  std::vector<std::string> disturbances;  // codes, over the records
  std::vector<std::string> disturbed_at;  // file name:LINE of each disturbed record
  std::vector<std::string> departures;    // declared by the backend, over the records
  double ms() const { return median_of(medians); }
};

struct Cell {
  std::vector<Figure> figures;        // OK records, by way of timing, first seen first
  std::map<std::string, int> not_ok;  // status -> records
};

struct Row {
  std::string network;
  int batch = 0;
  std::string setting;  // the settings that set it apart from the network's other rows
  bool operator<(const Row& o) const {
    return std::tie(network, batch, setting) < std::tie(o.network, o.batch, o.setting);
  }
  bool operator==(const Row& o) const {
    return network == o.network && batch == o.batch && setting == o.setting;
  }
};

// The single-process records of a group, by hardware, row and column, in the order first seen.
struct Grid {
  std::vector<std::string> tools, columns, hardware;
  std::map<std::string, std::string> library;  // tool -> its library, as the record says
  std::map<std::string, std::string> tool_of;  // column -> its tool
  std::map<std::string, std::vector<Row>> rows;
  std::map<std::tuple<std::string, Row, std::string>, Cell> cells;  // hardware, row, column
  std::map<std::string, std::set<Timing>> timings;                  // hardware -> ways seen
};

// "precision=bf16, data=real": the settings of `mine` whose values differ among `all` (a key
// one record lacks differs too), in key order; empty when nothing differs.
std::string differing(const std::map<std::string, std::string>& mine,
                      const std::vector<std::map<std::string, std::string>>& all) {
  std::set<std::string> keys;
  for (const auto& s : all)
    for (const auto& kv : s) keys.insert(kv.first);
  std::string out;
  for (const auto& key : keys) {
    std::set<std::string> values;
    for (const auto& s : all) {
      auto it = s.find(key);
      values.insert(it == s.end() ? "(unset)" : it->second);
    }
    if (values.size() < 2) continue;
    auto it = mine.find(key);
    out += (out.empty() ? "" : ", ") + key + "=" + (it == mine.end() ? "(unset)" : it->second);
  }
  return out;
}

// Each record's row setting: what differs between the records of its network and mini-batch
// under `scope` (a hardware, or "CPU" for the figures across thread counts).
template <typename Scope>
std::vector<std::string> row_settings(const std::vector<const Record*>& records, Scope scope) {
  std::map<std::string, std::string> plugin;  // network -> its plugin
  for (const Record* r : records) {
    const std::string p = record::read_network(r->data).value_or(record::Network{}).plugin;
    if (!p.empty()) plugin[network(*r)] = p;
  }
  std::vector<std::map<std::string, std::string>> settings;
  std::map<std::tuple<std::string, std::string, int>,
           std::vector<std::map<std::string, std::string>>>
      peers;
  for (const Record* r : records) {
    settings.push_back(settings_of(*r, plugin[network(*r)]));
    peers[{scope(*r), network(*r), batch(*r)}].push_back(settings.back());
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < records.size(); ++i)
    out.push_back(differing(settings[i],
                            peers[{scope(*records[i]), network(*records[i]), batch(*records[i])}]));
  return out;
}

std::vector<const Record*> single_process_records(const EnvironmentGroup& g) {
  std::vector<const Record*> out;
  for (const Record* r : g.all)
    if (single_process(*r)) out.push_back(r);
  return out;
}

Grid collect(const EnvironmentGroup& g) {
  Grid grid;
  const std::vector<const Record*> records = single_process_records(g);
  const std::vector<std::string> setting = row_settings(records, hardware_of);
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = *records[i];
    const std::string tool = backend(r), column = column_of(r), hw = hardware_of(r);
    const Row row{network(r), batch(r), setting[i]};
    remember(grid.tools, tool);
    remember(grid.columns, column);
    grid.tool_of[column] = tool;
    remember(grid.hardware, hw);
    remember(grid.rows[hw], row);
    const std::string lib = record::read_backend(r.data).value_or(record::Backend{}).device.library;
    if (!lib.empty()) grid.library[tool] = lib;
    Cell& cell = grid.cells[{hw, row, column}];
    if (!is_ok(r)) {
      ++cell.not_ok[status(r)];
      continue;
    }
    const Timing timing = timing_of(r);
    grid.timings[hw].insert(timing);
    auto f = std::find_if(cell.figures.begin(), cell.figures.end(),
                          [&](const Figure& x) { return x.timing == timing; });
    if (f == cell.figures.end())
      f = cell.figures.insert(cell.figures.end(), Figure{timing, {}, {}, {}, {}});
    f->medians.push_back(step_median_ms(r));
    const std::vector<std::string> codes = disturbances_of(r);
    for (const auto& c : codes) remember(f->disturbances, c);
    for (const auto& d : departures_in(r)) remember(f->departures, d);
    // The file's name and line: the Warnings section gives the whole path.
    if (!codes.empty())
      f->disturbed_at.push_back(r.file.substr(r.file.find_last_of('/') + 1) + ":" +
                                std::to_string(r.line));
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
  // A network's rows together, in first-seen order; its settings in first-seen order too.
  for (auto& [hw, rows] : grid.rows) {
    std::vector<std::string> networks;
    for (const auto& row : rows) remember(networks, row.network);
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
      return std::find(networks.begin(), networks.end(), a.network) <
             std::find(networks.begin(), networks.end(), b.network);
    });
  }
  return grid;
}

// "[fused, host_clock]": how a figure was timed, where the table mixes ways of timing.
// A tool's own clock is not a label: its mark says it (hardware_table), so the host-timed
// figures beside it stay unlabelled.
std::string timing_label(const Timing& t, const std::set<Timing>& seen) {
  std::set<std::string> timers;
  std::set<bool> fused;
  for (const auto& s : seen) {
    if (s.timer != kOwnClock) timers.insert(s.timer);
    fused.insert(s.fused);
  }
  std::string label;
  if (fused.size() > 1 && t.fused) label = "fused";
  if (timers.size() > 1 && t.timer != kOwnClock)
    label += (label.empty() ? "" : ", ") + (t.timer.empty() ? "timer not recorded" : t.timer);
  return label.empty() ? "" : " [" + label + "]";
}

std::string outcomes_text(const std::map<std::string, int>& not_ok) {
  std::string out;
  for (const auto& [st, n] : not_ok)
    out += (out.empty() ? "" : ", ") + st + (n > 1 ? " (x" + std::to_string(n) + ")" : "");
  return out;
}

// One hardware's table: a row per network, mini-batch and setting, a column per tool, the
// fastest marked; the notes the table needs under it.
struct HardwareTable {
  Table table;
  bool repeats = false, setting = false, own_clock = false;
  std::vector<std::string> disturbed, hidden_outcomes;
  // Departures by their mark's number (1 first): the tool, what it declared, the cells marked.
  struct Departure {
    std::string tool, text;
    std::vector<std::string> cells;
  };
  std::vector<Departure> departures;
  // The mark of `text` declared by `tool` at `cell`: a dagger and its number.
  std::string departure_mark(const std::string& tool, const std::string& text,
                             const std::string& cell) {
    auto it = std::find_if(departures.begin(), departures.end(),
                           [&](const Departure& d) { return d.tool == tool && d.text == text; });
    if (it == departures.end()) it = departures.insert(departures.end(), Departure{tool, text, {}});
    remember(it->cells, cell);
    return " \u2020" + std::to_string(it - departures.begin() + 1);
  }
};

HardwareTable hardware_table(const Grid& grid, const std::string& hw) {
  HardwareTable out;
  const std::vector<Row>& rows = grid.rows.at(hw);
  out.setting =
      std::any_of(rows.begin(), rows.end(), [](const Row& r) { return !r.setting.empty(); });
  Table& t = out.table;
  t = Table{{"network", "batch"}, {}, 2};
  if (out.setting) t.header.push_back("setting"), t.first_numeric_column = 3;
  for (const auto& column : grid.columns) t.header.push_back(column);
  t.header.push_back("fastest");
  t.header.push_back("x fastest");
  const std::set<Timing> no_timings;
  auto seen_it = grid.timings.find(hw);
  const std::set<Timing>& seen = seen_it == grid.timings.end() ? no_timings : seen_it->second;
  for (const auto& row : rows) {
    std::vector<std::string> line{row.network, std::to_string(row.batch)};
    if (out.setting) line.push_back(row.setting);
    // The fastest and slowest OK figures of the row: one setting, so like with like.
    const Figure* best = nullptr;
    const Figure* worst = nullptr;
    std::string best_name;
    for (const auto& column : grid.columns) {
      auto it = grid.cells.find({hw, row, column});
      if (it == grid.cells.end()) continue;
      for (const Figure& f : it->second.figures) {
        if (best == nullptr || f.ms() < best->ms())
          best = &f, best_name = column + timing_label(f.timing, seen);
        if (worst == nullptr || f.ms() > worst->ms()) worst = &f;
      }
    }
    for (const auto& column : grid.columns) {
      auto it = grid.cells.find({hw, row, column});
      if (it == grid.cells.end()) {
        line.push_back("");
        continue;
      }
      const Cell& cell = it->second;
      if (cell.figures.empty()) {
        line.push_back(outcomes_text(cell.not_ok));
        continue;
      }
      std::string text;
      for (const Figure& f : cell.figures) {
        const size_t n = f.medians.size();
        text += (text.empty() ? "" : " / ") + format_ms(f.ms()) + (&f == best ? " *" : "") +
                (n > 1 ? " (x" + std::to_string(n) + ")" : "") + timing_label(f.timing, seen) +
                (f.timing.timer == kOwnClock ? " \u00a7" : "") +
                (f.disturbances.empty() ? "" : " !");
        out.own_clock = out.own_clock || f.timing.timer == kOwnClock;
        for (const auto& d : f.departures)
          text += out.departure_mark(grid.tool_of.at(column), d,
                                     row.network + " b" + std::to_string(row.batch));
        out.repeats = out.repeats || n > 1;
        if (!f.disturbances.empty()) {
          std::string codes, at;
          for (const auto& c : f.disturbances) codes += (codes.empty() ? "" : ", ") + c;
          for (const auto& w : f.disturbed_at) at += (at.empty() ? "" : ", ") + w;
          out.disturbed.push_back(row.network + " b" + std::to_string(row.batch) +
                                  (row.setting.empty() ? "" : " (" + row.setting + ")") + ", " +
                                  column + ": " + codes + " (" + at + ")");
        }
      }
      if (!cell.not_ok.empty()) {
        text += " (+ " + outcomes_text(cell.not_ok) + ")";
        out.hidden_outcomes.push_back(row.network + " b" + std::to_string(row.batch) + ", " +
                                      column);
      }
      line.push_back(text);
    }
    line.push_back(best ? best_name : "-");
    line.push_back(best && best->ms() > 0 ? format_number(worst->ms() / best->ms(), 2) : "-");
    t.rows.push_back(line);
  }
  return out;
}

// The notes under one hardware's table: what its marks mean, where it has them.
void add_notes(Section& s, const HardwareTable& h) {
  if (h.setting)
    s.paragraph(
        "Rows of one network differ in the case keys under `setting` (precision, data, tool "
        "settings, iterations...): figures are compared, and the fastest named, only within a "
        "row.");
  if (h.repeats)
    s.paragraph(
        "(xN): the same case ran N times (rounds, --resume, several files): the figure is the "
        "median of the N records' medians.");
  if (!h.hidden_outcomes.empty())
    s.paragraph(
        "(+ STATUS): the case also has records that did not end OK (reasons under \"Cases that "
        "did not end OK\"); the figure is from its OK records.");
  if (h.own_clock)
    s.paragraph(
        "\u00a7 marks a figure timed by the tool's own clock (the record's timing.timer is "
        "backend_clock): the tool owns its training loop (BigDL's optimize() runs every step), so "
        "the step is its per-iteration time as it reports it (timing.clock says what that "
        "covers), not the host's timer around each step's calls.");
  if (!h.disturbed.empty()) {
    std::string list;
    for (const auto& d : h.disturbed) list += (list.empty() ? "" : "; ") + d;
    s.paragraph(
        "! marks a figure that may not be the tool's own steady step: its record warns "
        "other_load (other processes used the cores), spread (its step times spread widely) or "
        "warmup_short (its first timed steps were still settling); see Warnings. " +
        list + ".");
  }
  if (!h.departures.empty()) {
    std::string list;
    for (size_t k = 0; k < h.departures.size(); ++k) {
      const auto& d = h.departures[k];
      std::string cells;
      for (const auto& c : d.cells) cells += (cells.empty() ? "" : ", ") + c;
      list += (list.empty() ? "" : " ") + std::string("\u2020") + std::to_string(k + 1) + " " +
              d.tool + " (" + cells + "): " + d.text + (d.text.back() == '.' ? "" : ".");
    }
    s.paragraph(
        "\u2020 marks a figure whose backend says it is knowingly faster there than the "
        "framework's own users get it (it takes another path than the framework's layers; the "
        "record's "
        "resolved.departures): that gap is the backend's, not the framework's. In the backend's "
        "words, with the size measured and where: " +
        list);
  }
}

// The paper's figure for one hardware: a group of bars per network (and mini-batch, and
// setting), a bar per tool, time per mini-batch on a log axis. Cells with several figures (ways
// of timing) give their first; a cell without an OK figure gives no bar.
GroupedBars hardware_bars(const Grid& grid, const std::string& hw, const std::string& label) {
  GroupedBars bars{"tools_bars_" + label + "_" + hw,
                   "Time per mini-batch, " + hw + " (" + label + ")",
                   "ms per mini-batch (log scale)",
                   {},
                   {},
                   {}};
  bars.groups = grid.columns;
  for (const auto& row : grid.rows.at(hw)) {
    std::vector<double> values;
    bool any = false;
    for (const auto& column : grid.columns) {
      auto it = grid.cells.find({hw, row, column});
      const bool ok = it != grid.cells.end() && !it->second.figures.empty();
      values.push_back(ok ? it->second.figures.front().ms() : NAN);
      any = any || ok;
    }
    if (!any) continue;
    bars.categories.push_back(row.network + " b" + std::to_string(row.batch) +
                              (row.setting.empty() ? "" : " " + row.setting));
    bars.values.push_back(values);
  }
  return bars;
}

// The paper's figures: per network, mini-batch and setting, time against threads, a line per
// tool (and its options).
void add_thread_figures(Section& s, const EnvironmentGroup& g,
                        const std::vector<std::string>& columns, Plotter& plotter) {
  std::vector<const Record*> cpu;
  for (const Record* r : single_process_records(g))
    if (is_ok(*r) && hardware_of(*r).rfind("CPU, ", 0) == 0 && threads_asked(*r) > 0)
      cpu.push_back(r);
  const std::vector<std::string> setting =
      row_settings(cpu, [](const Record&) { return std::string("CPU"); });
  std::vector<Row> networks;
  std::map<Row, std::map<std::string, std::map<double, std::vector<double>>>> lines;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const Record& r = *cpu[i];
    const Row row{network(r), batch(r), setting[i]};
    remember(networks, row);
    lines[row][column_of(r)][double(threads_asked(r))].push_back(step_median_ms(r));
  }
  int plotted = 0;
  for (const auto& row : networks) {
    LinePlot p{"tools_" + g.label + "_" + std::to_string(++plotted),
               row.network + " b" + std::to_string(row.batch) +
                   (row.setting.empty() ? "" : " " + row.setting) + ": time per mini-batch (" +
                   g.label + ")",
               "threads",
               "ms per mini-batch",
               true,
               true,
               false,
               {}};
    for (const auto& column : columns) {
      auto it = lines[row].find(column);
      if (it == lines[row].end() || it->second.size() < 2) continue;
      Series line{column, {}, false};
      for (const auto& [t, ms] : it->second) line.points.push_back({t, median_of(ms)});
      p.series.push_back(line);
    }
    if (!p.series.empty()) s.add(plotter.render(p));
  }
}

}  // namespace

Section tools_view(const EnvironmentGroup& g, Plotter& plotter) {
  Section s{"Tools side by side (" + g.label + ")", {}};
  const Grid grid = collect(g);
  const std::vector<std::string>& tools = grid.tools;
  if (grid.columns.size() < 2) {
    s.paragraph(tools.empty() ? "No single-process records."
                              : "Only one tool (" + grid.columns[0] +
                                    ") ran here: nothing to set side by side.");
    if (!tools.empty())
      for (const auto& hw : grid.hardware) {
        GroupedBars bars = hardware_bars(grid, hw, g.label);
        if (!bars.categories.empty()) s.add(plotter.render(bars));
      }
    return s;
  }
  s.paragraph(
      "The paper's question: for this network on this hardware, which tool trains fastest? "
      "Median milliseconds per training mini-batch (forward + backward + update), every tool "
      "given the same graph, initial weights, data, SGD settings and timer. A row is one network, "
      "mini-batch and setting; a column one tool with the options the case gave it. `*` marks "
      "the fastest figure of a row; `x fastest` is the slowest OK figure over the fastest. "
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
    const HardwareTable h = hardware_table(grid, hw);
    s.add(h.table);
    add_notes(s, h);
    GroupedBars bars = hardware_bars(grid, hw, g.label);
    if (!bars.categories.empty()) s.add(plotter.render(bars));
  }
  add_thread_figures(s, g, grid.columns, plotter);
  return s;
}

}  // namespace dlhost::report
