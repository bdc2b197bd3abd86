// data_parallel.h — synchronous data-parallel SGD across the ranks of a case, in the host:
// weights broadcast from rank 0 once, then every step the gradients averaged across ranks.
//
// Gradients are grouped into buckets (about `bucket_mb` each, in the order backward produces
// them, as PyTorch DDP does). With overlap, a bucket is packed and its all-reduce started the
// moment backward reports its last gradient ready, and pending all-reduces are driven forward
// (tested) at every later report, so communication runs under the rest of backward; without
// overlap every bucket starts after backward. finish() waits for all and unpacks the averaged
// gradients for the update. Buffers are allocated once.
//
// Not thread-safe: used from the one thread that drives the backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/host_api.h"
#include "dlhost/dlhost.h"

namespace dlhost {

class CommSession;

struct DataParallelStats {
  double exposed_ms = 0;    // from the end of backward until every gradient is averaged
  double allreduce_ms = 0;  // from the first all-reduce started until the last one finished
  uint64_t bytes = 0;       // gradient bytes all-reduced per step (per rank)
  int buckets = 0;
};

class DataParallel {
 public:
  // `comm` outlives this object; the backend's model is compiled.
  DataParallel(const CommSession& comm, const dlhost_backend_api* backend, dlhost_model* model,
               int32_t num_params, double bucket_mb, bool overlap);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Rank 0's parameter values to every rank.
  void broadcast_parameters();

  // The callback to pass to backward (NULL table when there is one rank).
  const dlhost_grad_ready* grad_ready() const { return &ready_; }
  // Call right after backward returns: starts what is left, waits, unpacks. Fills `stats`.
  void finish(DataParallelStats* stats);

  // Collectives on small host arrays for the figures (blocking).
  void all_reduce_max(std::vector<double>& values);
  void all_reduce_sum(std::vector<double>& values);
  void barrier();

 private:
  struct Bucket {
    std::vector<int32_t> params;  // in the order they become ready
    std::vector<dlhost_buffer> grads;
    std::vector<float> packed;
    int ready = 0;
    dlhost_request* request = nullptr;
    bool started = false, done = false;
  };
  static void on_ready(void* self, int32_t param);
  void start(Bucket& b);
  void progress();
  void wait(dlhost_request* r);

  const CommSession& session_;
  const dlhost_comm_api* comm_api_;
  dlhost_comm* comm_;
  const dlhost_backend_api* backend_;
  dlhost_model* model_;
  bool overlap_;
  std::vector<Bucket> buckets_;
  std::vector<int32_t> bucket_of_;  // param -> bucket
  dlhost_grad_ready ready_{};
  uint64_t bytes_ = 0;
  std::chrono::steady_clock::time_point first_start_;
  bool any_started_ = false;
};

}  // namespace dlhost
