// distributed_tools_view.cpp — the report's "Distributed tools" section: Du et al.'s table, each
// tool distributing itself, side by side (issue 41). A tool is a backend and the comm that moves
// its gradients: dlhost's own comms (cpu_onednn + mpi, + gloo) or the tool's own runtime
// (cpu_libtorch2 + torch_ddp, cpu_tensorflow + tf_ps, ...; the record's distributed.runtime).
// A row per tool x network x ranks x link: the step, its compute, its communication as the
// record measured it (dlhost's all-reduce, or the runtime's own comm time; absent with the
// runtime's reason where it exposes none, never a 0), and the speedup and efficiency against the
// SAME tool on 1 rank (the record's own vs_1_rank may name another comm's 1-rank case: the
// runner's baseline ignores the comm). A step timed by the tool's own clock is marked, with a
// note; a compute the record does not have is "-". Then the speedup against ranks, a line per tool,
// network and link, from each tool's own 1 rank. Only records of cases with a comm or several ranks
// count; one that did not end OK shows its status.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "report/views.h"

namespace dlhost::report {

namespace {

// What a row stands for: everything but ranks and the link, which its baseline shares. `batch`
// is the global mini-batch under strong scaling, the per-rank one under weak scaling.
struct ToolCase {
  std::string tool, network, scaling;
  long long batch = 0;
  int threads = 0;
  bool operator<(const ToolCase& o) const {
    return std::tie(tool, network, scaling, batch, threads) <
           std::tie(o.tool, o.network, o.scaling, o.batch, o.threads);
  }
};

struct Row {
  ToolCase what;
  long long global_batch = 0;
  std::string link;
  int ranks = 1;
  const Record* record = nullptr;
};

std::string param_text(const Record& r, const char* key, const std::string& fallback) {
  return text_at(r.data, (std::string("/params/") + key).c_str(), fallback);
}

// A record of a multi-rank case or a case with a comm; for one that did not end OK (no
// distributed block) its parameters say the same.
bool distributed_case(const Record& r) {
  if (has(r.data, "/distributed")) return true;
  return !is_ok(r) && (ranks(r) > 1 || param_text(r, "comm", "none") != "none");
}

Row row_of(const Record& r) {
  const record::DistributedFigures d = record::distributed_of(r);
  Row row;
  const std::string comm = d.comm.empty() ? param_text(r, "comm", "?") : d.comm;
  row.what.tool = backend(r) + " + " + comm;
  // A runtime's asynchronous mode is a tool of its own (tf_ps async beside sync, mxnet_kvstore
  // dist_async): its own rows and its own 1-rank baseline.
  if (d.mode == "async") row.what.tool += " (async)";
  row.what.network = network(r);
  row.what.scaling = d.scaling.empty() ? param_text(r, "scaling", "strong") : d.scaling;
  row.what.threads = threads(r);
  row.ranks = ranks(r);
  const long long batch = integer_at(r.data, "/params/batch", 0);
  const bool weak = row.what.scaling == "weak";
  row.global_batch = d.global_batch > 0 ? d.global_batch : weak ? batch * row.ranks : batch;
  row.what.batch = weak ? row.global_batch / std::max(row.ranks, 1) : row.global_batch;
  row.link = row.ranks == 1 ? "-" : record::interconnect_of(r);
  row.record = &r;
  return row;
}

// loopback, 10gbe, 1gbe, custom: the suite key's order (fastest link first); others after.
int link_rank(const std::string& link) {
  static const std::vector<std::string> order = {"-", "loopback", "10gbe", "1gbe", "custom"};
  return static_cast<int>(std::find(order.begin(), order.end(), link) - order.begin());
}

// Notes under the table, lettered in order of first use: what a communication figure measures,
// or why a runtime has none.
class Notes {
 public:
  std::string mark(const std::string& text) {
    auto it = std::find(texts_.begin(), texts_.end(), text);
    if (it == texts_.end()) it = texts_.insert(texts_.end(), text);
    return "(" + letter(static_cast<size_t>(it - texts_.begin())) + ")";
  }
  std::string text() const {
    std::string out;
    for (size_t i = 0; i < texts_.size(); ++i)
      out += (out.empty() ? "" : " ") + ("(" + letter(i) + ") ") + texts_[i];
    return out;
  }

