// backend_kit.hpp — write a compute backend as C++ classes; the kit fills dlhost_backend_api.
//
// In the spirit of PJRT's pjrt_c_api_wrapper_impl.h: the author writes
//   - a Context type (whatever a device opened for one case needs: threads, streams, a seed),
//   - a Model subclass (a compiled training graph: forward, backward, update, parameters),
//   - a Backend<Context> subclass (devices, the library version, open a context, compile),
// and exports the entry symbol with backend_plugin<TheBackend>(host, info). The kit fills every
// table entry, checks handles and out-parameters (INVALID_ARGUMENT naming the call), checks
// device indices (OUT_OF_RANGE), and turns every exception into a host status: sdk::Error keeps
// its code (sdk::unimplemented() for an op the backend lacks: the host then records SKIPPED),
// std::bad_alloc becomes RESOURCE_EXHAUSTED, anything else INTERNAL. No C++ crosses the ABI.
// This file is the author's API; the C table that does the above is backend_table.hpp, which
// this file includes at its end (a plugin includes this one alone).
//
// Ownership: the Backend object is created by the entry and lives as long as the library.
// context_create hands the host a Context the kit deletes in context_destroy; compile hands it a
// Model deleted in model_destroy (the host destroys models before their context). Device
// descriptions and the library string are built once and live as long as the library.
// Thread-safety: as dlhost_backend.h says. Backend::device_count/device are called under the
// kit's once-guard; one context and its models are used from one host thread at a time, so
// Context and Model need no locks of their own.
#ifndef DLHOST_BACKEND_KIT_HPP
#define DLHOST_BACKEND_KIT_HPP

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "dlhost/cpu_info.hpp"
#include "dlhost/plugin_kit.hpp"

