// dropout_mask.cuh — the device twin of dlhost_dropout_keep (dlhost_graph.h), which is a
// host-only function: the same splitmix64 chain over (seed, node, step, index), so the masks of
// dropout and of attention's weights match every other backend. Included by the .cu files only.
#ifndef DLHOST_GPU_CUDNN_DROPOUT_MASK_CUH
#define DLHOST_GPU_CUDNN_DROPOUT_MASK_CUH

#include <cstdint>

namespace dlhost::gpu_cudnn {

__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
// The part of the chain that depends on (seed, node, step) alone, computed once per launch.
__host__ __device__ inline uint64_t keep_base(uint64_t seed, uint32_t node, uint64_t step) {
  return mix64(mix64(seed ^ (static_cast<uint64_t>(node) << 32)) ^ step);
}
__host__ __device__ inline bool keep(uint64_t base, uint64_t index, float p) {
  return static_cast<float>(mix64(base ^ index) >> 40) * (1.0f / 16777216.0f) >= p;
}

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_DROPOUT_MASK_CUH
