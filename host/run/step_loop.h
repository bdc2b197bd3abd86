// step_loop.h — the training steps of one case and how they are timed: warm-up, then timed steps
// of [upload,] forward, backward (gradients all-reduced as they become ready), the rest of the
// all-reduce, and update.
//
// With real data (DataFeed), every step first takes its mini-batch from the input pipeline: the
// time it waited is the step's "data" phase (host clock, inside the step), then uploads it.
//
// Two timers. Where the backend exports a stream and events (ABI 1.2), an event is recorded
// between the phases and the step ends with ONE synchronize; the phases are the device times
// between events, so a GPU is never drained mid-step. Else ("host_clock", every 1.1 backend) the
// host clock with a synchronize after each phase. Either way the host clock around the whole
// step (wall_step) is kept, and the device memory statistics are sampled after every step,
// outside the timers, for the peak over the run.
//
// Not thread-safe: one thread drives the backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "core/device.h"
#include "run/data_feed.h"
#include "run/data_parallel.h"
#include "run/runner.h"
#include "suite/case_params.h"

namespace dlhost {

// A per-step input (`input: upload`): the batch in staging memory, copied to the device at the
// start of every step: with copy_from_host into the tensor's device buffer where the backend
// exports it (ABI 1.2), else with set_input.
struct Upload {
  int32_t tensor = -1;
  size_t bytes = 0;
  std::unique_ptr<StagingMemory> memory;
  std::optional<dlhost_buffer> device;  // the tensor's device buffer
};

// The largest figures of the backend's memory seen after any step.
struct MemoryFigures {
  uint64_t in_use = 0, peak = 0;  // the last in use, the largest peak (memory_in_use or the ext)
  std::optional<dlhost_memory_stats> device;  // the last statistics (with the ext), peak maxed
};

// Per timed step, in ms (allreduce: from the first bucket started to the last one done).
struct Samples {
  std::vector<double> step, forward, backward, exposed_comm, update, allreduce, compute, loss;
  std::vector<double> upload, wall_step;
  std::vector<double> data;  // real data: the wait for the mini-batch (empty when synthetic)
  std::vector<double> warmup_loss;
  // When each gradient became ready (grad_ready), in ms from the start of backward, host clock
  // only: the order of the first timed step, and per position the samples over timed steps.
  std::vector<int32_t> grad_order;
  std::vector<std::vector<double>> grad_ready_ms;
  DataParallelStats dp;
  MemoryFigures memory;
  bool timed_out = false;
};

class StepLoop {
 public:
  // Events are used when `backend` has them; `uploads` may be empty (resident inputs); `feed`
  // is NULL for synthetic data.
  StepLoop(const BackendDevice& backend, dlhost_context* context, dlhost_model* model,
           DataParallel* dp, const std::vector<Upload>& uploads, const RunContext& ctx,
           DataFeed* feed = nullptr);
  ~StepLoop();
  StepLoop(const StepLoop&) = delete;
  StepLoop& operator=(const StepLoop&) = delete;

  const char* timer() const { return events_.empty() ? "host_clock" : "device_events"; }
  float warmup_step();
  void timed_step(Samples& s);
  void sample_memory(MemoryFigures& m);
  // A tool that owns its loop (owned_loop.h): true when every step has inputs of its own (real
  // data or per-step uploads), which feed_step sets for the next step, outside its timing.
  bool feeds() const { return uploads(); }
  void feed_step() {
    take_batch();
    upload();
  }

 private:
  void upload();
  double take_batch();  // ms waited for the next real-data mini-batch; 0 when synthetic
  bool uploads() const { return !uploads_.empty() || feed_ != nullptr; }
  void clock_step(Samples& s);
  void event_step(Samples& s);
  void synchronized(dlhost_status* status, const char* what);
  float loss();
  void progress(int phase);
  static void on_grad_ready(void* self, int32_t param);

  const BackendDevice& backend_;
  const dlhost_backend_api* api_;
  dlhost_context* context_;
  dlhost_model* m_;
  DataParallel* dp_;
  const dlhost_grad_ready* ready_;  // data parallelism's, or NULL
  // The callback backward gets on the host clock: notes the time, then calls `ready_`.
  dlhost_grad_ready traced_ready_{};
  Samples* trace_ = nullptr;  // the timed step's samples while its backward runs
  std::chrono::steady_clock::time_point backward_start_;
  size_t traced_ = 0;  // gradients noted in this step
  const std::vector<Upload>& uploads_;
  const RunContext& ctx_;
  DataFeed* feed_;
  std::vector<DeviceEvent> events_;  // empty: host clock
  int64_t step_ = 0;
};

// Warm-up then timed steps; every rank stops at the same step when the case runs out of time.
Samples train(StepLoop& loop, DataParallel* dp, const CaseParams& params,
              std::chrono::steady_clock::time_point case_start);

}  // namespace dlhost
