// views.cpp — see views.h. Each view picks its records, builds one table (and a plot where the
// paper has one) and says in a sentence what is shown and what was left out.
#include "report/views.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace dlhost::report {

namespace {

// A reason or message is shown up to this many bytes; the record keeps the whole.
constexpr size_t kMaxReasonBytes = 2000;

std::string threads_label(int t) { return t > 0 ? std::to_string(t) + "T" : "default T"; }
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}
bool single_rank(const Record* r) { return ranks(*r) == 1 && !has(r->data, "/distributed"); }

// Ordered insertion: the first-seen order of labels, for rows and columns.
template <typename T>
void remember(std::vector<T>& order, const T& v) {
  if (std::find(order.begin(), order.end(), v) == order.end()) order.push_back(v);
}

// A line per group of records that differ only in `x`; groups with fewer than two x values are
// left out. `y` is what is plotted against x.
template <typename Key, typename X, typename Y>
std::vector<Series> series_by(const std::vector<const Record*>& records, Key key, X x, Y y) {
  std::map<std::string, std::map<double, double>> lines;
  std::vector<std::string> order;
  for (const Record* r : records) {
    if (!is_ok(*r)) continue;
    std::string k = key(*r);
    remember(order, k);
    lines[k][x(*r)] = y(*r);
  }
  std::vector<Series> out;
  for (const auto& k : order) {
    if (lines[k].size() < 2) continue;
    out.push_back(Series{k, {lines[k].begin(), lines[k].end()}, false});
  }
  return out;
}

void add_plot(Section& s, Plotter& plotter, const LinePlot& p) {
  if (!p.series.empty()) s.add(plotter.render(p));
}

}  // namespace