 private:
  static std::string letter(size_t i) {
    return i < 26 ? std::string(1, static_cast<char>('a' + i)) : std::to_string(i + 1);
  }
  std::vector<std::string> texts_;
};

// The communication cell: the record's all-reduce median with what it measures, "absent" with
// the runtime's reason, or "-" where the record says nothing of it.
std::string communication_cell(const Record& r, Notes& notes) {
  const record::DistributedFigures d = record::distributed_of(r);
  if (d.has_allreduce) {
    const std::string what =
        d.runtime.empty()
            ? "dlhost's all-reduce (" + d.comm +
                  "): per step, from the first bucket's start to the last one's end; it overlaps "
                  "backward (the part not hidden is the record's exposed_comm)."
            : d.runtime + ", its own comm time: " + d.comm_time + ".";
    return format_ms(d.allreduce_ms) + " " + notes.mark(what);
  }
  if (!d.comm_time_absent.empty())
    return "absent " +
           notes.mark(d.runtime + " exposes no communication time: " + d.comm_time_absent + ".");
  return "-";
}

// The step cell's mark where the tool's own clock timed the steps (timing.timer backend_clock:
// BigDL's DistriOptimizer owns the loop), with what that clock covers in the note.
std::string own_clock_mark(const Record& r, Notes& notes) {
  if (record::timer(r) != "backend_clock") return "";
  return " " +
         notes.mark(
             "step timed by the tool's own clock (timing.timer backend_clock), not "
             "the host's: " +
             text_at(r.data, "/timing/clock", "the record does not say what it covers") + ".");
}

// The compute median; "-" where the record has no compute samples (a tool that owns its loop
// and splits no step: never a 0).
std::string compute_cell(const Record& r) {
  if (numbers_at(r.data, "/distributed/samples/compute").empty()) return "-";
  return format_ms(record::distributed_of(r).compute_ms);
}

// The group's distributed cases, in the order of their networks' and tools' first records, then
// batch, threads, link (fastest first) and ranks.
std::vector<Row> distributed_rows(const EnvironmentGroup& g) {
  std::vector<Row> rows;
  std::vector<std::string> networks, tools;
  for (const Record* r : g.records) {
    if (!distributed_case(*r)) continue;
    rows.push_back(row_of(*r));
    if (std::find(networks.begin(), networks.end(), rows.back().what.network) == networks.end())
      networks.push_back(rows.back().what.network);
    if (std::find(tools.begin(), tools.end(), rows.back().what.tool) == tools.end())
      tools.push_back(rows.back().what.tool);
  }
  auto position = [](const std::vector<std::string>& order, const std::string& v) {
    return std::find(order.begin(), order.end(), v) - order.begin();
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    return std::make_tuple(position(networks, a.what.network), position(tools, a.what.tool),
                           a.what.batch, a.what.threads, link_rank(a.link), a.link, a.ranks) <
           std::make_tuple(position(networks, b.what.network), position(tools, b.what.tool),
                           b.what.batch, b.what.threads, link_rank(b.link), b.link, b.ranks);
  });
  return rows;
}

// The speedup lines (each from its tool's own 1 rank) and the ideal one, as the section's plot.
void add_speedup_plot(Section& s, Plotter& plotter, const std::string& label,
                      std::map<std::string, Series>& lines,
                      const std::vector<std::string>& line_order) {
  std::vector<Series> plotted;
  double most = 1;
  for (const std::string& name : line_order) {
    Series line = lines[name];
    std::sort(line.points.begin(), line.points.end());
    most = std::max(most, line.points.back().first);
    plotted.push_back(line);
  }
  if (plotted.empty()) return;
  plotted.push_back(Series{"ideal", {{1, 1}, {most, most}}, true});
  s.add(plotter.render(LinePlot{"distributed_tools_" + label,
                                "Speedup of each tool against its own 1 rank (" + label + ")",
                                "ranks", "speedup", true, true, false, plotted}));
}

}  // namespace

