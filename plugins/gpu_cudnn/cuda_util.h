// cuda_util.h — what every part of the gpu_cudnn backend shares: CUDA, cuDNN and cuBLAS results
// turned into sdk::Error naming the call, the device probe (what this machine has, or why the
// backend cannot run here), and the model's device memory (allocated at compile, counted).
//
// Thread-safety: the probe is computed once under a once-guard; an Arena belongs to one model.
#ifndef DLHOST_GPU_CUDNN_CUDA_UTIL_H
#define DLHOST_GPU_CUDNN_CUDA_UTIL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/backend_kit.hpp"

namespace dlhost::gpu_cudnn {

// Throw sdk::Error (RESOURCE_EXHAUSTED for out-of-memory, else INTERNAL) naming `what`.
void check_cuda(cudaError_t result, const std::string& what);
void check_cudnn(cudnnStatus_t result, const std::string& what);
void check_cublas(cublasStatus_t result, const std::string& what);

// The devices of this machine as the CUDA runtime sees them, probed once.
struct Probe {
  int count = 0;       // 0 when unusable
  std::string reason;  // why there is no usable device (empty when count > 0)
  int driver_version = 0, runtime_version = 0;
};
const Probe& probe();

// "NVIDIA H200 (compute capability 9.0, 132 SMs, 1980 MHz SM, 3201 MHz memory)" and friends.
sdk::Device describe_device(int index);
// "cuDNN 9.19.0 (built 9.19.0), cuBLAS 13.1.0, CUDA runtime 13.0, driver 13.0".
std::string library_versions();

// Owners of the model's CUDA stream and library handles, so that a compile that throws half way
// gives back what it made (the destructor of a half-built object never runs; its members' do).
struct StreamDeleter {
  void operator()(cudaStream_t s) const;  // waits for the stream's work, then destroys it
};
struct CudnnDeleter {
  void operator()(cudnnHandle_t h) const { cudnnDestroy(h); }
};
struct CublasDeleter {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};
using StreamHandle = std::unique_ptr<CUstream_st, StreamDeleter>;
using CudnnHandle = std::unique_ptr<cudnnContext, CudnnDeleter>;
using CublasHandle = std::unique_ptr<cublasContext, CublasDeleter>;

// Device memory of one model: every buffer made at compile, zero-filled on the model's stream
// (the legacy default stream does not order with a non-blocking one: a fill there could land
// after compile work on the model's stream had written the buffer), freed with the model.
// Keeps in-use and peak bytes for the device memory extension.
class Arena {
 public:
  Arena() = default;
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  // The stream every fill is enqueued on; set before the first alloc.
  void use_stream(cudaStream_t stream) { stream_ = stream; }
  void* alloc(uint64_t bytes, const std::string& what);
  template <class T>
  T* alloc_n(int64_t count, const std::string& what) {
    return static_cast<T*>(alloc(static_cast<uint64_t>(count) * sizeof(T), what));
  }
  // A scratch buffer given back before the model runs (autotuning's workspace).
  void release(void* p);
  uint64_t in_use() const { return in_use_; }
  uint64_t peak() const { return peak_; }

 private:
  struct Block {
    void* ptr;
    uint64_t bytes;
  };
  std::vector<Block> blocks_;
  cudaStream_t stream_ = nullptr;
  uint64_t in_use_ = 0, peak_ = 0;
};

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_CUDA_UTIL_H
