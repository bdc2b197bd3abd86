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

namespace detail {

// The C table over a Backend subclass B: one static function per entry, each a guard.
template <class B>
struct BackendTable {
  using Context = typename B::Context;

  static B*& instance() {
    static B* backend = nullptr;  // made by the entry, never deleted: lives with the library
    return backend;
  }
  static B& backend() { return *instance(); }

  struct DeviceSlot {
    Device device;
    dlhost_device_info info{};
  };
  // Every device described once, on first use, for the library's lifetime.
  static const std::vector<DeviceSlot>& devices() {
    static std::vector<DeviceSlot> slots;
    static std::once_flag once;
    static OnceString library;
    std::call_once(once, [] {
      const char* lib = library.get([] { return backend().library(); });
      std::vector<DeviceSlot> made(static_cast<size_t>(backend().device_count()));
      for (size_t i = 0; i < made.size(); ++i) {
        made[i].device = backend().device(static_cast<int32_t>(i));
        const Device& d = made[i].device;
        dlhost_device_info& info = made[i].info;
        info = make_struct<dlhost_device_info>(DLHOST_DEVICE_INFO_STRUCT_SIZE);
        info.index = static_cast<int32_t>(i);
        info.kind = d.kind;
        info.name = d.name.c_str();
        info.model = d.model.c_str();
        info.cores = d.cores;
        info.isa = d.isa.c_str();
        info.memory_bytes = d.memory_bytes;
        info.library = lib;
      }
      slots = std::move(made);  // moving a vector keeps its elements (and their strings) in place
    });
    return slots;
  }
  static void check_device(const char* call, int32_t index) {
    const int32_t count = backend().device_count();
    if (index < 0 || index >= count)
      fail(DLHOST_CODE_OUT_OF_RANGE, std::string(plugin_name()) + ": " + call + ": device " +
                                         std::to_string(index) + " does not exist (" +
                                         std::to_string(count) + " device(s))");
  }
  static Model& model(dlhost_model* m, const char* call) {
    return deref(reinterpret_cast<Model*>(m), call, "model");
  }

