// owned_loop.cpp — see owned_loop.h.
#include "run/owned_loop.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/host_api.h"
#include "suite/case_params.h"

namespace dlhost {

namespace {

using Clock = std::chrono::steady_clock;

// The feed the backend calls before each step: that step's inputs, as the host's loop sets them.
dlhost_status* feed_step(void* user, int64_t) {
  return guard_status([&] { static_cast<StepLoop*>(user)->feed_step(); });
}

}  // namespace

const dlhost_step_loop_ext* find_step_loop(const LoadedPlugin& backend) {
  if (backend.table == nullptr || backend.speaks_minor < 5) return nullptr;
  // The chain was checked for cycles and length when the plugin loaded (resolve_extensions).
  const auto* e = reinterpret_cast<const dlhost_step_loop_ext*>(
      dlhost_find_extension(backend.table->extensions, DLHOST_EXT_STEP_LOOP));
  return e != nullptr && e->struct_size >= DLHOST_STEP_LOOP_EXT_STRUCT_SIZE ? e : nullptr;
}

Samples OwnedLoop::train(StepLoop& loop, dlhost_model* model, const CaseParams& p,
                         Clock::time_point case_start) {
  const int64_t warmup = p.warmup;
  const int64_t iterations = p.iterations;
  std::vector<double> step_ms(static_cast<size_t>(iterations));
  std::vector<float> loss(static_cast<size_t>(warmup + iterations));
  std::vector<double> compute(static_cast<size_t>(iterations), std::nan(""));
  dlhost_owned_steps steps{};
  steps.struct_size = DLHOST_OWNED_STEPS_STRUCT_SIZE;
  steps.warmup = warmup;
  steps.iterations = iterations;
  steps.feed = loop.feeds() ? feed_step : nullptr;
  steps.feed_user = &loop;
  steps.step_ms = step_ms.data();
  steps.loss = loss.data();
  steps.compute_ms = compute.data();
  dlhost_owned_steps_info info{};
  info.struct_size = DLHOST_OWNED_STEPS_INFO_STRUCT_SIZE;

  const auto t0 = Clock::now();
  check_status(ext_.run_steps(model, &steps, &info), "run_steps");
  const auto t1 = Clock::now();
  call_ms_ = std::chrono::duration<double, std::milli>(t1 - t0).count();
  clock_ = info.clock != nullptr ? info.clock : "";
  loop_ = info.loop != nullptr ? info.loop : "";

  Samples s;
  s.warmup_loss.assign(loss.begin(), loss.begin() + warmup);
  s.step = step_ms;
  // The tool's own split of its steps, where it wrote one for every timed step.
  if (std::all_of(compute.begin(), compute.end(), [](double c) { return std::isfinite(c); }))
    s.compute = compute;
  for (int64_t i = 0; i < iterations; ++i) {
    const float l = loss[static_cast<size_t>(warmup + i)];
    if (!std::isfinite(l))
      throw Error(DLHOST_CODE_INTERNAL,
                  "loss is " + std::to_string(l) + " at timed iteration " + std::to_string(i));
    s.loss.push_back(l);
    s.allreduce.push_back(0.0);
  }
  loop.sample_memory(s.memory);
  s.timed_out = std::chrono::duration<double>(t1 - case_start).count() > p.timeout;
  return s;
}

record::OwnedLoopFields OwnedLoop::describe() const { return {clock_, loop_, call_ms_}; }

}  // namespace dlhost
