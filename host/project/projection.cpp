// projection.cpp — see projection.h.
#include "project/projection.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "suite/schema.h"

namespace dlhost::project {

double ring_allreduce_ms(uint64_t bytes, int ranks, const Link& link) {
  if (ranks <= 1) return 0.0;
  const double n = ranks;
  double us = 2.0 * (n - 1.0) / n * static_cast<double>(bytes) * link.beta_us_per_byte +
              2.0 * (n - 1.0) * link.alpha_us;
  return us / 1000.0;
}

namespace {
// Rounds of a binomial tree over `ranks`: ceil(log2 N).
double binomial_rounds(int ranks) {
  int rounds = 0;
  while ((1 << rounds) < ranks) ++rounds;
  return rounds;
}
}  // namespace

const char* algorithm_name(Algorithm a) { return a == Algorithm::kRing ? "ring" : "binomial"; }

Algorithm parse_algorithm(const std::string& name) {
  if (name == "ring") return Algorithm::kRing;
  if (name == "binomial") return Algorithm::kBinomial;
  throw std::invalid_argument("unknown all-reduce algorithm '" + name + "' (ring, binomial)");
}

double allreduce_ms(uint64_t bytes, int ranks, const Link& link) {
  if (link.algorithm == Algorithm::kRing) return ring_allreduce_ms(bytes, ranks, link);
  if (ranks <= 1) return 0.0;
  return 2.0 * binomial_rounds(ranks) *
         (static_cast<double>(bytes) * link.beta_us_per_byte + link.alpha_us) / 1000.0;
}

std::vector<Bucket> make_buckets(const std::vector<Gradient>& gradients, double bucket_mb,
                                 double first_bucket_mb) {
  std::vector<const Gradient*> order;
  for (const Gradient& g : gradients) order.push_back(&g);
  // Backward produces the last layer's gradients first: the runner buckets in that order.
  std::sort(order.begin(), order.end(),
            [](const Gradient* a, const Gradient* b) { return a->param > b->param; });
  const auto cap = static_cast<uint64_t>(bucket_mb * 1024 * 1024);
  const auto first_cap =
      first_bucket_mb >= 0 ? static_cast<uint64_t>(first_bucket_mb * 1024 * 1024) : cap;
  std::vector<Bucket> buckets;
  for (const Gradient* g : order) {
    const uint64_t open_cap = buckets.size() == 1 ? first_cap : cap;
    if (buckets.empty() ||
        (buckets.back().bytes + g->bytes > open_cap && !buckets.back().params.empty()))
      buckets.emplace_back();
    Bucket& b = buckets.back();
    b.params.push_back(g->param);
    b.bytes += g->bytes;
    b.ready_ms = std::max(b.ready_ms, g->ready_ms);
  }
  return buckets;
}

Projection project(const ComputeProfile& profile, int ranks, const Link& link, double bucket_mb,
                   double first_bucket_mb) {
  if (ranks < 1) throw std::invalid_argument("a projection needs at least 1 rank");
  Projection p;
  p.ranks = ranks;
  p.link = link.name;
  p.compute_ms = profile.compute_ms();
  p.buckets = make_buckets(profile.gradients, bucket_mb, first_bucket_mb);
  // Buckets start in the order they are ready (the runner starts each as its last gradient
  // arrives); one link, so one at a time.
  std::stable_sort(p.buckets.begin(), p.buckets.end(),
                   [](const Bucket& a, const Bucket& b) { return a.ready_ms < b.ready_ms; });
  double link_free = 0;
  for (Bucket& b : p.buckets) {
    b.comm_ms = allreduce_ms(b.bytes, ranks, link);
    b.start_ms = std::max(std::min(b.ready_ms, profile.backward_ms), link_free);
    b.end_ms = b.start_ms + b.comm_ms;
    link_free = b.end_ms;
    p.comm_ms += b.comm_ms;
  }
  p.exposed_ms_overlap = std::max(0.0, link_free - profile.backward_ms);
  p.step_ms_no_overlap = p.compute_ms + p.comm_ms;
  p.step_ms_overlap = p.compute_ms + p.exposed_ms_overlap;
  p.efficiency_no_overlap = p.step_ms_no_overlap > 0 ? p.compute_ms / p.step_ms_no_overlap : 1.0;
  p.efficiency_overlap = p.step_ms_overlap > 0 ? p.compute_ms / p.step_ms_overlap : 1.0;
  return p;
}

Fit fit_alpha_beta(const std::vector<std::pair<double, double>>& points, int ranks,
                   Algorithm algorithm) {
  if (ranks < 2) throw std::invalid_argument("an all-reduce fit needs figures of 2 or more ranks");
  std::set<double> sizes;
  for (const auto& [x, t] : points)
    if (t > 0) sizes.insert(x);
  if (sizes.size() < 2)
    throw std::invalid_argument("an all-reduce fit needs times at 2 or more message sizes");
  double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, t] : points) {
    if (t <= 0) continue;
    const double w = 1.0 / (t * t);
    s += w;
    sx += w * x;
    sy += w * t;
    sxx += w * x * x;
    sxy += w * x * t;
  }
  Fit f;
  f.ranks = ranks;
  f.b_us_per_byte = (s * sxy - sx * sy) / (s * sxx - sx * sx);
  f.a_us = (sy - f.b_us_per_byte * sx) / s;
  if (f.a_us < 0) {  // no negative latency: the line through the origin
    f.a_us = 0;
    f.b_us_per_byte = sxy / sxx;
  }
  if (f.b_us_per_byte < 0) {  // no negative bandwidth cost: a constant
    f.b_us_per_byte = 0;
    f.a_us = sy / s;
  }
  const double n = ranks;
  f.link.name = "measured";
  f.link.algorithm = algorithm;
  if (algorithm == Algorithm::kRing) {
    f.link.alpha_us = f.a_us / (2.0 * (n - 1.0));
    f.link.beta_us_per_byte = f.b_us_per_byte * n / (2.0 * (n - 1.0));
  } else {
    f.link.alpha_us = f.a_us / (2.0 * binomial_rounds(ranks));
    f.link.beta_us_per_byte = f.b_us_per_byte / (2.0 * binomial_rounds(ranks));
  }
  for (const auto& [x, t] : points) {
    if (t <= 0) continue;
    ++f.points;
    f.max_relative_error =
        std::max(f.max_relative_error, std::fabs(f.a_us + f.b_us_per_byte * x - t) / t);
  }
  return f;
}

