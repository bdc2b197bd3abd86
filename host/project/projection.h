// projection.h — an S-SGD projection beyond the hardware at hand: the time of one data-parallel
// mini-batch on N ranks over a named interconnect, from one rank's measured compute and when
// each of its gradients became ready in backward, and from an alpha-beta model of the link
// (fitted to `dlhost comm-bench` figures, or named).
//
// The model is the DAG model of Shi et al.'s follow-up work ("A DAG Model of Synchronous
// Stochastic Gradient Descent in Distributed Deep Learning", ICPADS 2018): gradients are packed
// into buckets in the order backward produces them (as dlhost's runner and PyTorch DDP do); a
// bucket is ready when its last gradient is; its ring all-reduce costs
//     c(bytes) = 2 (N-1)/N * bytes * beta + 2 (N-1) * alpha
// (alpha: the latency of one message, beta: the time of one byte on the link). Without overlap
// every bucket goes after backward, one after the other: step = forward + backward + sum c +
// update. With overlap a bucket starts when it is ready and the link is free,
//     start_b = max(ready_b, end_{b-1}),   end_b = start_b + c_b,
// and only what runs past the end of backward is exposed: step = forward + backward +
// max(0, end_last - backward) + update. Each rank keeps the profiled per-rank mini-batch, so
// efficiency = compute / step (the share of a step spent computing; for strong scaling that is
// the speedup over one rank divided by N when compute scales with the batch).
//
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dlhost::project {

// One gradient as backward reported it.
struct Gradient {
  int32_t param = 0;
  std::string name;
  uint64_t bytes = 0;
  double ready_ms = 0;  // from the start of backward
};

// One rank's measured step, the input of a projection.
struct ComputeProfile {
  double forward_ms = 0, backward_ms = 0, update_ms = 0;
  std::vector<Gradient> gradients;  // any order; buckets follow reverse parameter order
  double compute_ms() const { return forward_ms + backward_ms + update_ms; }
};

// How an all-reduce moves its bytes, for the cost of N ranks from alpha and beta:
//   ring      c = 2 (N-1)/N * bytes * beta + 2 (N-1) * alpha  (the DAG model's; NCCL, Gloo)
//   binomial  c = 2 ceil(log2 N) * (bytes * beta + alpha)  (a binomial-tree reduce to one rank,
//             then a binomial broadcast, every round the whole message: Open MPI 4.1's
//             nonblocking in-place all-reduce, libnbc, left to its own choice; the `mpi` comm
//             selects libnbc's ring unless the environment says otherwise)
enum class Algorithm { kRing, kBinomial };
// "ring" / "binomial"; parse throws std::invalid_argument for another name.
const char* algorithm_name(Algorithm a);
Algorithm parse_algorithm(const std::string& name);

// A link: alpha (us per message) and beta (us per byte) of one point-to-point transfer.
struct Link {
  std::string name;
  double alpha_us = 0;
  double beta_us_per_byte = 0;
  Algorithm algorithm = Algorithm::kRing;
  std::string source;  // where the figures come from, for the output
};

// The ring all-reduce of `bytes` across `ranks` (0 for one rank), in ms.
double ring_allreduce_ms(uint64_t bytes, int ranks, const Link& link);
// The all-reduce of `bytes` across `ranks` by link.algorithm, in ms.
double allreduce_ms(uint64_t bytes, int ranks, const Link& link);

struct Bucket {
  std::vector<int32_t> params;
  uint64_t bytes = 0;
  double ready_ms = 0;  // its last gradient's, from the start of backward
  double comm_ms = 0;
  double start_ms = 0, end_ms = 0;  // with overlap, from the start of backward
};

// Buckets as the runner makes them: reverse parameter order, a new one when adding a gradient
// would pass `bucket_mb` MiB (a gradient larger than that is a bucket of its own). With
// `first_bucket_mb` >= 0 the first bucket's cap is that instead, as PyTorch DDP's (1 MiB).
std::vector<Bucket> make_buckets(const std::vector<Gradient>& gradients, double bucket_mb,
                                 double first_bucket_mb = -1);

struct Projection {
  int ranks = 1;
  std::string link;
  double compute_ms = 0;
  double comm_ms = 0;  // sum over buckets
  double step_ms_no_overlap = 0, step_ms_overlap = 0;
  double exposed_ms_overlap = 0;  // communication past the end of backward
  double efficiency_no_overlap = 1, efficiency_overlap = 1;
  std::vector<Bucket> buckets;  // with their overlapped schedule
};

Projection project(const ComputeProfile& profile, int ranks, const Link& link, double bucket_mb,
                   double first_bucket_mb = -1);

// All-reduce time against message size, fitted: time_us = a + b * bytes by least squares on
// relative residuals (each point weighted 1 / time^2, so a 1 KiB row counts as much as a 64 MiB
// one), a >= 0; then alpha and beta behind the line for the N ranks measured and the algorithm
// (ring: alpha = a / (2 (N-1)), beta = b * N / (2 (N-1)); binomial: both / (2 ceil(log2 N))).
// Projected on N ranks again, the link gives back the line itself, whatever the algorithm.
struct Fit {
  int ranks = 2;
  double a_us = 0, b_us_per_byte = 0;  // the fitted line
  Link link;                           // alpha and beta behind it
  double max_relative_error = 0;       // over the points
  int points = 0;
  // Where it was measured: "loopback" (every rank on this host), or the profile of the test
  // hosts' emulated link ("10gbe", "1gbe", "custom" with its bandwidth and latency).
  std::string interconnect = "loopback";
  double link_gbit = 0, link_latency_us = 0;
};
// `points`: (bytes, time_us). Throws std::invalid_argument with fewer than 2 distinct sizes or
// ranks < 2.
Fit fit_alpha_beta(const std::vector<std::pair<double, double>>& points, int ranks,
                   Algorithm algorithm = Algorithm::kRing);

// Whether `fit` was measured over the named interconnect itself (custom: the same bandwidth
// and latency).
bool measured_on(const Fit& fit, const std::string& name, double bandwidth_gbit = 0,
                 double latency_us = 0);

// A named interconnect: "loopback" (the fit as measured; needs one), "10gbe", "1gbe", "custom"
// (bandwidth in Gbit/s and latency in us as given). A fit measured over that very link (test
// hosts, measured_on) is taken as it is. Otherwise the nominal link over the fit: the fit's alpha
// plus the link's latency (link_profiles(): 10gbe 10 us, 1gbe 50 us; custom as given), beta the
// larger of the fit's and the wire's 8 bits / bandwidth (the slower of the host and the wire).
// Without a fit the link alone, with the given algorithm. Throws std::invalid_argument for an
// unknown name or a missing fit/bandwidth.
Link interconnect(const std::string& name, const Fit* measured, double bandwidth_gbit = 0,
                  double latency_us = 0, Algorithm algorithm = Algorithm::kRing);

}  // namespace dlhost::project