  static dlhost_status* query(int32_t* priority) {
    return guard([&] {
      const int32_t p = backend().query();
      if (priority != nullptr) *priority = p;
    });
  }
  static int32_t device_count() { return backend().device_count(); }
  static dlhost_status* device_info(int32_t index, const dlhost_device_info** out) {
    return guard([&] {
      check_device("device_info", index);
      deref(out, "device_info", "out");
      *out = &devices()[static_cast<size_t>(index)].info;
    });
  }
  // Asked once, for the library's lifetime (the ops array is handed out).
  static const std::optional<Capabilities>& caps() {
    static const std::optional<Capabilities> c = backend().capabilities();
    return c;
  }
  static dlhost_status* capabilities(dlhost_backend_caps* out) {
    return guard([&] {
      deref(out, "capabilities", "out");
      if (!caps())
        fail(DLHOST_CODE_UNIMPLEMENTED, std::string(plugin_name()) + ": no capabilities");
      const Capabilities& c = *caps();
      if (DLHOST_HAS_FIELD(out, dlhost_backend_caps, op_count)) {
        out->ops = c.ops.data();
        out->op_count = static_cast<int32_t>(c.ops.size());
      }
      if (DLHOST_HAS_FIELD(out, dlhost_backend_caps, dtypes)) out->dtypes = c.dtypes;
      if (DLHOST_HAS_FIELD(out, dlhost_backend_caps, precisions)) out->precisions = c.precisions;
      if (DLHOST_HAS_FIELD(out, dlhost_backend_caps, memory_spaces))
        out->memory_spaces = c.memory_spaces;
      if (DLHOST_HAS_FIELD(out, dlhost_backend_caps, asynchronous))
        out->asynchronous = c.asynchronous ? 1 : 0;
      if (DLHOST_HAS_FIELD(out, dlhost_backend_caps, optimizers)) out->optimizers = c.optimizers;
    });
  }
  // A precision the backend does not implement is UNIMPLEMENTED (the host records SKIPPED); a
  // backend without capabilities implements fp32 alone.
  static void check_precision(const Options& options) {
    const std::string mode = options.get("precision").value_or("fp32");
    const uint32_t have = caps() ? caps()->precisions : bit(DLHOST_PRECISION_FP32);
    const int32_t p = precision_of(mode);
    if (p == 0 || !(have & bit(p)))
      fail(DLHOST_CODE_UNIMPLEMENTED,
           std::string(plugin_name()) + ": precision '" + mode + "' is not implemented");
  }
  // The plugin's extensions (option schema, capabilities), built once by the entry.
  static const dlhost_extension* extensions() {
    static ExtensionChain chain;
    static dlhost_backend_caps_ext caps_ext{};
    static dlhost_tensor_read_ext read_ext{};
    static std::once_flag once;
    std::call_once(once, [] {
      if (auto declared = backend().options()) chain.declare_options(std::move(*declared));
      if (caps()) {
        caps_ext = make_struct<dlhost_backend_caps_ext>(DLHOST_BACKEND_CAPS_EXT_STRUCT_SIZE);
        caps_ext.type = DLHOST_EXT_BACKEND_CAPS;
        caps_ext.capabilities = capabilities;
        chain.link(&caps_ext);
      }
      if (backend().reads_tensors()) {
        read_ext = make_struct<dlhost_tensor_read_ext>(DLHOST_TENSOR_READ_EXT_STRUCT_SIZE);
        read_ext.type = DLHOST_EXT_TENSOR_READ;
        read_ext.read_tensor = read_tensor;
        chain.link(&read_ext);
      }
      if (backend().device_virtuals()) link_device_extensions(chain);
      backend().link_extensions(chain);
    });
    return chain.head();
  }