namespace dlhost::sdk {

// A device as the backend describes it; the kit turns it into a dlhost_device_info.
struct Device {
  dlhost_device_kind kind = DLHOST_DEVICE_CPU;
  std::string name;   // "cpu0", "cuda0"
  std::string model;  // as the vendor names it
  int32_t cores = 0;  // CPU cores, or GPU multiprocessors
  std::string isa;    // what the library dispatches: "avx512_core", "sm_90"
  uint64_t memory_bytes = 0;
};

// The CPU this process runs on (cpu_info.hpp), as device `name`, with the ISA the backend's
// library really dispatches (a naive backend says "generic").
inline Device cpu_device(std::string isa, std::string name = "cpu0") {
  const CpuInfo& cpu = cpu_info();
  Device d;
  d.kind = DLHOST_DEVICE_CPU;
  d.name = std::move(name);
  d.model = cpu.model;
  d.cores = cpu.cores;
  d.isa = std::move(isa);
  d.memory_bytes = cpu.memory_bytes;
  return d;
}

// Fills a caller-owned buffer description (param_buffers): only the fields its struct_size
// covers, never struct_size itself (the caller's, which may be older and shorter than this
// plugin's dlhost_buffer). NULL `out` is skipped, as the ABI allows either buffer to be left out.
inline void fill_buffer(dlhost_buffer* out, void* data, uint64_t bytes, int32_t dtype,
                        int32_t memory_space, int32_t device) {
  if (out == nullptr) return;
  if (DLHOST_HAS_FIELD(out, dlhost_buffer, data)) out->data = data;
  if (DLHOST_HAS_FIELD(out, dlhost_buffer, bytes)) out->bytes = bytes;
  if (DLHOST_HAS_FIELD(out, dlhost_buffer, dtype)) out->dtype = dtype;
  if (DLHOST_HAS_FIELD(out, dlhost_buffer, memory_space)) out->memory_space = memory_space;
  if (DLHOST_HAS_FIELD(out, dlhost_buffer, device)) out->device = device;
}

// Describes `count` floats of host memory as a parameter buffer (fill_buffer's rules).
inline void host_buffer(dlhost_buffer* out, float* data, size_t count) {
  fill_buffer(out, data, static_cast<uint64_t>(count) * sizeof(float), DLHOST_DTYPE_F32,
              DLHOST_MEMORY_HOST, -1);
}

// The bit of an enum value in a capability mask (dlhost_backend_caps).
constexpr uint32_t bit(int32_t value) { return 1u << value; }

// The name of a dlhost_precision as the "precision" option spells it; nullptr when unknown.
inline const char* precision_name(int32_t precision) {
  switch (precision) {
    case DLHOST_PRECISION_FP32:
      return "fp32";
    case DLHOST_PRECISION_TF32:
      return "tf32";
    case DLHOST_PRECISION_BF16:
      return "bf16";
    case DLHOST_PRECISION_FP16:
      return "fp16";
    default:
      return nullptr;
  }
}

// The dlhost_precision named `name` ("fp32"...); 0 when unknown.
inline int32_t precision_of(const std::string& name) {
  for (int32_t p = DLHOST_PRECISION_FP32; p <= DLHOST_PRECISION_FP16; ++p)
    if (name == precision_name(p)) return p;
  return 0;
}

// The ops DLHOST_OP_INPUT .. `last`, for a backend that implements every op up to one.
inline std::vector<int32_t> ops_through(int32_t last) {
  std::vector<int32_t> ops;
  for (int32_t op = DLHOST_OP_INPUT; op <= last; ++op) ops.push_back(op);
  return ops;
}

// What a backend publishes as DLHOST_EXT_BACKEND_CAPS: readable by the host without a device.
struct Capabilities {
  std::vector<int32_t> ops;  // dlhost_op values compile accepts
  uint32_t dtypes = bit(DLHOST_DTYPE_F32) | bit(DLHOST_DTYPE_I32);
  uint32_t precisions = bit(DLHOST_PRECISION_FP32);
  uint32_t optimizers = bit(DLHOST_OPTIMIZER_SGD);  // dlhost_optimizer_kind bits (ABI 1.4)
  uint32_t memory_spaces = bit(DLHOST_MEMORY_HOST);
  bool asynchronous = false;
};

// A synchronous host-memory backend of strict fp32 implementing every op up to `last_op`.
inline Capabilities fp32_capabilities(int32_t last_op) {
  Capabilities caps;
  caps.ops = ops_through(last_op);
  return caps;
}

// What model_info reports. `implementation` must live as long as the model.
struct ModelInfo {
  int32_t threads = 1;
  const char* implementation = "";
  uint64_t param_bytes = 0;
  uint64_t workspace_bytes = 0;
  // ABI 1.5: the model took the host's fused_step option and does the step's work otherwise than
  // the three calls say (dlhost_model_info.fused_step). False for a model that ignores it.
  bool fused_step = false;
  // ABI 1.5: where the model is knowingly faster than the framework's own users get it, one a
  // line (dlhost_model_info.departures); "" when none. Must live as long as the model.
  const char* departures = "";
};

// An event on a model's stream (DLHOST_EXT_EVENTS), for a backend whose Backend::
// device_virtuals() is true. The default, HostClockEvent, suits a model that computes on the
// calling thread or can drain its work: record() synchronizes the model and reads the clock.
class Event {
 public:
  virtual ~Event() = default;
  // After all work enqueued on the model's stream so far; does not block (a device's event).
  virtual void record() = 0;
  // True when the work before the record has finished; does not block.
  virtual bool done() = 0;
  // Blocks until the work before the record has finished.
  virtual void synchronize() = 0;
  // Milliseconds of device time from `start` to this event, both finished.
  virtual double elapsed_ms_since(Event& start) = 0;
};

// A compiled training graph (see dlhost_backend.h for each call's contract). Every buffer is
// allocated by the backend's compile; the step calls allocate nothing.
class Model {
 public:
  virtual ~Model() = default;
  // One of graph.inputs, exactly batch * per-sample elements; `data` borrowed for the call.
  virtual void set_input(int32_t tensor, const void* data, size_t bytes) = 0;
  virtual void forward() = 0;
  // Overwrites every gradient; calls ready->fn (when `ready` is not NULL) per final gradient.
  virtual void backward(const dlhost_grad_ready* ready) = 0;
  virtual void update() = 0;
  // Waits for submitted work; a backend that computes on the calling thread keeps this no-op.
  virtual void synchronize() {}
  // The loss of the last forward; the kit synchronizes before asking.
  virtual float loss() const = 0;
  virtual void param_buffers(int32_t param, dlhost_buffer* value, dlhost_buffer* grad) = 0;
  // Canonical layout (dlhost_graph.h), exactly count * dtype_size(parameter's dtype) bytes (F32
  // master weights: count * 4); `part` is a dlhost_param_part.
  virtual void read_param(int32_t param, int32_t part, void* data, size_t bytes) = 0;
  virtual void write_param(int32_t param, int32_t part, const void* data, size_t bytes) = 0;
  virtual ModelInfo info() const = 0;
  // ABI 1.3 (DLHOST_EXT_TENSOR_READ, published when Backend::reads_tensors()): the F32 value of
  // `tensor` after the last forward, canonical row-major, exactly elements * 4 bytes; the kit
  // synchronizes first.
  virtual void read_tensor(int32_t tensor, void* data, size_t bytes) {
    (void)data;
    (void)bytes;
    unimplemented(std::string(detail::plugin_name()) + ": read_tensor of tensor " +
                  std::to_string(tensor));
  }
  // Bytes held on the device now; by default what info() counts.
  virtual uint64_t memory_in_use() const {
    ModelInfo i = info();
    return i.param_bytes + i.workspace_bytes;
  }