std::string format_number(double v, int decimals) {
  char buf[64];
  if (std::isfinite(v) && std::abs(v) >= 1e15)
    std::snprintf(buf, sizeof(buf), "%.3e", v);
  else
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string format_count(double v) {
  if (std::isfinite(v) && std::abs(v) < 1e15 && v == std::floor(v)) return format_number(v, 0);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string format_ms(double ms) {
  double a = std::abs(ms);
  return format_number(ms, a >= 100 ? 1 : a >= 10 ? 2 : 3);
}

namespace {

std::vector<std::string> id_parts(const std::string& id) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = id.find('.'); start <= id.size(); dot = id.find('.', dot + 1)) {
    if (dot != std::string::npos && dot + 1 < id.size() &&
        std::isdigit(static_cast<unsigned char>(id[dot + 1])))
      continue;  // "lr=0.01", "v1.2": the dot is inside a value
    parts.push_back(id.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

}  // namespace

std::vector<std::string> varying_labels(const std::vector<std::string>& ids, std::string& common) {
  std::vector<std::vector<std::string>> parts;
  for (const auto& id : ids) parts.push_back(id_parts(id));
  std::vector<std::string> shared;
  if (!parts.empty())
    for (const auto& p : parts[0]) {
      bool everywhere = std::all_of(parts.begin(), parts.end(), [&](const auto& other) {
        return std::find(other.begin(), other.end(), p) != other.end();
      });
      if (everywhere && ids.size() > 1) remember(shared, p);
    }
  common.clear();
  for (const auto& p : shared) common += (common.empty() ? "" : ".") + p;
  std::vector<std::string> labels;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string label;
    for (const auto& p : parts[i])
      if (std::find(shared.begin(), shared.end(), p) == shared.end())
        label += (label.empty() ? "" : ".") + p;
    labels.push_back(label.empty() ? ids[i] : label);
  }
  return labels;
}

std::vector<EnvironmentGroup> group_by_environment(const std::vector<Record>& records) {
  std::vector<EnvironmentGroup> groups;
  std::vector<size_t> group_of(records.size());
  auto environment_of = [](const Record& r) { return r.data.value("environment", json::object()); };
  // Records that measured something define the groups: one machine, and no library at another
  // version than the group's (the backends of one run, each record listing its own backend's
  // library, share a group; a rerun of a backend on a new library version starts another).
  for (size_t i = 0; i < records.size(); ++i) {
    if (!is_ok(records[i])) continue;
    const json env = environment_of(records[i]);
    const std::string key = environment_key(env);
    const std::map<std::string, std::string> libs = libraries_of(env);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const EnvironmentGroup& e) {
      return e.key == key && libraries_agree(e.libraries, libs);
    });
    if (g == groups.end()) {
      groups.push_back({"E" + std::to_string(groups.size() + 1), key, env, {}, {}, {}, 0});
      g = groups.end() - 1;
    }
    g->libraries.insert(libs.begin(), libs.end());
    group_of[i] = static_cast<size_t>(g - groups.begin());
  }
  // A record without measurements (SKIPPED, FAILED, ...) is often written by the parent process,
  // whose environment lists every backend it looked at and the ISA of the last one: it joins its
  // machine's group (the one where its backend's library agrees, else the first), so a sweep's
  // skipped cells show in the sweep's table. Only a machine with no OK record gets a group of them.
  for (size_t i = 0; i < records.size(); ++i) {
    if (is_ok(records[i])) continue;
    const json env = environment_of(records[i]);
    const std::string key = environment_key(env);
    const std::map<std::string, std::string> libs = libraries_of(env);
    std::map<std::string, std::string> own;
    if (auto it = libs.find(backend(records[i])); it != libs.end()) own.insert(*it);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const EnvironmentGroup& e) {
      return e.key == key && libraries_agree(e.libraries, own);
    });
    if (g == groups.end())
      g = std::find_if(groups.begin(), groups.end(),
                       [&](const EnvironmentGroup& e) { return e.key == key; });
    if (g == groups.end()) {
      groups.push_back({"E" + std::to_string(groups.size() + 1), key, env, libs, {}, {}, 0});
      g = groups.end() - 1;
    }
    group_of[i] = static_cast<size_t>(g - groups.begin());
  }
  // In file order, so rows and columns keep their first-seen order; the later record of a case
  // stands.
  for (size_t i = 0; i < records.size(); ++i) {
    EnvironmentGroup& g = groups[group_of[i]];
    const Record& r = records[i];
    g.all.push_back(&r);
    auto same = std::find_if(g.records.begin(), g.records.end(),
                             [&](const Record* o) { return case_id(*o) == case_id(r); });
    if (same != g.records.end()) {
      *same = &r;
      ++g.superseded;
    } else {
      g.records.push_back(&r);
    }
  }
  return groups;
}

Section environments_view(const std::vector<EnvironmentGroup>& groups) {
  Section s{"Environments", {}};
  s.paragraph(
      "Records are grouped by CPU model, cores and library versions; every table below "
      "is per group. Hosts and dlhost revisions seen in a group are listed.");
  Table t{{"group", "CPU", "cores", "ISA", "memory (GiB)", "OS", "compiler", "build", "dlhost",
           "hosts", "libraries", "records"},
          {},
          99};
  for (const auto& g : groups) {
    std::set<std::string> hosts, revisions;
    for (const Record* r : g.records) {
      hosts.insert(text_at(r->data, "/environment/host", "?"));
      revisions.insert(text_at(r->data, "/environment/dlhost_version", "?") + " (" +
                       text_at(r->data, "/environment/git_revision", "?") + ")");
    }
    std::string libs;
    for (const auto& [name, version] : g.libraries)
      libs += (libs.empty() ? "" : ", ") + name + " " + version;
    auto join = [](const std::set<std::string>& v) {
      std::string out;
      for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
      return out;
    };
    const json& e = g.environment;
    t.rows.push_back({g.label, text_at(e, "/cpu_model"), std::to_string(integer_at(e, "/cores")),
                      text_at(e, "/isa"),
                      format_number(number_at(e, "/memory_bytes") / (1024.0 * 1024 * 1024), 1),
                      text_at(e, "/os"), text_at(e, "/compiler"), text_at(e, "/build_type"),
                      join(revisions), join(hosts), libs, std::to_string(g.records.size())});
  }
  s.add(t);
  for (const auto& g : groups)
    if (g.superseded > 0)
      s.paragraph(g.label + ": " + std::to_string(g.superseded) +
                  " record(s) replaced by a later record of the same case id (a rerun, or the "
                  "same case in two files); the later one is shown.");
  return s;
}

