// matmul_peak.cpp — see matmul_peak.h. Forward only: a backend may skip the data gradient of a
// layer fed by a graph input, so a backward pass's GEMM count is not known from outside.
#include "run/matmul_peak.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "core/stats.h"
#include "data/synthetic.h"
#include "dlhost/network_kit.hpp"

namespace dlhost {

namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;

// Raises the peak's error when `next_ms` more from now would end past the deadline.
void check_time(Clock::time_point deadline, double next_ms, const std::string& before) {
  if (Clock::now() + std::chrono::duration_cast<Clock::duration>(Ms(next_ms)) <= deadline) return;
  throw std::runtime_error("matmul_peak: not measured, the case's time ran out before " + before);
}

nlohmann::ordered_json measure(const LoadedPlugin& backend, int32_t device,
                               const dlhost_options& options, int64_t size, int64_t warmup,
                               int64_t iterations, Clock::time_point deadline) {
  check_time(deadline, 0, "its compile");
  GraphBuilder b("matmul_peak", size);
  const int32_t x = b.input("x", DLHOST_DTYPE_F32, {size});
  const int32_t target = b.input("target", DLHOST_DTYPE_F32, {size});
  dlhost_fc_attrs fc{};
  fc.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE;
  fc.out_features = size;
  fc.has_bias = 0;
  fc.batch_dims = 1;
  b.mse_loss("loss", b.fc("matmul", x, fc), target);
  const std::unique_ptr<Graph> graph = b.finish();

  ContextHandle context = create_context(backend, device, options);
  ModelHandle model =
      compile_model(backend, context.get(), graph->view(), sdk::sgd_optimizer(0.0f), options);
  const dlhost_backend_api* api = backend.table->backend;
  constexpr uint64_t kSeed = 42;
  for (int32_t i = 0; i < graph->num_params(); ++i) {
    const std::vector<float> w = initial_param(*graph, kSeed, i);
    check_status(
        api->write_param(model.get(), i, DLHOST_PARAM_VALUE, w.data(), graph->param_bytes(i)),
        "matmul_peak write_param");
  }
  for (const auto& in : synthetic_inputs(*graph, kSeed))
    check_status(api->set_input(model.get(), in.tensor, in.bytes.data(), in.bytes.size()),
                 "matmul_peak set_input");
  check_status(api->synchronize(model.get()), "matmul_peak synchronize");

  std::vector<double> ms;
  double longest = 0;  // the next pass is taken to last as long as the longest so far
  for (int64_t i = 0; i < warmup + iterations; ++i) {
    check_time(
        deadline, longest,
        "forward pass " + std::to_string(i + 1) + " of " + std::to_string(warmup + iterations) +
            (i > 0 ? " (the longest took " + std::to_string(static_cast<int64_t>(longest)) + " ms)"
                   : std::string()));
    const auto t0 = Clock::now();
    check_status(api->forward(model.get()), "matmul_peak forward");
    check_status(api->synchronize(model.get()), "matmul_peak synchronize");
    const Ms took = Clock::now() - t0;
    longest = std::max(longest, took.count());
    if (i >= warmup) ms.push_back(took.count());
  }
  const double flops =
      2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  const double median = summarize(ms).median;
  return nlohmann::ordered_json{
      {"m", size},           {"n", size},
      {"k", size},           {"pass", "forward"},
      {"gemm_flops", flops}, {"iterations", iterations},
      {"median_ms", median}, {"gflops", median > 0 ? flops / median / 1e6 : 0.0}};
}

}  // namespace

nlohmann::ordered_json measure_matmul_peak(const LoadedPlugin& backend, int32_t device,
                                           const dlhost_options& options, int64_t size,
                                           int64_t warmup, int64_t iterations,
                                           Clock::time_point deadline) {
  try {
    return measure(backend, device, options, size, warmup, iterations, deadline);
  } catch (const std::exception& e) {
    // The case's own steps were timed already: a peak that cannot be measured (a backend
    // without the loss op, no memory for the matrices, no time left) is said in its block, not
    // the case's end.
    return nlohmann::ordered_json{
        {"m", size}, {"n", size}, {"k", size}, {"pass", "forward"}, {"error", e.what()}};
  }
}

}  // namespace dlhost