  // --- Device virtuals: published (dlhost_device.h) when Backend::device_virtuals() is true. The
  // defaults are a CPU's (host memory, the model's own synchronize); a device backend overrides
  // what its device does differently.
  // The stream every call on the model enqueues to (DLHOST_EXT_STREAM); none by default.
  virtual dlhost_stream model_stream() {
    unimplemented(std::string(detail::plugin_name()) + ": the model exports no stream");
  }
  virtual std::unique_ptr<Event> create_event();
  // DLHOST_EXT_DEVICE_MEMORY on this model: by default what memory_in_use() says, as in use and
  // as the peak, with the device's free and total unknown (0).
  virtual dlhost_memory_stats memory_stats() {
    auto m = make_struct<dlhost_memory_stats>(DLHOST_MEMORY_STATS_STRUCT_SIZE);
    m.in_use_bytes = m.peak_bytes = memory_in_use();
    return m;
  }
  // Copies ordered on the model's stream (copy_to_host/from_host wait, copy_device does not);
  // the defaults copy host memory (a buffer in device memory is UNIMPLEMENTED).
  virtual void copy_to_host(const dlhost_buffer& src, uint64_t offset, void* dst, uint64_t bytes);
  virtual void copy_from_host(const void* src, const dlhost_buffer& dst, uint64_t offset,
                              uint64_t bytes);
  virtual void copy_device(const dlhost_buffer& src, uint64_t src_offset, const dlhost_buffer& dst,
                           uint64_t dst_offset, uint64_t bytes);
  // The buffer holding input `tensor`, for per-step uploads; none by default.
  virtual dlhost_buffer input_buffer(int32_t tensor) {
    unimplemented(std::string(detail::plugin_name()) + ": no input buffer for tensor " +
                  std::to_string(tensor));
  }
};

namespace detail {
// The host-memory range [offset, offset + bytes) of `b`, or an error naming the call: outside
// the buffer is OUT_OF_RANGE, device memory UNIMPLEMENTED (the default copies only host memory).
inline char* host_range(const char* call, const dlhost_buffer& b, uint64_t offset, uint64_t bytes) {
  if (b.memory_space != DLHOST_MEMORY_HOST)
    fail(DLHOST_CODE_UNIMPLEMENTED, std::string(plugin_name()) + ": " + call +
                                        ": the default copies host memory only; override it");
  if (offset > b.bytes || bytes > b.bytes - offset)
    fail(DLHOST_CODE_OUT_OF_RANGE,
         std::string(plugin_name()) + ": " + call + ": bytes [" + std::to_string(offset) + ", " +
             std::to_string(offset + bytes) + ") of a buffer of " + std::to_string(b.bytes));
  return static_cast<char*>(b.data) + offset;
}
}  // namespace detail

// The default event: the host clock, read after the model has synchronized.
class HostClockEvent final : public Event {
 public:
  explicit HostClockEvent(Model& model) : model_(model) {}
  void record() override {
    model_.synchronize();
    at_ = std::chrono::steady_clock::now();
    recorded_ = true;
  }
  bool done() override { return recorded_; }
  void synchronize() override {}
  double elapsed_ms_since(Event& start) override {
    auto* s = dynamic_cast<HostClockEvent*>(&start);
    if (s == nullptr || !s->recorded_ || !recorded_)
      fail(DLHOST_CODE_FAILED_PRECONDITION,
           std::string(detail::plugin_name()) + ": event_elapsed_ms: an event was never recorded");
    return std::chrono::duration<double, std::milli>(at_ - s->at_).count();
  }

