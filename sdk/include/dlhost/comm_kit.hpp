// comm_kit.hpp — write a communication plugin as C++ classes; the kit fills dlhost_comm_api.
//
// The author writes
//   - a Comm subclass (one communicator: all-reduce, broadcast, all-gather, barrier, each
//     returning a Request; a blocking implementation returns a CompletedRequest),
//   - Request subclasses for collectives still in flight (test, wait; the destructor must make
//     the buffers safe to release: wait for or cancel what is pending),
//   - a CommPlugin subclass (capabilities, the library version, init a comm from the world),
// and exports the entry symbol with comm_plugin<ThePlugin>(host, info). The kit checks handles
// and out-parameters (INVALID_ARGUMENT naming the call) and turns every exception into a host
// status: sdk::Error keeps its code, std::bad_alloc is RESOURCE_EXHAUSTED, anything else INTERNAL.
//
// Ownership: the CommPlugin object is made by the entry and lives as long as the library; init
// hands the host a Comm deleted by finalize, each collective a Request deleted by request_free.
// The library string is asked once and lives as long as the library.
// Thread-safety: one comm and its requests are used from one host thread at a time
// (dlhost_comm.h); capabilities and query may be called from any thread.
#ifndef DLHOST_COMM_KIT_HPP
#define DLHOST_COMM_KIT_HPP

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dlhost/plugin_kit.hpp"

namespace dlhost::sdk {

// A collective in flight.
class Request {
 public:
  virtual ~Request() = default;
  // True once complete; an error of the collective is thrown here or from wait().
  virtual bool test() = 0;
  virtual void wait() = 0;
};

// What a blocking collective returns: already complete.
class CompletedRequest final : public Request {
 public:
  bool test() override { return true; }
  void wait() override {}
};
inline std::unique_ptr<Request> completed() { return std::make_unique<CompletedRequest>(); }

// One communicator over the ranks of a case. Arguments are exactly the C call's (dlhost_comm.h):
// dtype is a dlhost_dtype, op a dlhost_reduce_op, memory_space a dlhost_memory_space; buffers are
// borrowed until the returned request completes.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual std::unique_ptr<Request> all_reduce(const void* send, void* recv, uint64_t count,
                                              int32_t dtype, int32_t op, int32_t memory_space) = 0;
  virtual std::unique_ptr<Request> broadcast(void* buffer, uint64_t count, int32_t dtype,
                                             int32_t root, int32_t memory_space) = 0;
  virtual std::unique_ptr<Request> all_gather(const void* send, void* recv, uint64_t count,
                                              int32_t dtype, int32_t memory_space) = 0;
  virtual std::unique_ptr<Request> barrier() = 0;
};

struct CommCaps {
  bool host_memory = true;
  bool device_memory = false;
  uint32_t dtypes = 1u << DLHOST_DTYPE_F32;  // bit (1 << dlhost_dtype) per element type
};

class CommPlugin {
 public:
  virtual ~CommPlugin() = default;
  virtual CommCaps capabilities() const = 0;
  // The communication library and its version ("Open MPI v4.1.4"), asked once.
  virtual std::string library() const = 0;
  // Priority among usable comms (higher wins); throw sdk::Error(UNAVAILABLE, why) if unusable.
  virtual int32_t query() const { return 0; }
  // The options the comm reads (ABI 1.2 schema); nullopt publishes none (options unchecked), an
  // empty list declares that it reads none.
  virtual std::optional<std::vector<OptionSpec>> options() const { return std::nullopt; }
  // The comm's own typed extensions (dlhost_device.h: group calls, abort), linked into `chain`
  // (ExtensionChain::link) after the kit's option schema, as Backend::link_extensions does. Each
  // must live as long as the library and be filled up to its struct_size.
  virtual void link_extensions(ExtensionChain& chain) const { (void)chain; }
  // Collective over every rank; `args` is checked for struct_size and borrowed for the call.
  // Fields after ABI 1.0's (store_prefix) are there only when args.struct_size covers them.
  virtual std::unique_ptr<Comm> init(const dlhost_comm_init_args& args) = 0;
};

namespace detail {

template <class P>
struct CommTable {
  static P*& instance() {
    static P* plugin = nullptr;  // made by the entry, never deleted: lives with the library
    return plugin;
  }
  static Comm& comm(dlhost_comm* c, const char* call) {
    return deref(reinterpret_cast<Comm*>(c), call, "comm");
  }
  static Request& request(dlhost_request* r, const char* call) {
    return deref(reinterpret_cast<Request*>(r), call, "request");
  }
  // Runs a collective and hands its request to the caller.
  template <class Issue>
  static dlhost_status* issue(const char* call, dlhost_comm* c, dlhost_request** out, Issue&& run) {
    return guard([&] {
      Comm& cm = comm(c, call);
      deref(out, call, "request");
      *out = reinterpret_cast<dlhost_request*>(run(cm).release());
    });
  }