Section time_per_minibatch_view(const EnvironmentGroup& g) {
  Section s{"Time per mini-batch (" + g.label + ")", {}};
  s.paragraph(
      "Median milliseconds per training mini-batch (forward + backward + update), one "
      "process, network x backend x threads, as the paper's tables. A case that did not "
      "end OK shows its status. Cases of one network, backend and threads that differ in "
      "other keys (precision, data, ...) share a cell, their figures side by side in file "
      "order; a case that did not end OK never hides one that did (the tools table keys them "
      "apart).");
  using Row = std::pair<std::string, int>;     // network, batch
  using Column = std::pair<std::string, int>;  // backend, threads
  std::vector<Row> rows;
  std::set<Column> columns;
  struct TimeCell {
    std::vector<std::string> figures, others;
  };
  std::map<std::pair<Row, Column>, TimeCell> cells;
  for (const Record* r : g.records) {
    if (!single_rank(r)) continue;
    Row row{network(*r), batch(*r)};
    Column col{backend(*r), threads(*r)};
    remember(rows, row);
    columns.insert(col);
    // A later record of another case never replaces an earlier one: OK figures side by side,
    // the other outcomes after them.
    TimeCell& cell = cells[{row, col}];
    (is_ok(*r) ? cell.figures : cell.others)
        .push_back(is_ok(*r) ? format_ms(step_median_ms(*r)) : status(*r));
  }
  if (rows.empty()) {
    s.paragraph("No single-process records.");
    return s;
  }
  // Networks keep their first-seen order; a network's mini-batch sizes ascend.
  std::vector<std::string> networks;
  for (const auto& row : rows) remember(networks, row.first);
  auto rank = [&](const Row& row) {
    return std::make_pair(std::find(networks.begin(), networks.end(), row.first) - networks.begin(),
                          row.second);
  };
  std::sort(rows.begin(), rows.end(),
            [&](const Row& a, const Row& b) { return rank(a) < rank(b); });
  Table t{{"network", "batch"}, {}, 2};
  for (const auto& c : columns) t.header.push_back(c.first + " " + threads_label(c.second));
  for (const auto& row : rows) {
    std::vector<std::string> cells_row{row.first, std::to_string(row.second)};
    for (const auto& c : columns) {
      auto it = cells.find({row, c});
      std::string figures, others;
      if (it != cells.end()) {
        for (const auto& f : it->second.figures) figures += (figures.empty() ? "" : " / ") + f;
        for (const auto& o : it->second.others) others += (others.empty() ? "" : ", ") + o;
      }
      cells_row.push_back(figures.empty()  ? others
                          : others.empty() ? figures
                                           : figures + " (+ " + others + ")");
    }
    t.rows.push_back(cells_row);
  }
  s.add(t);
  return s;
}

Section thread_scaling_view(const EnvironmentGroup& g, Plotter& plotter) {
  Section s{"CPU thread scaling (" + g.label + ")", {}};
  std::vector<const Record*> one;
  std::copy_if(g.records.begin(), g.records.end(), std::back_inserter(one), single_rank);
  auto key = [](const Record& r) {
    return network(r) + " " + backend(r) + " b" + std::to_string(batch(r));
  };
  std::vector<Series> lines = series_by(
      one, key, [](const Record& r) { return double(threads(r)); }, step_median_ms);
  if (lines.empty()) {
    s.paragraph("No network ran at two or more thread counts.");
    return s;
  }
  s.paragraph(
      "Median time per mini-batch against threads (log axes); speedup is the time at the "
      "fewest threads over the time at the most, efficiency the speedup over the ratio "
      "of thread counts.");
  Table t{{"network backend batch", "threads", "fewest (ms)", "most (ms)", "speedup", "efficiency"},
          {},
          2};
  for (const auto& line : lines) {
    auto [t0, y0] = line.points.front();
    auto [t1, y1] = line.points.back();
    double speedup = y0 / y1;
    t.rows.push_back({line.name, format_number(t0, 0) + " -> " + format_number(t1, 0),
                      format_ms(y0), format_ms(y1), format_number(speedup, 2),
                      format_number(speedup / (t1 / t0), 2)});
  }
  s.add(t);
  add_plot(s, plotter,
           LinePlot{"thread_scaling_" + g.label, "CPU thread scaling (" + g.label + ")", "threads",
                    "ms per mini-batch", true, true, false, lines});
  return s;
}

