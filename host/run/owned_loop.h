// owned_loop.h — a case on a backend whose tool owns its training loop (ABI 1.5,
// DLHOST_EXT_STEP_LOOP; issue 42: BigDL's optimize() runs every step itself, and once per step
// it costs many times the step). Such a case without a comm trains in ONE run_steps call over the
// warm-up and timed steps; the inputs of each step are still the host's (StepLoop::feed_step: the
// real-data mini-batch or the per-step upload, outside the tool's timing), and the step times are
// the tool's own clock: the record's timing.timer is "backend_clock", with the backend's lines
// saying what was timed (`clock`) and how the steps ran (`loop`). The phases (forward, backward,
// update) are not split by such a tool: their summaries are empty; a tool that times its steps'
// compute apart (BigDL's DistriOptimizer) gives it per timed step (the record's compute).
// Not thread-safe: one thread drives the backend.
#ifndef DLHOST_RUN_OWNED_LOOP_H
#define DLHOST_RUN_OWNED_LOOP_H

#include <chrono>
#include <string>

#include "core/plugin_registry.h"
#include "dlhost/dlhost_device.h"
#include "record/blocks.h"
#include "run/step_loop.h"

namespace dlhost {

// The backend's loop extension, or NULL (a plugin before ABI 1.5, or without it).
const dlhost_step_loop_ext* find_step_loop(const LoadedPlugin& backend);

class OwnedLoop {
 public:
  explicit OwnedLoop(const dlhost_step_loop_ext& ext) : ext_(ext) {}

  static constexpr const char* kTimer = "backend_clock";
  // The case's warm-up and timed steps in one call; the samples as train() gives them (step and
  // loss per timed step, the warm-up's losses), the phases empty. timed_out when the call ended
  // past the case's time limit; a non-finite loss throws INTERNAL as train() does.
  Samples train(StepLoop& loop, dlhost_model* model, const CaseParams& params,
                std::chrono::steady_clock::time_point case_start);
  // The timing block's owned-loop fields: the tool's clock and loop lines and the host clock
  // over the call.
  record::OwnedLoopFields describe() const;

 private:
  const dlhost_step_loop_ext& ext_;
  std::string clock_, loop_;
  double call_ms_ = 0;
};

}  // namespace dlhost

#endif  // DLHOST_RUN_OWNED_LOOP_H
