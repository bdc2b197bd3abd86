// extensions.cpp — the device extension tables of gpu_cudnn (see extensions.h): the model's
// stream, events on it, device memory. Every entry is wrapped in sdk::guard, so an error becomes
// a status naming the call. Handles the host passes are the kit's: a dlhost_model* is the
// sdk::Model the kit handed out, a dlhost_context* the Context. Every table is filled to its
// declared struct_size: the host calls what it finds without checking for NULL.
#include "extensions.h"

#include <cuda_runtime_api.h>

#include "model.h"

namespace dlhost::gpu_cudnn {
namespace {

Model& model_of(dlhost_model* m, const char* call) {
  auto* model = dynamic_cast<Model*>(reinterpret_cast<sdk::Model*>(m));
  if (model == nullptr) sdk::invalid(std::string("gpu_cudnn: ") + call + ": model is NULL");
  return *model;
}

Context& context_of(dlhost_context* c, const char* call) {
  if (c == nullptr) sdk::invalid(std::string("gpu_cudnn: ") + call + ": context is NULL");
  return *reinterpret_cast<Context*>(c);
}

template <class T>
T& out_of(T* out, size_t min_size, const char* call) {
  if (out == nullptr || out->struct_size < min_size)
    sdk::invalid(std::string("gpu_cudnn: ") + call + ": output struct NULL or too small");
  return *out;
}

// --- stream and events -------------------------------------------------------------------------

dlhost_status* model_stream(dlhost_model* model, dlhost_stream* out) {
  return sdk::guard([&] {
    Model& m = model_of(model, "model_stream");
    dlhost_stream& s = out_of(out, DLHOST_STREAM_STRUCT_SIZE, "model_stream");
    s.kind = DLHOST_STREAM_CUDA;
    s.device = m.device();
    s.handle = m.stream();
  });
}

struct Event {
  cudaEvent_t event = nullptr;
  Model* model = nullptr;
  bool recorded = false;
};

Event& event_of(dlhost_event* e, const char* call) {
  if (e == nullptr) sdk::invalid(std::string("gpu_cudnn: ") + call + ": event is NULL");
  return *reinterpret_cast<Event*>(e);
}

dlhost_status* event_create(dlhost_model* model, dlhost_event** out) {
  return sdk::guard([&] {
    Model& m = model_of(model, "event_create");
    if (out == nullptr) sdk::invalid("gpu_cudnn: event_create: out is NULL");
    check_cuda(cudaSetDevice(m.device()), "cudaSetDevice");
    auto e = std::make_unique<Event>();
    e->model = &m;
    check_cuda(cudaEventCreate(&e->event), "cudaEventCreate");
    *out = reinterpret_cast<dlhost_event*>(e.release());
  });
}

void event_destroy(dlhost_event* e) {
  if (e == nullptr) return;
  auto* event = reinterpret_cast<Event*>(e);
  cudaEventDestroy(event->event);
  delete event;
}

dlhost_status* event_record(dlhost_event* e) {
  return sdk::guard([&] {
    Event& ev = event_of(e, "event_record");
    check_cuda(cudaEventRecord(ev.event, ev.model->stream()), "cudaEventRecord");
    ev.recorded = true;
  });
}

dlhost_status* event_query(dlhost_event* e, int32_t* done) {
  return sdk::guard([&] {
    Event& ev = event_of(e, "event_query");
    if (done == nullptr) sdk::invalid("gpu_cudnn: event_query: done is NULL");
    const cudaError_t r = cudaEventQuery(ev.event);
    if (r != cudaErrorNotReady) check_cuda(r, "cudaEventQuery");
    *done = r == cudaSuccess ? 1 : 0;
  });
}

dlhost_status* event_synchronize(dlhost_event* e) {
  return sdk::guard(
      [&] { check_cuda(cudaEventSynchronize(event_of(e, "event_synchronize").event), "sync"); });
}

dlhost_status* event_elapsed_ms(dlhost_event* start, dlhost_event* end, double* ms) {
  return sdk::guard([&] {
    Event &a = event_of(start, "event_elapsed_ms"), &b = event_of(end, "event_elapsed_ms");
    if (ms == nullptr) sdk::invalid("gpu_cudnn: event_elapsed_ms: ms is NULL");
    if (!a.recorded || !b.recorded)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "gpu_cudnn: event_elapsed_ms: never recorded");
    float elapsed = 0;
    const cudaError_t r = cudaEventElapsedTime(&elapsed, a.event, b.event);
    if (r == cudaErrorNotReady)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "gpu_cudnn: event_elapsed_ms: not finished");
    check_cuda(r, "cudaEventElapsedTime");
    *ms = elapsed;
  });
}