Section batch_sweep_view(const EnvironmentGroup& g, Plotter& plotter) {
  Section s{"Mini-batch size sweeps (" + g.label + ")", {}};
  std::vector<const Record*> one;
  std::copy_if(g.records.begin(), g.records.end(), std::back_inserter(one), single_rank);
  auto key = [](const Record& r) {
    return network(r) + " " + backend(r) + " " + threads_label(threads(r));
  };
  auto x = [](const Record& r) { return double(batch(r)); };
  std::vector<Series> lines = series_by(one, key, x, step_median_ms);
  if (lines.empty()) {
    s.paragraph("No network ran at two or more mini-batch sizes.");
    return s;
  }
  s.paragraph("Time per mini-batch and throughput against the mini-batch size (log axes).");
  Table t{{"network backend threads", "batch", "ms per mini-batch", "samples/s", "ms per sample"},
          {},
          1};
  for (const auto& line : lines)
    for (const auto& [b, ms] : line.points)
      t.rows.push_back({line.name, format_number(b, 0), format_ms(ms),
                        format_number(b * 1000 / ms, 1), format_ms(ms / b)});
  s.add(t);
  add_plot(s, plotter,
           LinePlot{"batch_sweep_" + g.label, "Time per mini-batch against batch (" + g.label + ")",
                    "mini-batch size", "ms per mini-batch", true, true, false, lines});
  return s;
}

Section multi_rank_view(const EnvironmentGroup& g, Plotter& plotter) {
  Section s{"Multi-rank scaling (" + g.label + ")", {}};
  std::vector<const Record*> dist;
  std::copy_if(g.records.begin(), g.records.end(), std::back_inserter(dist),
               [](const Record* r) { return has(r->data, "/distributed"); });
  if (dist.empty()) {
    s.paragraph("No data-parallel records.");
    return s;
  }
  s.paragraph(
      "Synchronous data-parallel SGD. Speedup and efficiency are the record's own, "
      "against the 1-rank case of the same run (strong scaling: T1/TN per global "
      "mini-batch; weak: N x T1/TN); `-` where the run had no 1-rank case. Times are "
      "medians in ms, the slowest rank at each step.");
  Table t{{"case", "ranks", "scaling", "global batch", "step", "compute", "all-reduce",
           "exposed comm", "speedup", "efficiency"},
          {},
          1};
  auto key = [](const Record& r) {
    const record::DistributedFigures d = record::distributed_of(r);
    return network(r) + " " + d.comm + " " + threads_label(threads(r)) + " " + d.scaling + " gb" +
           std::to_string(d.global_batch);
  };
  auto speedup = [](const Record& r) {
    return ranks(r) == 1 ? 1.0 : record::distributed_of(r).speedup_vs_1_rank;
  };
  for (const Record* r : dist) {
    if (!is_ok(*r)) continue;
    bool known = !std::isnan(speedup(*r));
    const record::DistributedFigures d = record::distributed_of(*r);
    t.rows.push_back({case_id(*r), std::to_string(ranks(*r)), d.scaling,
                      std::to_string(d.global_batch), format_ms(step_median_ms(*r)),
                      format_ms(d.compute_ms), format_ms(d.allreduce_ms),
                      format_ms(d.exposed_comm_ms), known ? format_number(speedup(*r), 2) : "-",
                      known ? format_number(speedup(*r) / ranks(*r), 2) : "-"});
  }
  s.add(t);
  std::vector<const Record*> known;
  std::copy_if(dist.begin(), dist.end(), std::back_inserter(known),
               [&](const Record* r) { return !std::isnan(speedup(*r)); });
  auto x = [](const Record& r) { return double(ranks(r)); };
  std::vector<Series> lines = series_by(known, key, x, speedup);
  std::vector<Series> efficiency =
      series_by(known, key, x, [&](const Record& r) { return speedup(r) / ranks(r); });
  if (lines.empty()) return s;
  double most = 1;
  for (const auto& l : lines) most = std::max(most, l.points.back().first);
  lines.push_back(Series{"ideal", {{1, 1}, {most, most}}, true});
  efficiency.push_back(Series{"ideal", {{1, 1}, {most, 1}}, true});
  add_plot(s, plotter,
           LinePlot{"speedup_" + g.label, "Speedup against ranks (" + g.label + ")", "ranks",
                    "speedup", true, true, false, lines});
  add_plot(s, plotter,
           LinePlot{"efficiency_" + g.label, "Parallel efficiency against ranks (" + g.label + ")",
                    "ranks", "efficiency (speedup / ranks)", true, false, false, efficiency});
  return s;
}