 private:
  Model& model_;
  std::chrono::steady_clock::time_point at_{};
  bool recorded_ = false;
};

inline std::unique_ptr<Event> Model::create_event() {
  return std::make_unique<HostClockEvent>(*this);
}
inline void Model::copy_to_host(const dlhost_buffer& src, uint64_t offset, void* dst,
                                uint64_t bytes) {
  synchronize();
  std::memcpy(dst, detail::host_range("copy_to_host", src, offset, bytes), bytes);
}
inline void Model::copy_from_host(const void* src, const dlhost_buffer& dst, uint64_t offset,
                                  uint64_t bytes) {
  synchronize();
  std::memcpy(detail::host_range("copy_from_host", dst, offset, bytes), src, bytes);
}
inline void Model::copy_device(const dlhost_buffer& src, uint64_t src_offset,
                               const dlhost_buffer& dst, uint64_t dst_offset, uint64_t bytes) {
  synchronize();
  std::memmove(detail::host_range("copy_device", dst, dst_offset, bytes),
               detail::host_range("copy_device", src, src_offset, bytes), bytes);
}

// The context of a backend that keeps nothing per opened device (a CPU backend whose models
// hold everything): Backend<NoContext>.
struct NoContext {};

// The backend itself, one object per library. ContextT is the author's context type.
template <class ContextT>
class Backend {
 public:
  using Context = ContextT;
  virtual ~Backend() = default;
  virtual int32_t device_count() const { return 1; }
  // Called once per index in [0, device_count()).
  virtual Device device(int32_t index) const = 0;
  // The compute library and its version ("oneDNN 2.6.3 (cpu_runtime=OMP)"), asked once.
  virtual std::string library() const = 0;
  // The priority among usable backends (higher wins); throw sdk::Error(UNAVAILABLE, why) when
  // this machine cannot run the backend.
  virtual int32_t query() const { return 0; }
  // The options the backend reads beyond the host-set ones; nullopt publishes no schema (the host
  // then passes any option unchecked), an empty list declares that it reads none.
  virtual std::optional<std::vector<OptionSpec>> options() const { return std::nullopt; }
  // Published as DLHOST_EXT_BACKEND_CAPS when set; asked once. Without it the host runs only
  // fp32 cases on the backend.
  virtual std::optional<Capabilities> capabilities() const { return std::nullopt; }
  // True when its models implement Model::read_tensor: the kit then publishes
  // DLHOST_EXT_TENSOR_READ.
  virtual bool reads_tensors() const { return false; }
  // Typed extensions beyond the kit's own (a device backend's stream, events, device memory):
  // link each into `chain` (ExtensionChain::link). Each must live as long as the library and be
  // filled up to its struct_size: the host calls what it finds unchecked. Called once, after the
  // kit has linked its own, so that capabilities, options and these come from one chain.
  virtual void link_extensions(ExtensionChain& chain) const { (void)chain; }
  // True to publish the stream, events and device memory extensions from the Model's device
  // virtuals and the context-level ones below (plugin-sdk.md, "Device backends"); a backend that
  // links its own tables through link_extensions leaves it false.
  virtual bool device_virtuals() const { return false; }
  // Context-level device memory (DLHOST_EXT_DEVICE_MEMORY): buffers for the host's own use
  // (comm-bench, gradient arenas) and page-locked host memory. The defaults are host memory.
  virtual dlhost_buffer alloc_buffer(ContextT& context, uint64_t bytes, int32_t dtype) {
    (void)context;
    auto b = make_struct<dlhost_buffer>(DLHOST_BUFFER_STRUCT_SIZE);
    b.data = ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t(64));
    b.bytes = bytes, b.dtype = dtype, b.memory_space = DLHOST_MEMORY_HOST, b.device = -1;
    return b;
  }
  virtual void free_buffer(ContextT& context, const dlhost_buffer& buffer) {
    (void)context;
    ::operator delete(buffer.data, std::align_val_t(64));
  }
  virtual void* host_alloc(ContextT& context, uint64_t bytes) {
    (void)context;
    return ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t(64));
  }
  virtual void host_free(ContextT& context, void* data) {
    (void)context;
    ::operator delete(data, std::align_val_t(64));
  }
  // A copy with no model: ordered after all of the context's work (the default: host memory).
  virtual void copy_to_host(ContextT& context, const dlhost_buffer& src, uint64_t offset, void* dst,
                            uint64_t bytes) {
    (void)context;
    std::memcpy(dst, detail::host_range("copy_to_host", src, offset, bytes), bytes);
  }
  virtual void copy_from_host(ContextT& context, const void* src, const dlhost_buffer& dst,
                              uint64_t offset, uint64_t bytes) {
    (void)context;
    std::memcpy(detail::host_range("copy_from_host", dst, offset, bytes), src, bytes);
  }
  // `device` is already checked against device_count(), and "precision" against capabilities().
  virtual std::unique_ptr<ContextT> open(int32_t device, const Options& options) = 0;
  // Graph and optimizer are borrowed for the call and already checked for struct_size.
  virtual std::unique_ptr<Model> compile(ContextT& context, const dlhost_graph& graph,
                                         const dlhost_optimizer_desc& optimizer,
                                         const Options& options) = 0;
};

}  // namespace dlhost::sdk

// The C table over these classes and backend_plugin<B>(), the entry's body (the glue, apart so
// that this file reads as the author's API).
#include "dlhost/backend_table.hpp"  // IWYU pragma: export

#endif  // DLHOST_BACKEND_KIT_HPP