// --- device memory -----------------------------------------------------------------------------

dlhost_status* memory_stats(dlhost_model* model, dlhost_memory_stats* out) {
  return sdk::guard([&] {
    Model& m = model_of(model, "memory_stats");
    dlhost_memory_stats& s = out_of(out, DLHOST_MEMORY_STATS_STRUCT_SIZE, "memory_stats");
    size_t free = 0, total = 0;
    check_cuda(cudaSetDevice(m.device()), "cudaSetDevice");
    check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    s.in_use_bytes = m.arena().in_use();
    s.peak_bytes = m.arena().peak();
    s.free_bytes = free;
    s.total_bytes = total;
  });
}

dlhost_status* buffer_alloc(dlhost_context* context, uint64_t bytes, int32_t dtype,
                            dlhost_buffer* out) {
  return sdk::guard([&] {
    Context& c = context_of(context, "buffer_alloc");
    dlhost_buffer& b = out_of(out, DLHOST_BUFFER_STRUCT_SIZE, "buffer_alloc");
    check_cuda(cudaSetDevice(c.settings.device), "cudaSetDevice");
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc for buffer_alloc");
    b.data = p;
    b.bytes = bytes;
    b.dtype = dtype;
    b.memory_space = DLHOST_MEMORY_DEVICE;
    b.device = c.settings.device;
  });
}

void buffer_free(dlhost_context*, const dlhost_buffer* buffer) {
  if (buffer != nullptr) cudaFree(buffer->data);
}

// Copies on the model's stream (or the legacy default stream without a model) and waits.
void copy(dlhost_model* model, void* dst, const void* src, uint64_t bytes, cudaMemcpyKind kind,
          const dlhost_buffer* device, uint64_t offset) {
  if (device == nullptr || offset + bytes > device->bytes)
    sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "gpu_cudnn: copy of " + std::to_string(bytes) +
                                            " bytes at offset " + std::to_string(offset) +
                                            " outside the device buffer");
  cudaStream_t stream = model != nullptr ? model_of(model, "copy").stream() : nullptr;
  check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, stream), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

dlhost_status* copy_to_host(dlhost_context*, dlhost_model* model, const dlhost_buffer* src,
                            uint64_t offset, void* dst, uint64_t bytes) {
  return sdk::guard([&] {
    copy(model, dst, src != nullptr ? static_cast<const char*>(src->data) + offset : nullptr, bytes,
         cudaMemcpyDeviceToHost, src, offset);
  });
}

dlhost_status* copy_from_host(dlhost_context*, dlhost_model* model, const void* src,
                              const dlhost_buffer* dst, uint64_t offset, uint64_t bytes) {
  return sdk::guard([&] {
    copy(model, dst != nullptr ? static_cast<char*>(dst->data) + offset : nullptr, src, bytes,
         cudaMemcpyHostToDevice, dst, offset);
  });
}

dlhost_status* host_alloc(dlhost_context*, uint64_t bytes, void** out) {
  return sdk::guard([&] {
    if (out == nullptr) sdk::invalid("gpu_cudnn: host_alloc: out is NULL");
    check_cuda(cudaMallocHost(out, bytes == 0 ? 1 : bytes), "cudaMallocHost");
  });
}

