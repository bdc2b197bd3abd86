// backend_table.hpp — the backend kit's C-table glue: detail::BackendTable<B>, one static
// function per dlhost_backend_api entry over the author's Backend/Model/Event classes (each a
// guard turning exceptions into statuses, with the handle, out-parameter, device-index and
// struct_size checks backend_kit.hpp's top describes), the extensions published from them
// (capabilities, option schema, tensor read, the device virtuals), and backend_plugin<B>(), the
// body of a backend's entry symbol.
//
// A plugin includes dlhost/backend_kit.hpp, which includes this file after the author API; this
// file includes that one, so either include order compiles. Header-only, compiled into the
// plugin; nothing C++ crosses the ABI. Thread-safety: as backend_kit.hpp says.
#ifndef DLHOST_BACKEND_TABLE_HPP
#define DLHOST_BACKEND_TABLE_HPP

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dlhost/backend_kit.hpp"

namespace dlhost::sdk {

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

#endif  // DLHOST_BACKEND_TABLE_HPP