Section distributed_tools_view(const EnvironmentGroup& g, Plotter& plotter) {
  Section s{"Distributed tools (" + g.label + ")", {}};
  std::vector<Row> rows = distributed_rows(g);
  if (rows.empty()) {
    s.paragraph("No records of cases with a comm or several ranks.");
    return s;
  }
  s.paragraph(
      "Du et al.'s table: each tool (backend + the comm that moves its gradients: dlhost's "
      "`mpi`/`gloo`, or the tool's own runtime) per network, ranks and link (`-`: one rank, no "
      "link). Medians in ms, the slowest rank at each step: the step, its compute (forward + "
      "backward + update; a runtime's communication that backward waits for is inside it), and "
      "the communication as the record measured it, with what that is in the notes (absent where "
      "the runtime exposes none: never a 0). Speedup against the same tool on 1 rank of the same "
      "network, global mini-batch and threads (strong scaling T1/TN, weak N T1/TN; `-` without "
      "such a 1-rank case); efficiency = speedup / ranks.");
  // Each tool's own 1-rank case.
  std::map<ToolCase, const Record*> baseline;
  for (const Row& row : rows)
    if (row.ranks == 1 && is_ok(*row.record)) baseline.emplace(row.what, row.record);
  auto speedup_of = [&](const Row& row) -> double {
    auto base = baseline.find(row.what);
    if (!is_ok(*row.record) || base == baseline.end()) return NAN;
    const double t1 = step_median_ms(*base->second), tn = step_median_ms(*row.record);
    if (!(t1 > 0) || !(tn > 0)) return NAN;
    return row.what.scaling == "weak" ? row.ranks * t1 / tn : t1 / tn;
  };
  Notes notes;
  Table t{{"tool", "network", "batch", "threads", "link", "ranks", "step", "compute",
           "communication", "speedup", "efficiency"},
          {},
          2};
  std::map<std::string, Series> lines;  // tool network link -> speedup against ranks
  std::vector<std::string> line_order;
  for (const Row& row : rows) {
    const Record& r = *row.record;
    std::vector<std::string> cells{row.what.tool,
                                   row.what.network,
                                   std::to_string(row.global_batch),
                                   std::to_string(row.what.threads),
                                   row.link,
                                   std::to_string(row.ranks)};
    if (!is_ok(r)) {
      cells.push_back(status(r));
      cells.resize(t.header.size(), "-");
      t.rows.push_back(cells);
      continue;
    }
    const double speedup = speedup_of(row);
    const bool known = !std::isnan(speedup);
    cells.insert(cells.end(),
                 {format_ms(step_median_ms(r)) + own_clock_mark(r, notes), compute_cell(r),
                  communication_cell(r, notes), known ? format_number(speedup, 2) : "-",
                  known ? format_number(speedup / row.ranks, 2) : "-"});
    t.rows.push_back(cells);
    if (!known || row.ranks == 1) continue;
    const std::string name = row.what.tool + " " + row.what.network + " " + row.link;
    if (!lines.count(name)) {
      line_order.push_back(name);
      lines[name] = Series{name, {{1.0, 1.0}}, false};
    }
    lines[name].points.push_back({double(row.ranks), speedup});
  }
  s.add(t);
  if (const std::string text = notes.text(); !text.empty()) s.paragraph(text);
  add_speedup_plot(s, plotter, g.label, lines, line_order);
  return s;
}

}  // namespace dlhost::report