void host_free(dlhost_context*, void* ptr) {
  if (ptr != nullptr) cudaFreeHost(ptr);
}

void check_range(const dlhost_buffer* b, uint64_t offset, uint64_t bytes, const char* which) {
  if (b == nullptr || b->data == nullptr)
    sdk::invalid(std::string("gpu_cudnn: copy_device: ") + which + " buffer is NULL");
  if (offset > b->bytes || bytes > b->bytes - offset)
    sdk::fail(DLHOST_CODE_OUT_OF_RANGE, std::string("gpu_cudnn: copy_device: ") +
                                            std::to_string(bytes) + " bytes at offset " +
                                            std::to_string(offset) + " outside the " + which +
                                            " buffer of " + std::to_string(b->bytes) + " bytes");
}

// Ordered on the model's stream and not waited for: the host packs gradients into its all-reduce
// arena between backward and the collective, both on that stream.
dlhost_status* copy_device(dlhost_model* model, const dlhost_buffer* src, uint64_t src_offset,
                           const dlhost_buffer* dst, uint64_t dst_offset, uint64_t bytes) {
  return sdk::guard([&] {
    Model& m = model_of(model, "copy_device");
    check_range(src, src_offset, bytes, "source");
    check_range(dst, dst_offset, bytes, "destination");
    const char* from = static_cast<const char*>(src->data) + src_offset;
    char* to = static_cast<char*>(dst->data) + dst_offset;
    if (from < to + bytes && to < from + bytes)
      sdk::invalid("gpu_cudnn: copy_device: source and destination overlap");
    if (bytes == 0) return;
    check_cuda(cudaSetDevice(m.device()), "cudaSetDevice");
    check_cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, m.stream()),
               "cudaMemcpyAsync device to device");
  });
}

dlhost_status* input_buffer(dlhost_model* model, int32_t tensor, dlhost_buffer* out) {
  return sdk::guard([&] {
    Model& m = model_of(model, "input_buffer");
    dlhost_buffer& b = out_of(out, DLHOST_BUFFER_STRUCT_SIZE, "input_buffer");
    b = m.input_buffer(tensor);
  });
}

// --- the chain -----------------------------------------------------------------------------------

template <class T>
T ext(int32_t type, size_t size) {
  T e{};
  e.struct_size = size;
  e.type = type;
  return e;
}

}  // namespace

void link_extensions(sdk::ExtensionChain& chain) {
  static dlhost_device_memory_ext memory = [] {
    auto e = ext<dlhost_device_memory_ext>(DLHOST_EXT_DEVICE_MEMORY,
                                           DLHOST_DEVICE_MEMORY_EXT_STRUCT_SIZE);
    e.memory_stats = memory_stats;
    e.buffer_alloc = buffer_alloc;
    e.buffer_free = buffer_free;
    e.copy_to_host = copy_to_host;
    e.copy_from_host = copy_from_host;
    e.host_alloc = host_alloc;
    e.host_free = host_free;
    e.copy_device = copy_device;
    e.input_buffer = input_buffer;
    return e;
  }();
  static dlhost_events_ext events = [] {
    auto e = ext<dlhost_events_ext>(DLHOST_EXT_EVENTS, DLHOST_EVENTS_EXT_STRUCT_SIZE);
    e.event_create = event_create;
    e.event_destroy = event_destroy;
    e.event_record = event_record;
    e.event_query = event_query;
    e.event_synchronize = event_synchronize;
    e.event_elapsed_ms = event_elapsed_ms;
    return e;
  }();
  static dlhost_stream_ext stream = [] {
    auto e = ext<dlhost_stream_ext>(DLHOST_EXT_STREAM, DLHOST_STREAM_EXT_STRUCT_SIZE);
    e.model_stream = model_stream;
    return e;
  }();
  chain.link(&memory);
  chain.link(&events);
  chain.link(&stream);
}

}  // namespace dlhost::gpu_cudnn