Section phase_split_view(const EnvironmentGroup& g, Plotter& plotter) {
  Section s{"Where a mini-batch goes (" + g.label + ")", {}};
  // The data column (real data: the wait for the input pipeline) only where a record has one.
  bool data = false;
  for (const Record* r : g.records) data = data || (is_ok(*r) && record::data_wait_ms(*r));
  s.paragraph(std::string("Median ") +
              (data ? "data wait (real data: the step waited for its mini-batch), " : "") +
              "forward, backward, exposed communication (not hidden under backward) and "
              "update time per mini-batch, in ms; the plot stacks them as shares of their sum, "
              "so networks of any size compare. Medians of parts need not add up to the step's. "
              "A case whose backend fused the step into one call (fused_step) has no "
              "breakdown: set fused_step: off for one.");
  std::vector<std::string> phases{"forward", "backward", "exposed comm", "update"};
  if (data) phases.insert(phases.begin(), "data");
  std::vector<std::string> head{"case", "step"};
  head.insert(head.end(), phases.begin(), phases.end());
  Table t{head, {}, 1};
  std::string sum_of;
  for (const auto& ph : phases) sum_of += (sum_of.empty() ? "" : " + ") + ph;
  StackedBars bars{"phases_" + g.label,
                   "Share of each phase in a mini-batch (" + g.label + ")",
                   "% of " + sum_of,
                   {},
                   phases,
                   {},
                   {}};
  for (const Record* r : g.records) {
    if (!is_ok(*r)) continue;
    const record::StepParts step = record::step_parts(*r);
    const std::optional<double> data_wait = record::data_wait_ms(*r);
    std::vector<double> parts{step.forward_ms, step.backward_ms,
                              record::distributed_of(*r).exposed_comm_ms, step.update_ms};
    if (data) parts.insert(parts.begin(), data_wait.value_or(0.0));
    std::vector<std::string> row{case_id(*r), format_ms(step_median_ms(*r))};
    // A fused step (ABI 1.4) did its work in one of the three calls: its phase times are not a
    // breakdown, so the row shows the step only and the plot leaves the case out.
    if (record::fused_step(*r)) {
      row.push_back("fused step: no breakdown");
      row.resize(head.size(), "");
      t.rows.push_back(row);
      continue;
    }
    for (double v : parts) row.push_back(format_ms(v));
    if (data && !data_wait) row[2] = "-";  // synthetic: no wait
    t.rows.push_back(row);
    double sum = 0;
    for (double v : parts) sum += v;
    if (sum <= 0) continue;
    for (auto& v : parts) v = 100 * v / sum;
    bars.categories.push_back(case_id(*r));
    bars.values.push_back(parts);
  }
  if (t.rows.empty()) {
    s.paragraph("No OK records.");
    return s;
  }
  s.add(t);
  if (!bars.categories.empty()) {
    std::string common;
    bars.labels = varying_labels(bars.categories, common);
    if (!common.empty())
      s.paragraph("The plot labels each bar by what varies between its cases; common to all: `" +
                  common + "`.");
    s.add(plotter.render(bars));
  }
  return s;
}

