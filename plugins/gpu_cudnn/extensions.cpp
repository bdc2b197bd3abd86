// extensions.cpp — the ABI 1.2 extension tables of gpu_cudnn (see extensions.h). Every entry is
// wrapped in sdk::guard, so an error becomes a status naming the call. Handles the host passes
// are the kit's: a dlhost_model* is the sdk::Model the kit handed out, a dlhost_context* the
// Context.
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

// --- capabilities ------------------------------------------------------------------------------

const int32_t kOps[] = {DLHOST_OP_INPUT,      DLHOST_OP_FC,
                        DLHOST_OP_CONV2D,     DLHOST_OP_POOL2D,
                        DLHOST_OP_ACTIVATION, DLHOST_OP_SOFTMAX_CROSS_ENTROPY,
                        DLHOST_OP_MSE_LOSS,   DLHOST_OP_BATCH_NORM,
                        DLHOST_OP_DROPOUT,    DLHOST_OP_ADD,
                        DLHOST_OP_LRN,        DLHOST_OP_EMBEDDING,
                        DLHOST_OP_LSTM,       DLHOST_OP_GLOBAL_AVG_POOL};

dlhost_status* capabilities(dlhost_backend_caps* out) {
  return sdk::guard([&] {
    dlhost_backend_caps& c = out_of(out, DLHOST_BACKEND_CAPS_STRUCT_SIZE, "capabilities");
    c.ops = kOps;
    c.op_count = static_cast<int32_t>(sizeof(kOps) / sizeof(kOps[0]));
    c.dtypes = (1u << DLHOST_DTYPE_F32) | (1u << DLHOST_DTYPE_I32);
    // bf16/fp16 mixed precision is not implemented: only what is, is declared.
    c.precisions = (1u << DLHOST_PRECISION_FP32) | (1u << DLHOST_PRECISION_TF32);
    c.memory_spaces = 1u << DLHOST_MEMORY_DEVICE;
    c.asynchronous = 1;
  });
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

// --- options -----------------------------------------------------------------------------------

const dlhost_option_decl kAlgo = {DLHOST_OPTION_DECL_STRUCT_SIZE,
                                  "algo",
                                  DLHOST_OPTION_ENUM,
                                  "heuristic",
                                  "convolution algorithms: cuDNN's heuristic, or autotuned on the "
                                  "layer's buffers at compile",
                                  "heuristic|exhaustive"};
const dlhost_option_decl kWorkspace = {DLHOST_OPTION_DECL_STRUCT_SIZE,
                                       "workspace_limit_mb",
                                       DLHOST_OPTION_INT,
                                       "1024",
                                       "most workspace one convolution call may use, MiB",
                                       nullptr};
const dlhost_option_decl* const kOptions[] = {&kAlgo, &kWorkspace};

// --- the chain -----------------------------------------------------------------------------------

template <class T>
T ext(int32_t type, size_t size, const dlhost_extension* next) {
  T e{};
  e.struct_size = size;
  e.type = type;
  e.next = next;
  return e;
}

const dlhost_extension* as_ext(const void* e) { return static_cast<const dlhost_extension*>(e); }

}  // namespace

const dlhost_extension* extension_chain() {
  static const dlhost_option_schema_ext schema = [] {
    auto e = ext<dlhost_option_schema_ext>(DLHOST_EXT_OPTION_SCHEMA,
                                           DLHOST_OPTION_SCHEMA_EXT_STRUCT_SIZE, nullptr);
    e.count = 2;
    e.options = kOptions;
    return e;
  }();
  static const dlhost_device_memory_ext memory = [] {
    auto e = ext<dlhost_device_memory_ext>(DLHOST_EXT_DEVICE_MEMORY,
                                           DLHOST_DEVICE_MEMORY_EXT_STRUCT_SIZE, as_ext(&schema));
    e.memory_stats = memory_stats;
    e.buffer_alloc = buffer_alloc;
    e.buffer_free = buffer_free;
    e.copy_to_host = copy_to_host;
    e.copy_from_host = copy_from_host;
    e.host_alloc = host_alloc;
    e.host_free = host_free;
    return e;
  }();
  static const dlhost_events_ext events = [] {
    auto e =
        ext<dlhost_events_ext>(DLHOST_EXT_EVENTS, DLHOST_EVENTS_EXT_STRUCT_SIZE, as_ext(&memory));
    e.event_create = event_create;
    e.event_destroy = event_destroy;
    e.event_record = event_record;
    e.event_query = event_query;
    e.event_synchronize = event_synchronize;
    e.event_elapsed_ms = event_elapsed_ms;
    return e;
  }();
  static const dlhost_stream_ext stream = [] {
    auto e =
        ext<dlhost_stream_ext>(DLHOST_EXT_STREAM, DLHOST_STREAM_EXT_STRUCT_SIZE, as_ext(&events));
    e.model_stream = model_stream;
    return e;
  }();
  static const dlhost_backend_caps_ext caps = [] {
    auto e = ext<dlhost_backend_caps_ext>(DLHOST_EXT_BACKEND_CAPS,
                                          DLHOST_BACKEND_CAPS_EXT_STRUCT_SIZE, as_ext(&stream));
    e.capabilities = capabilities;
    return e;
  }();
  return as_ext(&caps);
}

}  // namespace dlhost::gpu_cudnn