  // --- the device extensions over the device virtuals --------------------------------------
  static Context& context(dlhost_context* c, const char* call) {
    return deref(reinterpret_cast<Context*>(c), call, "context");
  }
  static Event& event(dlhost_event* e, const char* call) {
    return deref(reinterpret_cast<Event*>(e), call, "event");
  }
  template <class F>
  static void quietly(const char* call, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      log(DLHOST_LOG_ERROR, plugin_name(), std::string(call) + ": " + e.what());
    }
  }
  static void link_device_extensions(ExtensionChain& chain) {
    static dlhost_stream_ext stream_ext =
        make_struct<dlhost_stream_ext>(DLHOST_STREAM_EXT_STRUCT_SIZE);
    stream_ext.type = DLHOST_EXT_STREAM;
    stream_ext.model_stream = [](dlhost_model* m, dlhost_stream* out) {
      return guard([&] {
        const dlhost_stream s = model(m, "model_stream").model_stream();
        if (deref(out, "model_stream", "out").struct_size < DLHOST_STREAM_STRUCT_SIZE)
          invalid(std::string(plugin_name()) + ": model_stream: out older than ABI 1.2");
        out->kind = s.kind, out->device = s.device, out->handle = s.handle;
      });
    };
    chain.link(&stream_ext);
    static dlhost_events_ext events = make_struct<dlhost_events_ext>(DLHOST_EVENTS_EXT_STRUCT_SIZE);
    events.type = DLHOST_EXT_EVENTS;
    events.event_create = [](dlhost_model* m, dlhost_event** out) {
      return guard([&] {
        Model& mod = model(m, "event_create");
        deref(out, "event_create", "out");
        *out = reinterpret_cast<dlhost_event*>(mod.create_event().release());
      });
    };
    events.event_destroy = [](dlhost_event* e) { delete reinterpret_cast<Event*>(e); };
    events.event_record = [](dlhost_event* e) {
      return guard([&] { event(e, "event_record").record(); });
    };
    events.event_query = [](dlhost_event* e, int32_t* done) {
      return guard([&] { deref(done, "event_query", "done") = event(e, "event_query").done(); });
    };
    events.event_synchronize = [](dlhost_event* e) {
      return guard([&] { event(e, "event_synchronize").synchronize(); });
    };
    events.event_elapsed_ms = [](dlhost_event* start, dlhost_event* end, double* ms) {
      return guard([&] {
        Event& s = event(start, "event_elapsed_ms");
        deref(ms, "event_elapsed_ms", "ms") = event(end, "event_elapsed_ms").elapsed_ms_since(s);
      });
    };
    chain.link(&events);
    static dlhost_device_memory_ext memory =
        make_struct<dlhost_device_memory_ext>(DLHOST_DEVICE_MEMORY_EXT_STRUCT_SIZE);
    memory.type = DLHOST_EXT_DEVICE_MEMORY;
    memory.memory_stats = [](dlhost_model* m, dlhost_memory_stats* out) {
      return guard([&] {
        const dlhost_memory_stats st = model(m, "memory_stats").memory_stats();
        deref(out, "memory_stats", "out");
        if (DLHOST_HAS_FIELD(out, dlhost_memory_stats, in_use_bytes))
          out->in_use_bytes = st.in_use_bytes;
        if (DLHOST_HAS_FIELD(out, dlhost_memory_stats, peak_bytes)) out->peak_bytes = st.peak_bytes;
        if (DLHOST_HAS_FIELD(out, dlhost_memory_stats, free_bytes)) out->free_bytes = st.free_bytes;
        if (DLHOST_HAS_FIELD(out, dlhost_memory_stats, total_bytes))
          out->total_bytes = st.total_bytes;
      });
    };
    memory.buffer_alloc = [](dlhost_context* c, uint64_t bytes, int32_t dtype, dlhost_buffer* out) {
      return guard([&] {
        Context& ctx = context(c, "buffer_alloc");
        deref(out, "buffer_alloc", "out");
        const dlhost_buffer b = backend().alloc_buffer(ctx, bytes, dtype);
        fill_buffer(out, b.data, b.bytes, b.dtype, b.memory_space, b.device);
      });
    };
    // The two frees return nothing: an error there can only be logged.
    memory.buffer_free = [](dlhost_context* c, const dlhost_buffer* b) {
      if (c != nullptr && b != nullptr)
        quietly("buffer_free", [&] { backend().free_buffer(context(c, ""), *b); });
    };
    memory.copy_to_host = [](dlhost_context* c, dlhost_model* m, const dlhost_buffer* src,
                             uint64_t offset, void* dst, uint64_t bytes) {
      return guard([&] {
        const dlhost_buffer& from = deref(src, "copy_to_host", "src");
        if (dst == nullptr) null_argument("copy_to_host", "dst");
        if (m != nullptr) return model(m, "copy_to_host").copy_to_host(from, offset, dst, bytes);
        backend().copy_to_host(context(c, "copy_to_host"), from, offset, dst, bytes);
      });
    };
    memory.copy_from_host = [](dlhost_context* c, dlhost_model* m, const void* src,
                               const dlhost_buffer* dst, uint64_t offset, uint64_t bytes) {
      return guard([&] {
        const dlhost_buffer& to = deref(dst, "copy_from_host", "dst");
        if (src == nullptr) null_argument("copy_from_host", "src");
        if (m != nullptr) return model(m, "copy_from_host").copy_from_host(src, to, offset, bytes);
        backend().copy_from_host(context(c, "copy_from_host"), src, to, offset, bytes);
      });
    };
    memory.host_alloc = [](dlhost_context* c, uint64_t bytes, void** out) {
      return guard([&] {
        Context& ctx = context(c, "host_alloc");
        deref(out, "host_alloc", "out") = backend().host_alloc(ctx, bytes);
      });
    };
    memory.host_free = [](dlhost_context* c, void* p) {
      if (c != nullptr && p != nullptr)
        quietly("host_free", [&] { backend().host_free(context(c, ""), p); });
    };
    memory.copy_device = [](dlhost_model* m, const dlhost_buffer* src, uint64_t src_offset,
                            const dlhost_buffer* dst, uint64_t dst_offset, uint64_t bytes) {
      return guard([&] {
        model(m, "copy_device")
            .copy_device(deref(src, "copy_device", "src"), src_offset,
                         deref(dst, "copy_device", "dst"), dst_offset, bytes);
      });
    };
    memory.input_buffer = [](dlhost_model* m, int32_t tensor, dlhost_buffer* out) {
      return guard([&] {
        const dlhost_buffer b = model(m, "input_buffer").input_buffer(tensor);
        fill_buffer(&deref(out, "input_buffer", "out"), b.data, b.bytes, b.dtype, b.memory_space,
                    b.device);
      });
    };
    chain.link(&memory);
  }
  static dlhost_status* context_create(int32_t device, const dlhost_options* options,
                                       dlhost_context** out) {
    return guard([&] {
      // Precision first: what a backend implements does not depend on the machine, so a
      // precision it lacks is refused alike with or without a device (and is testable without).
      check_precision(Options(options));
      check_device("context_create", device);
      deref(out, "context_create", "out");
      *out = reinterpret_cast<dlhost_context*>(backend().open(device, Options(options)).release());
    });
  }
  static void context_destroy(dlhost_context* context) {
    delete reinterpret_cast<Context*>(context);
  }
  static dlhost_status* compile(dlhost_context* context, const dlhost_graph* graph,
                                const dlhost_optimizer_desc* optimizer,
                                const dlhost_options* options, dlhost_model** out) {
    return guard([&] {
      Context& ctx = deref(reinterpret_cast<Context*>(context), "compile", "context");
      if (deref(graph, "compile", "graph").struct_size < DLHOST_GRAPH_STRUCT_SIZE)
        invalid(std::string(plugin_name()) + ": compile: graph older than ABI 1.0");
      const dlhost_optimizer_desc whole = whole_optimizer(deref(optimizer, "compile", "optimizer"));
      deref(out, "compile", "out");
      std::unique_ptr<Model> made = backend().compile(ctx, *graph, whole, Options(options));
      // Refused here, where the cause is, rather than later as "write_param: model is NULL".
      if (!made)
        fail(DLHOST_CODE_INTERNAL,
             std::string(plugin_name()) +
                 ": compile returned no model (a null std::unique_ptr<Model>): return the "
                 "compiled model, or throw sdk::unimplemented(...) for a graph it cannot run");
      *out = reinterpret_cast<dlhost_model*>(made.release());
    });
  }
  static void model_destroy(dlhost_model* m) { delete reinterpret_cast<Model*>(m); }
  static dlhost_status* model_info(dlhost_model* m, dlhost_model_info* out) {
    return guard([&] {
      const ModelInfo i = model(m, "model_info").info();
      deref(out, "model_info", "out");
      // The caller says how much of the struct it has; fill what it covers.
      if (DLHOST_HAS_FIELD(out, dlhost_model_info, threads)) out->threads = i.threads;
      if (DLHOST_HAS_FIELD(out, dlhost_model_info, implementation))
        out->implementation = i.implementation;
      if (DLHOST_HAS_FIELD(out, dlhost_model_info, param_bytes)) out->param_bytes = i.param_bytes;
      if (DLHOST_HAS_FIELD(out, dlhost_model_info, workspace_bytes))
        out->workspace_bytes = i.workspace_bytes;
      if (DLHOST_HAS_FIELD(out, dlhost_model_info, fused_step))
        out->fused_step = i.fused_step ? 1 : 0;
      if (DLHOST_HAS_FIELD(out, dlhost_model_info, departures)) out->departures = i.departures;
    });
  }
  static dlhost_status* set_input(dlhost_model* m, int32_t tensor, const void* data, size_t bytes) {
    return guard([&] { model(m, "set_input").set_input(tensor, data, bytes); });
  }
  static dlhost_status* forward(dlhost_model* m) {
    return guard([&] { model(m, "forward").forward(); });
  }
  static dlhost_status* backward(dlhost_model* m, const dlhost_grad_ready* ready) {
    return guard([&] { model(m, "backward").backward(ready); });
  }
  static dlhost_status* update(dlhost_model* m) {
    return guard([&] { model(m, "update").update(); });
  }
  static dlhost_status* synchronize(dlhost_model* m) {
    return guard([&] { model(m, "synchronize").synchronize(); });
  }
  static dlhost_status* read_loss(dlhost_model* m, float* loss) {
    return guard([&] {
      Model& mod = model(m, "read_loss");
      deref(loss, "read_loss", "loss");
      mod.synchronize();
      *loss = mod.loss();
    });
  }
  static dlhost_status* param_buffers(dlhost_model* m, int32_t param, dlhost_buffer* value,
                                      dlhost_buffer* grad) {
    return guard([&] { model(m, "param_buffers").param_buffers(param, value, grad); });
  }
  static dlhost_status* read_param(dlhost_model* m, int32_t param, int32_t part, void* data,
                                   size_t bytes) {
    return guard([&] { model(m, "read_param").read_param(param, part, data, bytes); });
  }
  static dlhost_status* write_param(dlhost_model* m, int32_t param, int32_t part, const void* data,
                                    size_t bytes) {
    return guard([&] { model(m, "write_param").write_param(param, part, data, bytes); });
  }
  static dlhost_status* read_tensor(dlhost_model* m, int32_t tensor, void* data, size_t bytes) {
    return guard([&] {
      Model& mod = model(m, "read_tensor");
      if (data == nullptr) invalid(std::string(plugin_name()) + ": read_tensor: data is NULL");
      mod.synchronize();
      mod.read_tensor(tensor, data, bytes);
    });
  }
  static dlhost_status* memory_in_use(dlhost_model* m, uint64_t* bytes) {
    return guard([&] {
      Model& mod = model(m, "memory_in_use");
      deref(bytes, "memory_in_use", "bytes");
      *bytes = mod.memory_in_use();
    });
  }