bool measured_on(const Fit& fit, const std::string& name, double bandwidth_gbit,
                 double latency_us) {
  if (fit.interconnect != name) return false;
  if (name != "custom") return true;
  auto same = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, b); };
  return same(fit.link_gbit, bandwidth_gbit) && same(fit.link_latency_us, latency_us);
}

Link interconnect(const std::string& name, const Fit* measured, double bandwidth_gbit,
                  double latency_us, Algorithm algorithm) {
  double link_gbit = 0, link_latency_us = 0;
  if (measured != nullptr && measured_on(*measured, name, bandwidth_gbit, latency_us)) {
    // Measured over this very link: its latency and bandwidth, and how the comm's algorithm
    // uses them, are in the figures already.
    Link l = measured->link;
    l.name = name;
    l.source = "as measured on " + std::to_string(measured->ranks) + " ranks over " +
               (name == "loopback" ? std::string("loopback") : name + " test hosts");
    return l;
  }
  if (name == "loopback") {
    throw std::invalid_argument(
        measured == nullptr
            ? "interconnect 'loopback' is what comm-bench measured here: give its --comm-bench file"
            : "interconnect 'loopback': the comm-bench file was measured over " +
                  measured->interconnect + " test hosts, not loopback");
  } else if (name == "custom") {
    if (!(bandwidth_gbit > 0))
      throw std::invalid_argument("interconnect 'custom' needs --link-gbit above 0");
    link_gbit = bandwidth_gbit;
    link_latency_us = latency_us;
  } else if (const LinkProfile* named = find_link_profile(name)) {
    link_gbit = named->gbit;
    link_latency_us = named->latency_us;
  } else {
    std::string names;
    for (const LinkProfile& l : link_profiles()) names += (names.empty() ? "" : ", ") + l.name;
    throw std::invalid_argument("unknown interconnect '" + name + "' (" + names + ")");
  }
  // Bytes per us of the wire: Gbit/s * 1e9 / 8 / 1e6.
  const double wire_beta = 1.0 / (link_gbit * 1e3 / 8.0);
  Link l;
  l.name = name;
  l.algorithm = measured ? measured->link.algorithm : algorithm;
  l.alpha_us = link_latency_us + (measured ? measured->link.alpha_us : 0.0);
  l.beta_us_per_byte = std::max(wire_beta, measured ? measured->link.beta_us_per_byte : 0.0);
  l.source = measured
                 ? "nominal " + name + " over the fit measured on " +
                       std::to_string(measured->ranks) + " ranks over " + measured->interconnect
                 : "nominal " + name;
  return l;
}

}  // namespace dlhost::project
