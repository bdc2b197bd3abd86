// matmul_peak.h — the `matmul_peak` case key: one large matrix product timed through the case's
// own backend (same device, threads and precision options), the denominator of the model FLOP
// utilisation that `dlhost report` shows. Opt-in: it costs a compile and a few large GEMMs.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "dlhost/dlhost.h"

namespace dlhost {

struct LoadedPlugin;

// A one-node graph: x [size, size] -> FC of `size` outputs without bias -> MSE against a target
// (the graph needs a loss). Compiled with `options`, weights and inputs written, `warmup`
// untimed forward passes, then `iterations` timed ones on the host clock with a synchronize
// after each. The record's block: m, n, k, pass ("forward"), gemm_flops (2 m n k; the MSE's
// O(m n) work is timed but not counted), iterations, median_ms, gflops (gemm_flops / median);
// or m, n, k, pass and `error` (what went wrong) when it could not be measured: the case stays
// as its timed steps made it. `deadline`: the end of the case's time (its timeout from its start);
// the peak starts no compile and no pass that would end after it ("matmul_peak: not measured,
// the case's time ran out ..."), so that a slow peak never turns a finished case into a TIMEOUT
// that loses its timing. A call already under way is not cut: one pass may end past the deadline
// by its own length, within the grace the parent gives a case before it kills it.
nlohmann::ordered_json measure_matmul_peak(const LoadedPlugin& backend, int32_t device,
                                           const dlhost_options& options, int64_t size,
                                           int64_t warmup, int64_t iterations,
                                           std::chrono::steady_clock::time_point deadline);

}  // namespace dlhost
