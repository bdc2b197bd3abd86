// command.cpp — see command.h.
#include "project/command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/number_text.h"
#include "output/output_file.h"
#include "project/projection.h"
#include "project/runtime_model.h"
#include "record/fields.h"
#include "report/records.h"

namespace dlhost::project {

namespace {

using json = nlohmann::ordered_json;
using report::Record;

// The profile of one record, or why it has none.
ComputeProfile profile_of(const Record& r) {
  const auto& d = r.data;
  if (!report::has(d, "/backward_profile/gradients") && record::fused_step(r))
    throw std::runtime_error(r.where() + ": case " + report::case_id(r) +
                             " has no backward_profile: it ran the fused step (timing.fused_step), "
                             "not the split step data parallelism runs; give the 1-rank case "
                             "fused_step: off");
  if (!report::has(d, "/backward_profile/gradients"))
    throw std::runtime_error(r.where() + ": case " + report::case_id(r) +
                             " has no backward_profile (recorded by dlhost run on the host clock "
                             "since the projection came in)");
  ComputeProfile p;
  const record::StepParts parts = record::step_parts(r);
  p.forward_ms = parts.forward_ms;
  p.backward_ms = parts.backward_ms;
  p.update_ms = parts.update_ms;
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
    fit.interconnect = link->value("profile", key_default<std::string>("interconnect"));
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

// The comm plugin a comm-bench file measured (its plugin block's name).
std::string comm_of(const std::string& path) {
  report::Inputs in;
  report::read_input_file(path, in);
  return report::text_at(in.comm_benches.front().data, "/plugin/name");
}

std::string link_text(const Link& l) {
  double gbytes = l.beta_us_per_byte > 0 ? 1e-3 / l.beta_us_per_byte : INFINITY;
  return l.name + ": alpha " + fmt("%.1f", l.alpha_us) + " us, beta " +
         fmt("%.4f", l.beta_us_per_byte * 1e3) + " ns/byte (" + fmt("%.2f", gbytes) + " GB/s), " +
         algorithm_name(l.algorithm) + " all-reduce; " + l.source;
}

// The OK 1-rank records with a backward profile (or the one --case names).
std::vector<const Record*> profiled(const report::Inputs& in, const std::string& case_id) {
  std::vector<const Record*> profiles;
  for (const Record& r : in.records) {
    if (!case_id.empty() ? report::case_id(r) != case_id
                         : (!report::is_ok(r) || report::ranks(r) != 1 ||
                            !report::has(r.data, "/backward_profile")))
      continue;
    profiles.push_back(&r);
  }
  if (profiles.empty())
    throw std::runtime_error(
        case_id.empty() ? "no OK 1-rank record with a backward_profile in the results given (a "
                          "1-rank case records one with fused_step: off)"
                        : "no record '" + case_id + "' in the results given");
  return profiles;
}

std::vector<FittedFile> fitted_files(const std::vector<std::string>& files, Algorithm algorithm) {
  std::vector<FittedFile> fits;
  for (const auto& file : files) {
    Fit fit = fit_of(file, algorithm);
    for (const FittedFile& f : fits)
      if (f.fit.ranks == fit.ranks)
        throw std::invalid_argument("two comm-bench files of " + std::to_string(fit.ranks) +
                                    " ranks: give one per world size");
    fits.push_back({file, fit, in_place_of(file), comm_of(file)});
  }
  return fits;
}

// The link for N ranks: over the fit of N ranks, else of the largest world below N, else of the
// smallest (an extrapolation by the algorithm's cost).
const FittedFile* fit_for(int n, const std::vector<FittedFile>& fits) {
  const FittedFile* best = nullptr;
  for (const FittedFile& f : fits)
    if (f.fit.ranks <= n && (best == nullptr || f.fit.ranks > best->fit.ranks)) best = &f;
  for (const FittedFile& f : fits)
    if (best == nullptr || (best->fit.ranks > n && f.fit.ranks < best->fit.ranks)) best = &f;
  return best;
}

Link link_for(int n, const std::vector<FittedFile>& fits, const Options& o, Algorithm algorithm) {
  const FittedFile* chosen = fit_for(n, fits);
  const Fit* best = chosen != nullptr ? &chosen->fit : nullptr;
  Link l = interconnect(o.interconnect, best, o.bandwidth_gbit, o.latency_us, algorithm);
  if (best != nullptr && best->ranks != n)
    l.source += ", scaled from " + std::to_string(best->ranks) + " to " + std::to_string(n) +
                " ranks by the " + algorithm_name(l.algorithm) + " all-reduce's cost";
  return l;
}

// A measured multi-rank record against the projection of `prof` over `link`.
Comparison compare_with(const Record& m, const ComputeProfile& prof, const Link& link,
                        double bucket_mb, double first_bucket_mb = -1) {
  Comparison c;
  c.measured_case = report::case_id(m);
  c.ranks = report::ranks(m);
  // Ranks beyond the cores share them: each computes slower than the profiled rank alone.
  c.cores = report::integer_at(m.data, "/environment/cores", 0);
  c.threads_total =
      c.ranks * std::max<long long>(1, report::integer_at(m.data, "/params/threads", 1));
  c.oversubscribed = c.cores > 0 && c.threads_total > c.cores;
  if (const std::optional<record::Distributed> d = record::read_distributed(m.data); d && d->host)
    c.overlap = d->host->overlap;
  const Projection p = project(prof, c.ranks, link, bucket_mb, first_bucket_mb);
  c.projected_step_ms = c.overlap ? p.step_ms_overlap : p.step_ms_no_overlap;
  c.projected_exposed_ms = c.overlap ? p.exposed_ms_overlap : p.comm_ms;
  c.measured_step_ms = report::step_median_ms(m);
  const double got = c.measured_step_ms;
  c.error_percent = got > 0 ? (c.projected_step_ms - got) / got * 100.0 : 0.0;
  c.measured_exposed_ms = record::distributed_of(m).exposed_comm_ms;
  // The same projection from the compute the ranks measured in that run (ready times stretched
  // with its backward): what is left is the error of the communication model alone, apart from
  // ranks computing slower side by side than one rank alone.
  ComputeProfile side_by_side = prof;
  const record::StepParts parts = record::step_parts(m);
  side_by_side.forward_ms = parts.forward_ms;
  side_by_side.backward_ms = parts.backward_ms;
  side_by_side.update_ms = parts.update_ms;
  const double stretch = prof.backward_ms > 0 ? side_by_side.backward_ms / prof.backward_ms : 1;
  for (auto& g : side_by_side.gradients) g.ready_ms *= stretch;
  c.measured_compute_ms = side_by_side.compute_ms();
  const Projection q = project(side_by_side, c.ranks, link, bucket_mb, first_bucket_mb);
  c.projected_step_ms_from_measured_compute = c.overlap ? q.step_ms_overlap : q.step_ms_no_overlap;
  c.error_percent_from_measured_compute =
      got > 0 ? (c.projected_step_ms_from_measured_compute - got) / got * 100.0 : 0.0;
  return c;
}

// A measured record of a tool's own runtime against the profile: compared where its pattern is
// modelled and a fit of its collective is given, else one line saying why not.
void compare_runtime(const Record& m, const ComputeProfile& prof, const Projected& out,
                     const Options& o, Algorithm algorithm, CaseProjection& c,
                     std::vector<NotProjected>& not_projected) {
  const std::string runtime = record::distributed_of(m).runtime;
  const RuntimeModel rm = runtime_model(runtime, record::distributed_of(m).mode,
                                        report::number_at(m.data, "/distributed/bucket_mb", 0));
  std::string why = rm.not_modelled;
  const FittedFile* fit = fit_for(report::ranks(m), out.fits);
  if (why.empty() && (fit == nullptr || fit->comm != rm.collective))
    why = runtime + " all-reduces through " + rm.collective + ", and " +
          (fit == nullptr
               ? std::string("no comm-bench file was given")
               : "the fit for " + std::to_string(report::ranks(m)) + " ranks (" + fit->file +
                     ") is of " + (fit->comm.empty() ? "an unnamed comm" : "comm " + fit->comm)) +
          ": give a comm-bench --json file of " + rm.collective;
  if (!why.empty()) {
    not_projected.push_back({report::case_id(m), runtime, why});
    return;
  }
  Comparison cmp = compare_with(m, prof, link_for(report::ranks(m), out.fits, o, algorithm),
                                rm.bucket_mb, rm.first_bucket_mb);
  cmp.runtime = runtime;
  cmp.model = rm.how;
  cmp.measured_exposed_ms = NAN;  // the runtime's waiting is inside backward: none recorded
  cmp.runtime_comm_ms =
      record::distributed_of(m).has_allreduce ? record::distributed_of(m).allreduce_ms : NAN;
  c.comparisons.push_back(cmp);
}

CaseProjection project_case(const Record& r, const Projected& out,
                            const std::vector<Record>& measured, const Options& o,
                            Algorithm algorithm, std::vector<NotProjected>& not_projected) {
  CaseProjection c;
  c.case_id = report::case_id(r);
  c.network = report::network(r);
  c.backend = report::backend(r);
  c.per_rank_batch = record::per_rank_batch(r);
  c.profile = profile_of(r);
  for (const auto& g : c.profile.gradients) c.gradient_bytes += g.bytes;
  for (size_t i = 0; i < out.ranks.size(); ++i)
    c.by_ranks.push_back(project(c.profile, out.ranks[i], out.links[i], out.bucket_mb));
  for (const Record& m : measured) {
    if (report::network(m) != c.network || report::backend(m) != c.backend ||
        record::per_rank_batch(m) != c.per_rank_batch ||
        record::interconnect_of(m) != out.interconnect)
      continue;
    if (!record::distributed_of(m).runtime.empty()) {
      compare_runtime(m, c.profile, out, o, algorithm, c, not_projected);
      continue;
    }
    const Link link = link_for(report::ranks(m), out.fits, o, algorithm);
    c.comparisons.push_back(compare_with(m, c.profile, link, out.bucket_mb));
  }
  return c;
}

}  // namespace

Projected compute(const Options& o) {
  report::Inputs in;
  for (const auto& f : o.results) report::read_results_file(f, in);
  const std::vector<const Record*> profiles = profiled(in, o.case_id);
  const Algorithm algorithm = parse_algorithm(o.algorithm);
  Projected out;
  out.fits = fitted_files(o.comm_benches, algorithm);
  out.ranks = o.ranks;
  out.bucket_mb = o.bucket_mb;
  out.interconnect = o.interconnect;
  out.compared = !o.compare.empty();
  for (int n : o.ranks) out.links.push_back(link_for(n, out.fits, o, algorithm));
  std::vector<Record> measured;
  report::Inputs m;
  for (const auto& f : o.compare) report::read_results_file(f, m);
  for (const Record& r : m.records)
    if (report::is_ok(r) && report::ranks(r) > 1) measured.push_back(r);
  for (const Record* r : profiles)
    out.cases.push_back(project_case(*r, out, measured, o, algorithm, out.not_projected));
  // A tool runtime's record that no profile matched: said, not left out in silence.
  for (const Record& run : measured) {
    const std::string runtime = record::distributed_of(run).runtime;
    if (runtime.empty()) continue;
    const bool profiled_here = std::any_of(profiles.begin(), profiles.end(), [&](const Record* r) {
      return report::network(*r) == report::network(run) &&
             report::backend(*r) == report::backend(run) &&
             record::per_rank_batch(*r) == record::per_rank_batch(run);
    });
    if (!profiled_here)
      out.not_projected.push_back(
          {report::case_id(run), runtime,
           "no 1-rank record of " + report::backend(run) + " on " + report::network(run) +
               " at batch " + std::to_string(record::per_rank_batch(run)) +
               " with a backward_profile (when each gradient is ready) in the results given"});
  }
  return out;
}

namespace {

std::string fit_line(const FittedFile& f) {
  const Fit& fit = f.fit;
  const std::string where =
      fit.interconnect == "loopback" ? "loopback" : fit.interconnect + " test hosts";
  return "fit of " + f.file + " (" + std::to_string(fit.ranks) + " ranks over " + where + ", " +
         (f.in_place ? "in place" : "separate buffers") + ", " + std::to_string(fit.points) +
         " all_reduce sizes): time = " + fmt("%.1f", fit.a_us) + " us + " +
         fmt("%.4f", fit.b_us_per_byte * 1e3) + " ns/byte x size, worst point off by " +
         fmt("%.0f", fit.max_relative_error * 100) + "%\n";
}

// A tool runtime's comparison: no exposed time of its own (its waiting is inside backward), its
// own comm time beside, and how it was modelled.
std::string runtime_comparison_line(const Comparison& c) {
  return "  measured " + c.measured_case + " (" + c.runtime + "): " + std::to_string(c.ranks) +
         " ranks" +
         (c.oversubscribed ? " (oversubscribed: " + std::to_string(c.threads_total) +
                                 " threads on " + std::to_string(c.cores) + " cores)"
                           : std::string()) +
         ", step " + fmt("%.2f", c.measured_step_ms) + " ms (compute " +
         fmt("%.2f", c.measured_compute_ms) + " ms, " + c.runtime + "'s own comm time " +
         (std::isnan(c.runtime_comm_ms) ? std::string("absent")
                                        : fmt("%.2f", c.runtime_comm_ms) + " ms") +
         "); projected " + fmt("%.2f", c.projected_step_ms) + " ms (exposed " +
         fmt("%.2f", c.projected_exposed_ms) + "): error " + fmt("%+.1f", c.error_percent) +
         "%; from the measured compute " + fmt("%.2f", c.projected_step_ms_from_measured_compute) +
         " ms: error " + fmt("%+.1f", c.error_percent_from_measured_compute) + "%\n    as " +
         c.model + "\n";
}

std::string comparison_line(const Comparison& c) {
  if (!c.runtime.empty()) return runtime_comparison_line(c);
  return "  measured " + c.measured_case + ": " + std::to_string(c.ranks) + " ranks" +
         (c.oversubscribed ? " (oversubscribed: " + std::to_string(c.threads_total) +
                                 " threads on " + std::to_string(c.cores) + " cores)"
                           : std::string()) +
         ", overlap " + (c.overlap ? "on" : "off") + ", step " + fmt("%.2f", c.measured_step_ms) +
         " ms (compute " + fmt("%.2f", c.measured_compute_ms) + ", exposed comm " +
         fmt("%.2f", c.measured_exposed_ms) + " ms); projected " +
         fmt("%.2f", c.projected_step_ms) + " ms (exposed " + fmt("%.2f", c.projected_exposed_ms) +
         "): error " + fmt("%+.1f", c.error_percent) + "%; from the measured compute " +
         fmt("%.2f", c.projected_step_ms_from_measured_compute) + " ms: error " +
         fmt("%+.1f", c.error_percent_from_measured_compute) + "%\n";
}

std::string case_text(const CaseProjection& c, const std::vector<int>& ranks) {
  const ComputeProfile& prof = c.profile;
  std::ostringstream text;
  text << "\n"
       << c.case_id << " (" << c.network << ", " << c.backend << ", batch " << c.per_rank_batch
       << " per rank): forward " << fmt("%.2f", prof.forward_ms) << " ms, backward "
       << fmt("%.2f", prof.backward_ms) << " ms, update " << fmt("%.2f", prof.update_ms) << " ms; "
       << prof.gradients.size() << " gradients, " << fmt("%.2f", c.gradient_bytes / 1048576.0)
       << " MiB\n";
  text << "  ranks  compute_ms  comm_ms  no-overlap: step_ms  eff   overlap: step_ms  "
          "exposed_ms  eff\n";
  for (size_t i = 0; i < c.by_ranks.size(); ++i) {
    const Projection& p = c.by_ranks[i];
    char line[256];
    std::snprintf(line, sizeof(line),
                  "  %5d  %10.2f  %7.2f  %19.2f  %4.2f  %16.2f  %10.2f  %4.2f\n", ranks[i],
                  p.compute_ms, p.comm_ms, p.step_ms_no_overlap, p.efficiency_no_overlap,
                  p.step_ms_overlap, p.exposed_ms_overlap, p.efficiency_overlap);
    text << line;
  }
  for (const Comparison& m : c.comparisons) text << comparison_line(m);
  return text.str();
}

json fit_json(const FittedFile& f) {
  const Fit& fit = f.fit;
  return {{"file", f.file},
          {"ranks", fit.ranks},
          {"interconnect", fit.interconnect},
          {"in_place", f.in_place},
          {"a_us", fit.a_us},
          {"b_us_per_byte", fit.b_us_per_byte},
          {"alpha_us", fit.link.alpha_us},
          {"beta_us_per_byte", fit.link.beta_us_per_byte},
          {"algorithm", algorithm_name(fit.link.algorithm)},
          {"points", fit.points},
          {"max_relative_error", fit.max_relative_error}};
}

json projection_json(const CaseProjection& c, int ranks, const Link& link, const Projection& p) {
  return {{"case_id", c.case_id},
          {"network", c.network},
          {"backend", c.backend},
          {"per_rank_batch", c.per_rank_batch},
          {"ranks", ranks},
          {"link_source", link.source},
          {"buckets", p.buckets.size()},
          {"compute_ms", p.compute_ms},
          {"comm_ms", p.comm_ms},
          {"step_ms_no_overlap", p.step_ms_no_overlap},
          {"efficiency_no_overlap", p.efficiency_no_overlap},
          {"step_ms_overlap", p.step_ms_overlap},
          {"exposed_ms_overlap", p.exposed_ms_overlap},
          {"efficiency_overlap", p.efficiency_overlap}};
}

json comparison_json(const CaseProjection& c, const Comparison& m, const std::string& link) {
  json j = {{"profile_case", c.case_id},
            {"measured_case", m.measured_case},
            {"network", c.network},
            {"ranks", m.ranks},
            {"interconnect", link},
            {"oversubscribed", m.oversubscribed},
            {"overlap", m.overlap},
            {"measured_step_ms", m.measured_step_ms},
            {"measured_exposed_ms", m.measured_exposed_ms},
            {"projected_step_ms", m.projected_step_ms},
            {"error_percent", m.error_percent},
            {"measured_compute_ms", m.measured_compute_ms},
            {"projected_step_ms_from_measured_compute", m.projected_step_ms_from_measured_compute},
            {"error_percent_from_measured_compute", m.error_percent_from_measured_compute}};
  if (!m.runtime.empty()) {  // a tool's own runtime: how it was modelled, its own comm time
    j["runtime"] = m.runtime;
    j["model"] = m.model;
    j["runtime_comm_ms"] = std::isnan(m.runtime_comm_ms) ? json() : json(m.runtime_comm_ms);
  }
  return j;
}

}  // namespace

std::string text_report(const Projected& p) {
  std::string text;
  for (const FittedFile& f : p.fits) text += fit_line(f);
  for (size_t i = 0; i < p.links.size(); ++i)
    text += "link for " + std::to_string(p.ranks[i]) + " ranks " + link_text(p.links[i]) + "\n";
  text += "buckets of " + fmt("%g", p.bucket_mb) + " MiB\n";
  for (const CaseProjection& c : p.cases) text += case_text(c, p.ranks);
  if (!p.not_projected.empty()) text += "\n";
  for (const NotProjected& n : p.not_projected)
    text += "not projected: " + n.measured_case + " (" + n.runtime + "): " + n.reason + "\n";
  return text;
}

std::string json_report(const Projected& p) {
  json out{{"schema", "dlhost.project/1"}};
  json fits = json::array();
  for (const FittedFile& f : p.fits) fits.push_back(fit_json(f));
  if (!fits.empty()) {
    out["fit"] = fits.front();  // the first file's, as before several were taken
    out["fits"] = fits;
  }
  json links = json::array();
  for (size_t i = 0; i < p.links.size(); ++i) {
    const Link& l = p.links[i];
    links.push_back({{"ranks", p.ranks[i]},
                     {"name", l.name},
                     {"alpha_us", l.alpha_us},
                     {"beta_us_per_byte", l.beta_us_per_byte},
                     {"algorithm", algorithm_name(l.algorithm)},
                     {"source", l.source}});
  }
  if (!links.empty()) out["link"] = links.front();
  out["links"] = links;
  out["bucket_mb"] = p.bucket_mb;
  json projections = json::array(), comparisons = json::array();
  for (const CaseProjection& c : p.cases) {
    for (size_t i = 0; i < c.by_ranks.size(); ++i)
      projections.push_back(projection_json(c, p.ranks[i], p.links[i], c.by_ranks[i]));
    for (const Comparison& m : c.comparisons)
      comparisons.push_back(comparison_json(c, m, p.interconnect));
  }
  out["projections"] = projections;
  if (p.compared) {
    out["comparisons"] = comparisons;
    json not_projected = json::array();
    for (const NotProjected& n : p.not_projected)
      not_projected.push_back(
          {{"measured_case", n.measured_case}, {"runtime", n.runtime}, {"reason", n.reason}});
    out["not_projected"] = not_projected;
  }
  return out.dump(2);
}

Report run_projection(const Options& o) {
  const Projected p = compute(o);
  return {text_report(p), json_report(p)};
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
                "All-reduce cost between world sizes: ring (the DAG model's, and the mpi comm's) "
                "or binomial (Open MPI's nonblocking in-place all-reduce left to libnbc's "
                "choice)")
      ->capture_default_str();
  s->add_option("--ranks", o->ranks, "Rank counts to project for")
      ->delimiter(',')
      ->capture_default_str();
  s->add_option("--interconnect", o->interconnect, "loopback (as measured), 10gbe, 1gbe, custom")
      ->capture_default_str();
  // The names of comm-bench and of the suite keys link_gbit / link_latency_us; the first names
  // stay accepted, so that no script breaks.
  s->add_option("--link-gbit,--bandwidth-gbit", o->bandwidth_gbit,
                "custom: link bandwidth, Gbit/s");
  s->add_option("--link-latency-us,--latency-us", o->latency_us,
                "custom: link latency per message, us");
  s->add_option("--bucket-mb", o->bucket_mb, "Gradient bucket size, MiB (the runner's default)")
      ->capture_default_str();
  s->add_option("--compare", o->compare,
                "Results files with measured multi-rank cases of the same network, backend and "
                "per-rank batch: prints the projection's error against each");
  s->add_option("--json", o->json_out, "Also write the projection as JSON here");
  c.run_without_plugins = [o] {
    try {
      Report r = run_projection(*o);
      std::cout << r.text;
      if (!o->json_out.empty()) {
        output::write_whole_file(o->json_out, r.json + "\n");
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
