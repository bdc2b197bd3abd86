// extensions.cpp — gpu_cudnn's device virtuals (see extensions.h): the model's CUDA stream,
// cudaEvent_t events on it, device memory statistics and copies, and the context-level buffers.
// The kit checks the handles and out-parameters and maps exceptions to statuses; every function
// here makes the model's (or context's) device current first, since that is per host thread.
#include "extensions.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

namespace dlhost::gpu_cudnn {
namespace {

// The device range [offset, offset + bytes) of `b`: OUT_OF_RANGE outside it.
char* device_range(const char* call, const dlhost_buffer& b, uint64_t offset, uint64_t bytes) {
  if (b.data == nullptr)
    sdk::invalid(std::string("gpu_cudnn: ") + call + ": the buffer's data is NULL");
  if (offset > b.bytes || bytes > b.bytes - offset)
    sdk::fail(DLHOST_CODE_OUT_OF_RANGE, std::string("gpu_cudnn: ") + call + ": " +
                                            std::to_string(bytes) + " bytes at offset " +
                                            std::to_string(offset) + " outside a buffer of " +
                                            std::to_string(b.bytes) + " bytes");
  return static_cast<char*>(b.data) + offset;
}

// A cudaEvent_t recorded on the model's stream.
class CudaEvent final : public sdk::Event {
 public:
  explicit CudaEvent(const Model& model) : model_(model) {
    check_cuda(cudaSetDevice(model.device()), "cudaSetDevice");
    check_cuda(cudaEventCreate(&event_), "cudaEventCreate");
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  void record() override {
    check_cuda(cudaEventRecord(event_, model_.stream()), "cudaEventRecord");
    recorded_ = true;
  }
  bool done() override {
    const cudaError_t r = cudaEventQuery(event_);
    if (r != cudaErrorNotReady) check_cuda(r, "cudaEventQuery");
    return r == cudaSuccess;
  }
  void synchronize() override { check_cuda(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
  double elapsed_ms_since(sdk::Event& start) override {
    auto& from = static_cast<CudaEvent&>(start);  // the kit hands back events this model made
    if (!from.recorded_ || !recorded_)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "gpu_cudnn: event_elapsed_ms: never recorded");
    float ms = 0;
    const cudaError_t r = cudaEventElapsedTime(&ms, from.event_, event_);
    if (r == cudaErrorNotReady)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "gpu_cudnn: event_elapsed_ms: not finished");
    check_cuda(r, "cudaEventElapsedTime");
    return ms;
  }

 private:
  const Model& model_;
  cudaEvent_t event_ = nullptr;
  bool recorded_ = false;
};

// On the model's stream and waited for (the caller's host memory may be pageable and is
// borrowed for the call).
void copy_on_stream(const Model& m, void* dst, const void* src, uint64_t bytes,
                    cudaMemcpyKind kind) {
  check_cuda(cudaSetDevice(m.device()), "cudaSetDevice");
  check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, m.stream()), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(m.stream()), "cudaStreamSynchronize");
}

}  // namespace

// --- the model's device virtuals -----------------------------------------------------------------

dlhost_stream Model::model_stream() {
  return {DLHOST_STREAM_STRUCT_SIZE, DLHOST_STREAM_CUDA, device(), stream()};
}

std::unique_ptr<sdk::Event> Model::create_event() { return std::make_unique<CudaEvent>(*this); }

dlhost_memory_stats Model::memory_stats() {
  size_t free = 0, total = 0;
  check_cuda(cudaSetDevice(device()), "cudaSetDevice");
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  auto s = sdk::make_struct<dlhost_memory_stats>(DLHOST_MEMORY_STATS_STRUCT_SIZE);
  s.in_use_bytes = arena_.in_use();
  s.peak_bytes = arena_.peak();
  s.free_bytes = free;
  s.total_bytes = total;
  return s;
}

void Model::copy_to_host(const dlhost_buffer& src, uint64_t offset, void* dst, uint64_t bytes) {
  copy_on_stream(*this, dst, device_range("copy_to_host", src, offset, bytes), bytes,
                 cudaMemcpyDeviceToHost);
}

void Model::copy_from_host(const void* src, const dlhost_buffer& dst, uint64_t offset,
                           uint64_t bytes) {
  copy_on_stream(*this, device_range("copy_from_host", dst, offset, bytes), src, bytes,
                 cudaMemcpyHostToDevice);
}

// Ordered on the model's stream and not waited for: the host packs gradients into its all-reduce
// arena between backward and the collective, both on that stream.
void Model::copy_device(const dlhost_buffer& src, uint64_t src_offset, const dlhost_buffer& dst,
                        uint64_t dst_offset, uint64_t bytes) {
  const char* from = device_range("copy_device", src, src_offset, bytes);
  char* to = device_range("copy_device", dst, dst_offset, bytes);
  if (from < to + bytes && to < from + bytes)
    sdk::invalid("gpu_cudnn: copy_device: source and destination overlap");
  if (bytes == 0) return;
  check_cuda(cudaSetDevice(device()), "cudaSetDevice");
  check_cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream()),
             "cudaMemcpyAsync device to device");
}

// --- the context's -------------------------------------------------------------------------------

dlhost_buffer alloc_device_buffer(const Context& context, uint64_t bytes, int32_t dtype) {
  check_cuda(cudaSetDevice(context.settings.device), "cudaSetDevice");
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc for buffer_alloc");
  auto b = sdk::make_struct<dlhost_buffer>(DLHOST_BUFFER_STRUCT_SIZE);
  sdk::fill_buffer(&b, p, bytes, dtype, DLHOST_MEMORY_DEVICE, context.settings.device);
  return b;
}

void free_device_buffer(const Context& context, const dlhost_buffer& buffer) {
  check_cuda(cudaSetDevice(context.settings.device), "cudaSetDevice");
  check_cuda(cudaFree(buffer.data), "cudaFree");
}

void* alloc_pinned(const Context& context, uint64_t bytes) {
  check_cuda(cudaSetDevice(context.settings.device), "cudaSetDevice");
  void* p = nullptr;
  check_cuda(cudaMallocHost(&p, bytes == 0 ? 1 : bytes), "cudaMallocHost");
  return p;
}

void free_pinned(void* data) { check_cuda(cudaFreeHost(data), "cudaFreeHost"); }

// On the legacy default stream: after all of the device's work, and waited for.
void copy_to_host_unordered(const Context& context, const dlhost_buffer& src, uint64_t offset,
                            void* dst, uint64_t bytes) {
  const char* from = device_range("copy_to_host", src, offset, bytes);
  check_cuda(cudaSetDevice(context.settings.device), "cudaSetDevice");
  check_cuda(cudaMemcpy(dst, from, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

void copy_from_host_unordered(const Context& context, const void* src, const dlhost_buffer& dst,
                              uint64_t offset, uint64_t bytes) {
  char* to = device_range("copy_from_host", dst, offset, bytes);
  check_cuda(cudaSetDevice(context.settings.device), "cudaSetDevice");
  check_cuda(cudaMemcpy(to, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy from host");
}

}  // namespace dlhost::gpu_cudnn
