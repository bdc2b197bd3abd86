// conv_choice.h — picking one convolution algorithm per direction from cuDNN's ranked list
// (heuristic or timed), kept apart from the cuDNN calls so that the rule can be tested without a
// device. The choice keeps everything the ranking measured the algorithm under: its number, its
// workspace and its math type. cuDNN ranks under the descriptor's math type but may list an
// algorithm that runs under another (a tensor-op descriptor lists FMA kernels too); running it
// under a different math type than it was ranked with runs another kernel, with other workspace
// needs, so layers_conv.cpp sets each direction's own descriptor to the chosen math type.
#ifndef DLHOST_GPU_CUDNN_CONV_CHOICE_H
#define DLHOST_GPU_CUDNN_CONV_CHOICE_H

#include <cudnn.h>

#include <cstdint>

namespace dlhost::gpu_cudnn {

struct ConvChoice {
  int algo = 0;
  size_t memory = 0;                      // workspace bytes the ranking measured
  cudnnMathType_t math = CUDNN_FMA_MATH;  // the math type the algorithm was ranked under
};

inline bool uses_tensor_cores(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The index of the first algorithm of `perf[0, n)` that succeeded, fits `workspace_limit` and,
// unless `allow_tensor_cores`, runs without them (strict fp32: TF32 products are not fp32); -1
// when none does.
template <class Perf>
int pick_algorithm(const Perf* perf, int n, uint64_t workspace_limit, bool allow_tensor_cores) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > workspace_limit) continue;
    if (!allow_tensor_cores && uses_tensor_cores(perf[i].mathType)) continue;
    return i;
  }
  return -1;
}

// What runs `perf`: under the math type it was ranked with, except that strict fp32 stays on
// FMA kernels whatever the ranking says (CUDNN_DEFAULT_MATH permits TF32 on Ampere and newer).
template <class Perf>
ConvChoice choice_of(const Perf& perf, bool allow_tensor_cores) {
  return {static_cast<int>(perf.algo), perf.memory,
          allow_tensor_cores ? perf.mathType : CUDNN_FMA_MATH};
}

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_CONV_CHOICE_H