namespace {

// Language models' tokens/s and, where the case measured one (`matmul_peak`), the backend's
// matmul peak and the fraction of it the training reached (model FLOP utilisation). Empty when
// no OK record of the group has either, so older reports stay as they were.
Table tokens_and_utilisation(const EnvironmentGroup& g, bool& impossible) {
  impossible = false;
  Table t{{"case", "tokens/sample", "tokens/s", "TFLOP/s", "matmul peak TFLOP/s", "MFU"}, {}, 1};
  for (const Record* r : g.records) {
    const std::optional<record::Timing> timing = record::read_timing(r->data);
    const bool tokens = timing && timing->has_tokens;
    const bool peak = has(r->data, "/matmul_peak/gflops");
    if (!is_ok(*r) || (!tokens && !peak)) continue;
    const double achieved = timing ? timing->train_gflops_per_second_est.value_or(0.0) : 0.0;
    // The peak is one rank's (one device's); the achieved rate is all ranks'.
    const double peak_all_ranks = number_at(r->data, "/matmul_peak/gflops") * ranks(*r);
    const double mfu = peak && peak_all_ranks > 0 ? achieved / peak_all_ranks : NAN;
    // Training cannot outrun the matmul peak of its own backend: an MFU above 1 says the peak was
    // mismeasured (a matmul too small to time the GEMM, or a disturbed run), not the model.
    impossible = impossible || mfu > 1;
    t.rows.push_back(
        {case_id(*r),
         tokens ? format_count(
                      record::read_network(r->data).value_or(record::Network{}).tokens_per_sample)
                : "-",
         tokens ? format_number(timing->tokens_per_second.value_or(0.0), 1) : "-",
         format_number(achieved / 1e3, 3), peak ? format_number(peak_all_ranks / 1e3, 3) : "-",
         std::isnan(mfu) ? "-" : format_number(mfu, 3) + (mfu > 1 ? " (impossible)" : "")});
  }
  return t;
}

}  // namespace

Section gflops_view(const EnvironmentGroup& g) {
  Section s{"Achieved GFLOP/s (" + g.label + ")", {}};
  bool impossible = false;
  const Table tokens = tokens_and_utilisation(g, impossible);
  const bool any_peak = std::any_of(g.records.begin(), g.records.end(), [](const Record* r) {
    return is_ok(*r) && has(r->data, "/matmul_peak/gflops");
  });
  s.paragraph(
      "Training GFLOP/s estimated as 3 x forward FLOPs per sample x samples per "
      "mini-batch / median step time (backward ~ 2 x forward; the record's "
      "train_gflops_per_second_est). " +
      std::string(any_peak ? "Cases that measured the backend's matmul peak (matmul_peak) have "
                             "the fraction of it in the second table."
                           : "The records hold no measured GEMM peak of the "
                             "machine, so the fraction-of-peak column is left out."));
  Table t{
      {"case", "network", "backend", "threads", "ranks", "batch", "fwd GFLOP/sample", "GFLOP/s"},
      {},
      3};
  for (const Record* r : g.records) {
    if (!is_ok(*r)) continue;
    const record::DistributedFigures d = record::distributed_of(*r);
    const record::Network net = record::read_network(r->data).value_or(record::Network{});
    const record::Timing timing = record::read_timing(r->data).value_or(record::Timing{});
    t.rows.push_back({case_id(*r), network(*r), backend(*r), std::to_string(threads(*r)),
                      std::to_string(ranks(*r)),
                      std::to_string(d.global_batch > 0 ? d.global_batch : batch(*r)),
                      format_number(net.forward_flops_per_sample / 1e9, 4),
                      format_number(timing.train_gflops_per_second_est.value_or(0.0), 2)});
  }
  if (t.rows.empty()) {
    s.paragraph("No OK records.");
    return s;
  }
  s.add(t);
  if (tokens.rows.empty()) return s;
  s.paragraph(
      "Language models: tokens/s = samples/s x tokens per sample (the sequence length). MFU "
      "(model FLOP utilisation) = the training rate above, in TFLOP/s / the matmul peak the case "
      "measured "
      "through the same backend, threads and precision (matmul_peak: one FC forward of "
      "M = N = K = the key's value, 2MNK FLOPs), times the ranks; - where the record has none.");
  s.add(tokens);
  if (impossible)
    s.paragraph(
        "(impossible): an MFU above 1 cannot be: training ran faster than the matmul peak "
        "measured through the same backend, so that peak is wrong, not the training. A matmul "
        "too small to be timed by its GEMM (its call overhead and loss dominate; `dlhost "
        "validate` refuses matmul_peak below 256) or a disturbed peak run (see Warnings) gives "
        "one. Measure it again with matmul_peak 1024 to 2048 on a CPU, 8192 on a GPU.");
  return s;
}

