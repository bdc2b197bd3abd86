// command.cpp — see command.h.
#include "project/command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "project/projection.h"
#include "report/records.h"

namespace dlhost::project {

namespace {

using json = nlohmann::ordered_json;
using report::Record;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

int per_rank_batch(const Record& r) {
  long long b = report::integer_at(r.data, "/distributed/per_rank_batch", 0);
  return b > 0 ? static_cast<int>(b) : report::batch(r);
}

// The profile of one record, or why it has none.
ComputeProfile profile_of(const Record& r) {
  const auto& d = r.data;
  if (!report::has(d, "/backward_profile/gradients"))
    throw std::runtime_error(r.where() + ": case " + report::case_id(r) +
                             " has no backward_profile (recorded by dlhost run on the host clock "
                             "since the projection came in)");
  ComputeProfile p;
  p.forward_ms = report::number_at(d, "/timing/forward/median");
  p.backward_ms = report::number_at(d, "/timing/backward/median");
  p.update_ms = report::number_at(d, "/timing/update/median");
  for (const auto& g : d.at("backward_profile").at("gradients")) {
    Gradient x;
    x.param = g.at("param").get<int32_t>();
    x.name = g.value("name", "");
    x.bytes = g.at("bytes").get<uint64_t>();
    x.ready_ms = g.at("ready_ms").get<double>();
    p.gradients.push_back(x);
  }
  return p;
}

// The fit of a comm-bench document's all_reduce rows (median times against size), with the
// world size and the interconnect it was measured over (its `interconnect` block; none: every
// rank on this host, loopback).
Fit fit_of(const std::string& path, Algorithm algorithm) {
  report::Inputs in;
  report::read_input_file(path, in);
  if (in.comm_benches.empty())
    throw std::runtime_error(path + ": not a comm-bench --json file (schema dlhost.comm-bench/1)");
  const auto& doc = in.comm_benches.front().data;
  if (doc.value("status", "") == "SKIPPED")
    throw std::runtime_error(path + ": comm-bench was SKIPPED: " + doc.value("reason", "?"));
  int world = static_cast<int>(report::integer_at(doc, "/world_size", 0));
  std::vector<std::pair<double, double>> rows;
  for (const auto& row : doc.value("results", report::json::array())) {
    if (row.value("op", "") != "all_reduce") continue;
    double t =
        row.contains("median_us") ? row["median_us"].get<double>() : row.value("time_us", 0.0);
    rows.emplace_back(row.value("size", 0.0), t);
  }
  if (rows.empty()) throw std::runtime_error(path + ": no all_reduce rows to fit");
  if (world < 2)
    throw std::runtime_error(path + ": measured on " + std::to_string(world) +
                             " rank(s); the fit needs 2 or more");
  Fit fit;
  try {
    fit = fit_alpha_beta(rows, world, algorithm);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  if (auto link = doc.find("interconnect"); link != doc.end() && link->is_object()) {
    fit.interconnect = link->value("profile", "loopback");
    auto number = [&](const char* key) {
      auto v = link->find(key);
      return v != link->end() && v->is_number() ? v->get<double>() : 0.0;
    };
    fit.link_gbit = number("link_gbit");
    fit.link_latency_us = number("link_latency_us");
  }
  return fit;
}

// In-place all-reduces are what the runner issues (and, in Open MPI, choose the algorithm).
bool in_place_of(const std::string& path) {
  report::Inputs in;
  report::read_input_file(path, in);
  const auto& doc = in.comm_benches.front().data;
  auto c = doc.find("config");
  return c != doc.end() && c->is_object() && c->value("in_place", false);
}

// The link a measured record ran over: its interconnect block's profile, else loopback.
std::string interconnect_of(const Record& r) {
  if (auto l = r.data.find("interconnect"); l != r.data.end() && l->is_object())
    return l->value("profile", "loopback");
  if (auto p = r.data.find("params"); p != r.data.end() && p->is_object())
    if (auto i = p->find("interconnect"); i != p->end() && i->is_string())
      return i->get<std::string>();
  return "loopback";
}

std::string link_text(const Link& l) {
  double gbytes = l.beta_us_per_byte > 0 ? 1e-3 / l.beta_us_per_byte : INFINITY;
  return l.name + ": alpha " + fmt("%.1f", l.alpha_us) + " us, beta " +
         fmt("%.4f", l.beta_us_per_byte * 1e3) + " ns/byte (" + fmt("%.2f", gbytes) + " GB/s), " +
         algorithm_name(l.algorithm) + " all-reduce; " + l.source;
}

}  // namespace

Report run_projection(const Options& o) {
  report::Inputs in;
  for (const auto& f : o.results) report::read_results_file(f, in);
  std::vector<const Record*> profiles;
  for (const Record& r : in.records) {
    if (!o.case_id.empty() ? report::case_id(r) != o.case_id
                           : (!report::is_ok(r) || report::ranks(r) != 1 ||
                              !report::has(r.data, "/backward_profile")))
      continue;
    profiles.push_back(&r);
  }
  if (profiles.empty())
    throw std::runtime_error(
        o.case_id.empty() ? "no OK 1-rank record with a backward_profile in the results given"
                          : "no record '" + o.case_id + "' in the results given");

  const Algorithm algorithm = parse_algorithm(o.algorithm);
  std::vector<Fit> fits;
  json out{{"schema", "dlhost.project/1"}};
  std::ostringstream text;
  json fits_json = json::array();
  for (const auto& file : o.comm_benches) {
    Fit fit = fit_of(file, algorithm);
    for (const Fit& f : fits)
      if (f.ranks == fit.ranks)
        throw std::invalid_argument("two comm-bench files of " + std::to_string(fit.ranks) +
                                    " ranks: give one per world size");
    const std::string where =
        fit.interconnect == "loopback" ? "loopback" : fit.interconnect + " test hosts";
    const bool in_place = in_place_of(file);
    text << "fit of " << file << " (" << fit.ranks << " ranks over " << where << ", "
         << (in_place ? "in place" : "separate buffers") << ", " << fit.points
         << " all_reduce sizes): time = " << fmt("%.1f", fit.a_us) << " us + "
         << fmt("%.4f", fit.b_us_per_byte * 1e3) << " ns/byte x size, worst point off by "
         << fmt("%.0f", fit.max_relative_error * 100) << "%\n";
    fits_json.push_back({{"file", file},
                         {"ranks", fit.ranks},
                         {"interconnect", fit.interconnect},
                         {"in_place", in_place},
                         {"a_us", fit.a_us},
                         {"b_us_per_byte", fit.b_us_per_byte},
                         {"alpha_us", fit.link.alpha_us},
                         {"beta_us_per_byte", fit.link.beta_us_per_byte},
                         {"algorithm", algorithm_name(fit.link.algorithm)},
                         {"points", fit.points},
                         {"max_relative_error", fit.max_relative_error}});
    fits.push_back(fit);
  }
  if (!fits.empty()) {
    out["fit"] = fits_json.front();  // the first file's, as before several were taken
    out["fits"] = fits_json;
  }
  // The link for N ranks: over the fit of N ranks, else of the largest world below N, else of
  // the smallest (an extrapolation by the algorithm's cost).
  auto fit_for = [&](int n) -> const Fit* {
    const Fit* best = nullptr;
    for (const Fit& f : fits)
      if (f.ranks <= n && (best == nullptr || f.ranks > best->ranks)) best = &f;
    for (const Fit& f : fits)
      if (best == nullptr || (best->ranks > n && f.ranks < best->ranks)) best = &f;
    return best;
  };
  auto link_for = [&](int n) {
    Link l = interconnect(o.interconnect, fit_for(n), o.bandwidth_gbit, o.latency_us, algorithm);
    if (const Fit* f = fit_for(n); f != nullptr && f->ranks != n)
      l.source += ", scaled from " + std::to_string(f->ranks) + " to " + std::to_string(n) +
                  " ranks by the " + algorithm_name(l.algorithm) + " all-reduce's cost";
    return l;
  };
  std::vector<int> shown = o.ranks;
  json links_json = json::array();
  for (int n : shown) {
    const Link link = link_for(n);
    text << "link for " << n << " ranks " << link_text(link) << "\n";
    links_json.push_back({{"ranks", n},
                          {"name", link.name},
                          {"alpha_us", link.alpha_us},
                          {"beta_us_per_byte", link.beta_us_per_byte},
                          {"algorithm", algorithm_name(link.algorithm)},
                          {"source", link.source}});
  }
  text << "buckets of " << fmt("%g", o.bucket_mb) << " MiB\n";
  if (!links_json.empty()) out["link"] = links_json.front();
  out["links"] = links_json;
  out["bucket_mb"] = o.bucket_mb;

  std::vector<Record> measured;
  if (!o.compare.empty()) {
    report::Inputs m;
    for (const auto& f : o.compare) report::read_results_file(f, m);
    for (const Record& r : m.records)
      if (report::is_ok(r) && report::ranks(r) > 1) measured.push_back(r);
  }

  json projections = json::array(), comparisons = json::array();
  for (const Record* r : profiles) {
    const ComputeProfile prof = profile_of(*r);
    uint64_t bytes = 0;
    for (const auto& g : prof.gradients) bytes += g.bytes;
    const std::string net = report::network(*r), be = report::backend(*r);
    const int batch = per_rank_batch(*r);
    text << "\n"
         << report::case_id(*r) << " (" << net << ", " << be << ", batch " << batch
         << " per rank): forward " << fmt("%.2f", prof.forward_ms) << " ms, backward "
         << fmt("%.2f", prof.backward_ms) << " ms, update " << fmt("%.2f", prof.update_ms)
         << " ms; " << prof.gradients.size() << " gradients, " << fmt("%.2f", bytes / 1048576.0)
         << " MiB\n";
    text << "  ranks  compute_ms  comm_ms  no-overlap: step_ms  eff   overlap: step_ms  "
            "exposed_ms  eff\n";
    for (int n : o.ranks) {
      Projection p = project(prof, n, link_for(n), o.bucket_mb);
      char line[256];
      std::snprintf(line, sizeof(line),
                    "  %5d  %10.2f  %7.2f  %19.2f  %4.2f  %16.2f  %10.2f  %4.2f\n", n, p.compute_ms,
                    p.comm_ms, p.step_ms_no_overlap, p.efficiency_no_overlap, p.step_ms_overlap,
                    p.exposed_ms_overlap, p.efficiency_overlap);
      text << line;
      projections.push_back({{"case_id", report::case_id(*r)},
                             {"network", net},
                             {"backend", be},
                             {"per_rank_batch", batch},
                             {"ranks", n},
                             {"link_source", link_for(n).source},
                             {"buckets", p.buckets.size()},
                             {"compute_ms", p.compute_ms},
                             {"comm_ms", p.comm_ms},
                             {"step_ms_no_overlap", p.step_ms_no_overlap},
                             {"efficiency_no_overlap", p.efficiency_no_overlap},
                             {"step_ms_overlap", p.step_ms_overlap},
                             {"exposed_ms_overlap", p.exposed_ms_overlap},
                             {"efficiency_overlap", p.efficiency_overlap}});
    }
    for (const Record& m : measured) {
      if (report::network(m) != net || report::backend(m) != be || per_rank_batch(m) != batch ||
          interconnect_of(m) != o.interconnect)
        continue;
      const int n = report::ranks(m);
      // Ranks beyond the cores share them: each computes slower than the profiled rank alone.
      const long long cores = report::integer_at(m.data, "/environment/cores", 0);
      const long long threads =
          std::max<long long>(1, report::integer_at(m.data, "/params/threads", 1));
      const bool oversubscribed = cores > 0 && n * threads > cores;
      bool overlap = true;
      if (auto d = m.data.find("distributed"); d != m.data.end() && d->contains("overlap"))
        overlap = d->at("overlap").get<bool>();
      const Link link = link_for(n);
      Projection p = project(prof, n, link, o.bucket_mb);
      const double predicted = overlap ? p.step_ms_overlap : p.step_ms_no_overlap;
      const double got = report::step_median_ms(m);
      const double error = got > 0 ? (predicted - got) / got * 100.0 : 0.0;
      const double exposed = report::number_at(m.data, "/distributed/exposed_comm/median");
      // The same projection from the compute the ranks measured in that run (ready times
      // stretched with its backward): what is left is the error of the communication model
      // alone, apart from ranks computing slower side by side than one rank alone.
      ComputeProfile side_by_side = prof;
      side_by_side.forward_ms = report::number_at(m.data, "/timing/forward/median");
      side_by_side.backward_ms = report::number_at(m.data, "/timing/backward/median");
      side_by_side.update_ms = report::number_at(m.data, "/timing/update/median");
      const double stretch = prof.backward_ms > 0 ? side_by_side.backward_ms / prof.backward_ms : 1;
      for (auto& g : side_by_side.gradients) g.ready_ms *= stretch;
      Projection q = project(side_by_side, n, link, o.bucket_mb);
      const double predicted_comm_only = overlap ? q.step_ms_overlap : q.step_ms_no_overlap;
      const double error_comm_only = got > 0 ? (predicted_comm_only - got) / got * 100.0 : 0.0;
      text << "  measured " << report::case_id(m) << ": " << n << " ranks"
           << (oversubscribed ? " (oversubscribed: " + std::to_string(n * threads) +
                                    " threads on " + std::to_string(cores) + " cores)"
                              : std::string())
           << ", overlap " << (overlap ? "on" : "off") << ", step " << fmt("%.2f", got)
           << " ms (compute " << fmt("%.2f", side_by_side.compute_ms()) << ", exposed comm "
           << fmt("%.2f", exposed) << " ms); projected " << fmt("%.2f", predicted)
           << " ms (exposed " << fmt("%.2f", overlap ? p.exposed_ms_overlap : p.comm_ms)
           << "): error " << fmt("%+.1f", error) << "%; from the measured compute "
           << fmt("%.2f", predicted_comm_only) << " ms: error " << fmt("%+.1f", error_comm_only)
           << "%\n";
      comparisons.push_back({{"profile_case", report::case_id(*r)},
                             {"measured_case", report::case_id(m)},
                             {"network", net},
                             {"ranks", n},
                             {"interconnect", o.interconnect},
                             {"oversubscribed", oversubscribed},
                             {"overlap", overlap},
                             {"measured_step_ms", got},
                             {"measured_exposed_ms", exposed},
                             {"projected_step_ms", predicted},
                             {"error_percent", error},
                             {"measured_compute_ms", side_by_side.compute_ms()},
                             {"projected_step_ms_from_measured_compute", predicted_comm_only},
                             {"error_percent_from_measured_compute", error_comm_only}});
    }
  }
  out["projections"] = projections;
  if (!o.compare.empty()) out["comparisons"] = comparisons;
  return {text.str(), out.dump(2)};
}

std::optional<int> Command::run_chosen() const {
  if (sub != nullptr && *sub) return run();
  return std::nullopt;
}

Command add_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  Command c;
  c.sub = app.add_subcommand(
      "project",
      "Project time per mini-batch and efficiency on N ranks over an interconnect (the DAG "
      "model, with and without overlap) from a 1-rank backward profile and comm-bench figures");
  auto* s = c.sub;
  s->add_option("results", o->results, "Results files holding 1-rank records with a profile")
      ->required();
  s->add_option("--case", o->case_id, "Project only this case (default: every 1-rank record)");
  s->add_option("--comm-bench", o->comm_benches,
                "comm-bench --json file of 2+ ranks: all_reduce times to fit alpha and beta to "
                "(repeatable, one per world size; a file measured over the --interconnect's own "
                "test hosts is taken as measured)");
  s->add_option("--algorithm", o->algorithm,
                "All-reduce cost between world sizes: ring (the DAG model's) or binomial (Open "
                "MPI's nonblocking in-place all-reduce)")
      ->capture_default_str();
  s->add_option("--ranks", o->ranks, "Rank counts to project for")
      ->delimiter(',')
      ->capture_default_str();
  s->add_option("--interconnect", o->interconnect, "loopback (as measured), 10gbe, 1gbe, custom")
      ->capture_default_str();
  s->add_option("--bandwidth-gbit", o->bandwidth_gbit, "custom: link bandwidth, Gbit/s");
  s->add_option("--latency-us", o->latency_us, "custom: link latency per message, us");
  s->add_option("--bucket-mb", o->bucket_mb, "Gradient bucket size, MiB (the runner's default)")
      ->capture_default_str();
  s->add_option("--compare", o->compare,
                "Results files with measured multi-rank cases of the same network, backend and "
                "per-rank batch: prints the projection's error against each");
  s->add_option("--json", o->json_out, "Also write the projection as JSON here");
  c.run = [o] {
    try {
      Report r = run_projection(*o);
      std::cout << r.text;
      if (!o->json_out.empty()) {
        std::ofstream f(o->json_out);
        f << r.json << "\n";
        if (!f) throw std::runtime_error("cannot write " + o->json_out);
      }
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "dlhost project: " << e.what() << "\n";
      return 2;
    }
  };
  return c;
}

}  // namespace dlhost::project