  static const dlhost_backend_api& table() {
    static const dlhost_backend_api t = [] {
      auto a = make_struct<dlhost_backend_api>(DLHOST_BACKEND_API_STRUCT_SIZE);
      a.device_count = device_count;
      a.device_info = device_info;
      a.context_create = context_create;
      a.context_destroy = context_destroy;
      a.compile = compile;
      a.model_destroy = model_destroy;
      a.model_info = model_info;
      a.set_input = set_input;
      a.forward = forward;
      a.backward = backward;
      a.update = update;
      a.synchronize = synchronize;
      a.read_loss = read_loss;
      a.param_buffers = param_buffers;
      a.read_param = read_param;
      a.write_param = write_param;
      a.memory_in_use = memory_in_use;
      return a;
    }();
    return t;
  }
};

}  // namespace detail

// The whole body of a backend's entry symbol:
//   extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* h) {
//     return dlhost::sdk::backend_plugin<MyBackend>(h, {"my_backend", "1.0.0", "what it is"});
//   }
// B must be default-constructible; its constructor should be cheap (the host loads every plugin
// to list them) and may throw to refuse loading.
template <class B>
const dlhost_plugin* backend_plugin(const dlhost_host_api* host, const PluginInfo& info) {
  using Table = detail::BackendTable<B>;
  return detail::enter(
      host, info, &Table::query,
      [] {
        if (Table::instance() == nullptr) Table::instance() = new B();
      },
      [](dlhost_plugin& p) {
        p.kind = DLHOST_PLUGIN_BACKEND;
        p.backend = &Table::table();
        p.extensions = Table::extensions();
      });
}

}  // namespace dlhost::sdk

#endif  // DLHOST_BACKEND_KIT_HPP