Section comm_bench_view(const std::vector<CommBenchRun>& runs, Plotter& plotter) {
  Section s{"Collective bus bandwidth (comm-bench)", {}};
  // op -> series name -> points; a series per plugin (and its baseline) per file.
  std::map<std::string, std::vector<Series>> by_op;
  for (const auto& run : runs) {
    std::string ranks_text = " (" + std::to_string(integer_at(run.data, "/world_size")) + " ranks)";
    for (const char* who : {"plugin", "baseline"}) {
      std::string name = text_at(run.data, (std::string("/") + who + "/name").c_str());
      if (name.empty()) continue;
      for (const auto& row : run.data["results"]) {
        std::string op = text_at(row, "/op");
        auto& lines = by_op[op];
        auto line = std::find_if(lines.begin(), lines.end(),
                                 [&](const Series& l) { return l.name == name + ranks_text; });
        if (line == lines.end()) {
          lines.push_back(Series{name + ranks_text, {}, false});
          line = lines.end() - 1;
        }
        const char* bw = std::string(who) == "plugin" ? "/busbw_gbs" : "/baseline/busbw_gbs";
        if (has(row, bw)) line->points.push_back({number_at(row, "/size"), number_at(row, bw)});
      }
    }
  }
  s.paragraph(
      "busbw = algbw x the nccl-tests factor of the collective (all-reduce 2(n-1)/n, "
      "all-gather (n-1)/n, broadcast 1), GB/s, one line per comm plugin; from " +
      std::to_string(runs.size()) + " comm-bench file(s).");
  for (const auto& [op, lines] : by_op) {
    Table t{{"size (B)"}, {}, 0};
    std::map<double, std::vector<std::string>> rows;
    for (size_t i = 0; i < lines.size(); ++i) {
      t.header.push_back(lines[i].name + " busbw");
      for (const auto& [size, bw] : lines[i].points) {
        rows[size].resize(lines.size());
        rows[size][i] = format_number(bw, 3);
      }
    }
    for (auto& [size, cells] : rows) {
      cells.resize(lines.size());
      t.rows.push_back({format_number(size, 0)});
      t.rows.back().insert(t.rows.back().end(), cells.begin(), cells.end());
    }
    s.paragraph("`" + op + "`:");
    s.add(t);
    add_plot(s, plotter,
             LinePlot{"busbw_" + op, op + " bus bandwidth against message size", "message size",
                      "busbw (GB/s)", true, false, true, lines});
  }
  return s;
}

Section not_ok_view(const std::vector<Record>& records) {
  Section s{"Cases that did not end OK", {}};
  Table t{{"case", "status", "reason", "record"}, {}, 99};
  for (const auto& r : records)
    if (!is_ok(r))
      t.rows.push_back({case_id(r), status(r),
                        one_line(cut_text(text_at(r.data, "/reason"), kMaxReasonBytes, r.where())),
                        r.where()});
  if (t.rows.empty()) {
    s.paragraph("Every case ended OK.");
    return s;
  }
  s.paragraph(std::to_string(t.rows.size()) +
              " record(s) without measurements, with the reason "
              "each gave (SKIPPED, FAILED, CRASHED, TIMEOUT, OOM).");
  s.add(t);
  return s;
}

}  // namespace dlhost::report
