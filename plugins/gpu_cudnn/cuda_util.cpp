// cuda_util.cpp — error conversion, the device probe and the model's device memory (see
// cuda_util.h).
#include "cuda_util.h"

#include <library_types.h>

#include <mutex>

namespace dlhost::gpu_cudnn {

void check_cuda(cudaError_t result, const std::string& what) {
  if (result == cudaSuccess) return;
  const std::string message = "gpu_cudnn: " + what + ": " + cudaGetErrorName(result) + " (" +
                              cudaGetErrorString(result) + ")";
  if (result == cudaErrorMemoryAllocation) sdk::fail(DLHOST_CODE_RESOURCE_EXHAUSTED, message);
  sdk::fail(DLHOST_CODE_INTERNAL, message);
}

void check_cudnn(cudnnStatus_t result, const std::string& what) {
  if (result == CUDNN_STATUS_SUCCESS) return;
  const std::string message = "gpu_cudnn: " + what + ": " + cudnnGetErrorString(result);
  if (result == CUDNN_STATUS_NOT_SUPPORTED) sdk::unimplemented(message);
  if (result == CUDNN_STATUS_ALLOC_FAILED) sdk::fail(DLHOST_CODE_RESOURCE_EXHAUSTED, message);
  sdk::fail(DLHOST_CODE_INTERNAL, message);
}

void check_cublas(cublasStatus_t result, const std::string& what) {
  if (result == CUBLAS_STATUS_SUCCESS) return;
  const std::string message = "gpu_cudnn: " + what + ": " + cublasGetStatusString(result);
  if (result == CUBLAS_STATUS_ALLOC_FAILED) sdk::fail(DLHOST_CODE_RESOURCE_EXHAUSTED, message);
  sdk::fail(DLHOST_CODE_INTERNAL, message);
}

namespace {

// This build carries sm_90 machine code and compute_90 PTX: older devices cannot run it.
constexpr int kMinMajor = 9;

std::string version_text(int v) {  // CUDA's 1000 * major + 10 * minor
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

Probe make_probe() {
  Probe p;
  cudaDriverGetVersion(&p.driver_version);
  cudaRuntimeGetVersion(&p.runtime_version);
  int count = 0;  // cudaGetDeviceCount leaves it unwritten when it fails (no driver)
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count <= 0) {
    if (p.driver_version == 0)
      p.reason = "no CUDA driver on this machine (libcuda.so.1 not found): no device";
    else if (e != cudaSuccess)
      p.reason = std::string("no usable CUDA device: cudaGetDeviceCount: ") + cudaGetErrorName(e) +
                 " (" + cudaGetErrorString(e) + "), driver " + version_text(p.driver_version);
    else
      p.reason = "no CUDA device on this machine (driver " + version_text(p.driver_version) + ")";
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return p;
  }
  int major = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
             "cudaDeviceGetAttribute");
  if (major < kMinMajor) {
    p.reason = "device 0 has compute capability " + std::to_string(major) +
               ".x; this build targets sm_90 and newer";
    return p;
  }
  p.count = count;
  return p;
}

int attribute(cudaDeviceAttr attr, int device) {
  int v = 0;
  check_cuda(cudaDeviceGetAttribute(&v, attr, device), "cudaDeviceGetAttribute");
  return v;
}

}  // namespace

const Probe& probe() {
  static Probe p;
  static std::once_flag once;
  std::call_once(once, [] { p = make_probe(); });
  return p;
}

sdk::Device describe_device(int index) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  const int sm_mhz = attribute(cudaDevAttrClockRate, index) / 1000;
  const int mem_mhz = attribute(cudaDevAttrMemoryClockRate, index) / 1000;
  sdk::Device d;
  d.kind = DLHOST_DEVICE_GPU;
  d.name = "cuda" + std::to_string(index);
  d.model = std::string(prop.name) + " (compute capability " + std::to_string(prop.major) + "." +
            std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) +
            " SMs, " + std::to_string(sm_mhz) + " MHz SM, " + std::to_string(mem_mhz) +
            " MHz memory, " + std::to_string(prop.l2CacheSize >> 20) + " MiB L2)";
  d.cores = prop.multiProcessorCount;
  d.isa = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  d.memory_bytes = prop.totalGlobalMem;
  return d;
}

std::string library_versions() {
  const size_t v = cudnnGetVersion();  // 10000 * major + 100 * minor + patch since cuDNN 9
  auto cudnn_text = [](size_t x) {
    return std::to_string(x / 10000) + "." + std::to_string(x % 10000 / 100) + "." +
           std::to_string(x % 100);
  };
  int bmaj = 0, bmin = 0, bpatch = 0;
  cublasGetProperty(MAJOR_VERSION, &bmaj);
  cublasGetProperty(MINOR_VERSION, &bmin);
  cublasGetProperty(PATCH_LEVEL, &bpatch);
  const Probe& p = probe();
  return "cuDNN " + cudnn_text(v) + " (built " + cudnn_text(CUDNN_VERSION) + "), cuBLAS " +
         std::to_string(bmaj) + "." + std::to_string(bmin) + "." + std::to_string(bpatch) +
         ", CUDA runtime " + version_text(p.runtime_version) + ", driver " +
         version_text(p.driver_version);
}

void StreamDeleter::operator()(cudaStream_t s) const {
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
}

Arena::~Arena() {
  for (const Block& b : blocks_) cudaFree(b.ptr);
}

void* Arena::alloc(uint64_t bytes, const std::string& what) {
  if (stream_ == nullptr)
    sdk::fail(DLHOST_CODE_INTERNAL, "gpu_cudnn: arena used before its stream was set");
  void* p = nullptr;
  const uint64_t size = bytes == 0 ? 256 : bytes;
  check_cuda(cudaMalloc(&p, size), "cudaMalloc " + std::to_string(size) + " bytes for " + what);
  blocks_.push_back({p, size});
  check_cuda(cudaMemsetAsync(p, 0, size, stream_), "cudaMemsetAsync for " + what);
  in_use_ += size;
  if (in_use_ > peak_) peak_ = in_use_;
  return p;
}

void Arena::release(void* p) {
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i].ptr != p) continue;
    cudaFree(p);
    in_use_ -= blocks_[i].bytes;
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

}  // namespace dlhost::gpu_cudnn