  static dlhost_status* query(int32_t* priority) {
    return guard([&] {
      const int32_t p = instance()->query();
      if (priority != nullptr) *priority = p;
    });
  }
  static dlhost_status* capabilities(dlhost_comm_caps* out) {
    static OnceString library;
    return guard([&] {
      deref(out, "capabilities", "out");
      const CommCaps caps = instance()->capabilities();
      const char* lib = library.get([] { return instance()->library(); });
      if (DLHOST_HAS_FIELD(out, dlhost_comm_caps, host_memory))
        out->host_memory = caps.host_memory ? 1 : 0;
      if (DLHOST_HAS_FIELD(out, dlhost_comm_caps, device_memory))
        out->device_memory = caps.device_memory ? 1 : 0;
      if (DLHOST_HAS_FIELD(out, dlhost_comm_caps, dtypes)) out->dtypes = caps.dtypes;
      if (DLHOST_HAS_FIELD(out, dlhost_comm_caps, library)) out->library = lib;
    });
  }
  static dlhost_status* init(const dlhost_comm_init_args* args, dlhost_comm** out) {
    return guard([&] {
      if (deref(args, "init", "args").struct_size < DLHOST_COMM_INIT_ARGS_STRUCT_SIZE_1_0)
        invalid(std::string(plugin_name()) + ": init: args older than ABI 1.0");
      deref(out, "init", "out");
      *out = reinterpret_cast<dlhost_comm*>(instance()->init(*args).release());
    });
  }
  static void finalize(dlhost_comm* c) { delete reinterpret_cast<Comm*>(c); }
  static dlhost_status* all_reduce(dlhost_comm* c, const void* send, void* recv, uint64_t count,
                                   int32_t dtype, int32_t op, int32_t memory_space,
                                   dlhost_request** out) {
    return issue("all_reduce", c, out, [&](Comm& cm) {
      return cm.all_reduce(send, recv, count, dtype, op, memory_space);
    });
  }
  static dlhost_status* broadcast(dlhost_comm* c, void* buffer, uint64_t count, int32_t dtype,
                                  int32_t root, int32_t memory_space, dlhost_request** out) {
    return issue("broadcast", c, out,
                 [&](Comm& cm) { return cm.broadcast(buffer, count, dtype, root, memory_space); });
  }
  static dlhost_status* all_gather(dlhost_comm* c, const void* send, void* recv, uint64_t count,
                                   int32_t dtype, int32_t memory_space, dlhost_request** out) {
    return issue("all_gather", c, out,
                 [&](Comm& cm) { return cm.all_gather(send, recv, count, dtype, memory_space); });
  }
  static dlhost_status* barrier(dlhost_comm* c, dlhost_request** out) {
    return issue("barrier", c, out, [&](Comm& cm) { return cm.barrier(); });
  }
  static dlhost_status* test(dlhost_request* r, int32_t* done) {
    return guard([&] {
      Request& req = request(r, "test");
      deref(done, "test", "done");
      *done = req.test() ? 1 : 0;
    });
  }
  static dlhost_status* wait(dlhost_request* r) {
    return guard([&] { request(r, "wait").wait(); });
  }
  static void request_free(dlhost_request* r) { delete reinterpret_cast<Request*>(r); }

  // The plugin's extensions (its option schema and its own), built once by the entry.
  static const dlhost_extension* extensions() {
    static ExtensionChain chain;
    static std::once_flag once;
    std::call_once(once, [] {
      if (auto declared = instance()->options()) chain.declare_options(std::move(*declared));
      instance()->link_extensions(chain);
    });
    return chain.head();
  }

  static const dlhost_comm_api& table() {
    static const dlhost_comm_api t = [] {
      auto a = make_struct<dlhost_comm_api>(DLHOST_COMM_API_STRUCT_SIZE);
      a.capabilities = capabilities;
      a.init = init;
      a.finalize = finalize;
      a.all_reduce = all_reduce;
      a.broadcast = broadcast;
      a.all_gather = all_gather;
      a.barrier = barrier;
      a.test = test;
      a.wait = wait;
      a.request_free = request_free;
      return a;
    }();
    return t;
  }
};

}  // namespace detail

// The whole body of a comm plugin's entry symbol:
//   extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* h) {
//     return dlhost::sdk::comm_plugin<MyComms>(h, {"my_comm", "1.0.0", "what it is"});
//   }
// P must be default-constructible and cheap to construct (start the library in init, not here).
template <class P>
const dlhost_plugin* comm_plugin(const dlhost_host_api* host, const PluginInfo& info) {
  using Table = detail::CommTable<P>;
  return detail::enter(
      host, info, &Table::query,
      [] {
        if (Table::instance() == nullptr) Table::instance() = new P();
      },
      [](dlhost_plugin& p) {
        p.kind = DLHOST_PLUGIN_COMM;
        p.comm = &Table::table();
        p.extensions = Table::extensions();
      });
}

}  // namespace dlhost::sdk

#endif  // DLHOST_COMM_KIT_HPP
