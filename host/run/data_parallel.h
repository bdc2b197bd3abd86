// data_parallel.h — synchronous data-parallel SGD across the ranks of a case, in the host:
// weights broadcast from rank 0 once, then every step the gradients averaged across ranks.
//
// Gradients are grouped into buckets (about `bucket_mb` each, one dtype each, in the order
// backward produces them, as PyTorch DDP does). With overlap, a bucket's all-reduce starts the
// moment backward reports its last gradient ready, and pending all-reduces are driven forward
// (tested) at every later report, so communication runs under the rest of backward; without
// overlap every bucket starts after backward. finish() completes them and puts the averaged
// gradients back for the update. Buffers are allocated once. Where the gradients live decides
// how a bucket moves (GradientPath); dtypes and sizes come from the backend's buffers:
// - host gradients, host comm (cpu backends, MPI): packed with memcpy into a host bucket;
// - device gradients, device comm (ABI 1.2): copied on the backend's stream into a flat device
//   arena per bucket (copy_device), all-reduced by the comm ordered on that same stream, copied
//   back on the stream; the host never touches device memory nor waits inside a step;
// - device gradients, host-only comm: staged through host memory with copies ordered on the
//   stream (copy_to_host waits for the gradient's work; nothing is read before it).
// A gradient is used only after grad_ready named it, and only through work ordered after the
// backward work that produced it.
//
// The figures' small collectives go through a ControlPlane (a host comm, or the store).
// Not thread-safe: used from the one thread that drives the backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control_plane/control_plane.h"
#include "core/device.h"
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

enum class GradientPath {
  kHost,    // host gradients, host comm
  kDevice,  // device gradients, device comm on the backend's stream
  kStaged   // device gradients through host memory, host comm
};
const char* gradient_path_name(GradientPath path);

// A parameter's value (grad false) or gradient (grad true) buffer, as the backend describes it.
dlhost_buffer param_buffer(const dlhost_backend_api* api, dlhost_model* model, int32_t param,
                           bool grad);

// The suite's `comm_memory`: which path device gradients may take. kDevice asks for collectives
// on device memory (NCCL, a CUDA-aware MPI) and makes a comm without it a SKIP, not a silent
// staging; kHost stages through host memory even where the comm takes device memory.
enum class GradientMemory { kAuto, kDevice, kHost };
GradientMemory gradient_memory_from(const std::string& suite_value);  // "auto" | "device" | "host"

// What DataParallel drives: the rank's comm, backend, context and compiled model. All outlive it.
struct DataParallelTarget {
  const CommSession* comm = nullptr;
  bool comm_on_stream = false;  // the comm was handed the model's stream (dlhost_comm_stream_ext)
  const BackendDevice* backend = nullptr;
  dlhost_context* context = nullptr;
  dlhost_model* model = nullptr;
  int32_t num_params = 0;
  GradientMemory memory = GradientMemory::kAuto;
};

class DataParallel {
 public:
  DataParallel(const DataParallelTarget& target, ControlPlane& control, double bucket_mb,
               bool overlap);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  GradientPath path() const { return path_; }

  // Rank 0's parameter values to every rank.
  void broadcast_parameters();

  // The callback to pass to backward.
  const dlhost_grad_ready* grad_ready() const { return &ready_; }
  // Call right after backward returns: starts what is left, completes, puts the averages back.
  // Fills `stats` (on the device path, allreduce_ms only after settle()).
  void finish(DataParallelStats* stats);
  // After the step's work has run (the step's synchronize): the device-timed figures.
  void settle(DataParallelStats* stats);

  // Collectives on small host arrays for the figures (blocking).
  void all_reduce_max(std::vector<double>& values);
  void all_reduce_sum(std::vector<double>& values);
  void barrier();

 private:
  struct Bucket {
    std::vector<int32_t> params;  // in the order they become ready
    std::vector<dlhost_buffer> grads;
    int32_t dtype = DLHOST_DTYPE_F32;
    uint64_t bytes = 0;
    std::vector<unsigned char> host;      // kHost, kStaged
    std::unique_ptr<DeviceBuffer> arena;  // kDevice
    int ready = 0;
    dlhost_request* request = nullptr;
    bool started = false, done = false;
    uint64_t count() const { return bytes / sdk::dtype_size(dtype); }
  };
  static void on_ready(void* self, int32_t param);
  void add_gradient(int32_t param, const dlhost_buffer& grad, uint64_t cap);
  void allocate();
  void start(Bucket& b);
  void pack(Bucket& b);
  void unpack(Bucket& b);
  void progress();
  void broadcast_value(const dlhost_buffer& value, int32_t param);

  const CommSession& session_;
  const dlhost_comm_api* comm_api_;
  dlhost_comm* comm_;
  const BackendDevice& backend_;
  dlhost_context* context_;
  dlhost_model* model_;
  ControlPlane& control_;
  bool overlap_;
  bool comm_on_stream_;
  GradientPath path_ = GradientPath::kHost;
  std::vector<Bucket> buckets_;
  std::vector<int32_t> bucket_of_;  // param -> bucket
  dlhost_grad_ready ready_{};
  uint64_t bytes_ = 0;
  std::chrono::steady_clock::time_point first_start_;
  bool any_started_ = false;
  // kDevice with events: the all-reduce's device time, from the first pack to the last unpack.
  std::optional<DeviceEvent> first_event_, last_event_;
};

}  // namespace dlhost
