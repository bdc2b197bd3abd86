// handles.h — the host's C++ layer over the ABI's objects: RAII owners for a backend's context
// and compiled model, and a comm plugin's communicator with its blocking helpers. Every host
// file that drives a plugin uses these instead of writing its own deleters; a status a plugin
// returns becomes a dlhost::Error naming the plugin and the call.
//
// Ownership: a ModelHandle must go before the ContextHandle it was compiled in (declare the
// context first). Thread-safety: as the plugin calls they wrap (one thread per model/comm).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/host_api.h"
#include "distributed/rank_env.h"
#include "dlhost/dlhost.h"

namespace dlhost {

struct LoadedPlugin;

struct ContextDeleter {
  const dlhost_backend_api* api;
  void operator()(dlhost_context* c) const { api->context_destroy(c); }
};
struct ModelDeleter {
  const dlhost_backend_api* api;
  void operator()(dlhost_model* m) const { api->model_destroy(m); }
};
using ContextHandle = std::unique_ptr<dlhost_context, ContextDeleter>;
using ModelHandle = std::unique_ptr<dlhost_model, ModelDeleter>;

// A context of `backend` on `device`; errors name the plugin. UNIMPLEMENTED, naming the backend,
// when it does not implement the options' "precision" (compatibility.h).
ContextHandle create_context(const LoadedPlugin& backend, int32_t device,
                             const dlhost_options& options);
// `graph` compiled in `context` with `optimizer`; errors name the plugin. UNIMPLEMENTED, before
// the backend sees the graph, when an op or attribute needs a newer ABI minor than the backend
// speaks or is missing from its published capabilities.
ModelHandle compile_model(const LoadedPlugin& backend, dlhost_context* context,
                          const dlhost_graph* graph, const dlhost_optimizer_desc& optimizer,
                          const dlhost_options& options);

// What a comm on a device is handed at init (ABI 1.2): the rank's device and the extension
// chain (dlhost_comm_stream_ext: the stream of the rank's model). The default is 1.1's: host
// memory, no device.
struct CommDevice {
  int32_t device = -1;
  const dlhost_extension* extensions = nullptr;  // borrowed for init
};

// A communicator of a comm plugin, initialized for this rank and finalized on destruction. The
// blocking helpers wait for and free their request. Each has its own rendezvous-store namespace
// (dlhost_comm_init_args.store_prefix, store_prefix()).
class CommSession {
 public:
  CommSession(const LoadedPlugin& plugin, const RankEnv& rank, dlhost_options options = {},
              CommDevice device = {});
  ~CommSession();
  CommSession(const CommSession&) = delete;
  CommSession& operator=(const CommSession&) = delete;

  const LoadedPlugin& plugin() const { return plugin_; }
  const std::string& name() const;
  const dlhost_comm_api* api() const { return api_; }
  dlhost_comm* get() const { return comm_; }
  const dlhost_comm_caps& caps() const { return caps_; }
  std::string library() const { return caps_.library != nullptr ? caps_.library : ""; }
  bool supports(int32_t dtype) const { return (caps_.dtypes >> dtype) & 1u; }
  const std::string& store_prefix() const { return store_prefix_; }

  // Waits for `r`; on failure frees it and throws. On success the caller still frees it.
  void wait(dlhost_request* r, const std::string& what) const;
  void release(dlhost_request* r) const { api_->request_free(r); }
  // wait + release.
  void complete(dlhost_request* r, const std::string& what) const;

  void barrier() const;
  // Ends a clean run before the comm is finalized: a barrier whose failure is ignored. A rank that
  // passes it knows every rank has finished its collectives, so closing its connections cuts
  // none off: Gloo fails a collective whose peer closed before it saw the collective complete,
  // even with all the data in (a 2-rank halving-doubling all-reduce failed so under load). Not
  // after a failure: the peers may be gone or waiting in another collective.
  void goodbye() const;
  // In place, on host memory.
  void all_reduce(void* data, uint64_t count, int32_t dtype, int32_t redop) const;
  void all_gather(const void* send, void* recv, uint64_t count, int32_t dtype) const;

 private:
  const LoadedPlugin& plugin_;
  const dlhost_comm_api* api_;
  dlhost_comm* comm_ = nullptr;
  dlhost_comm_caps caps_{};
  dlhost_options options_;  // must outlive the communicator: init keeps the pointer
  std::string store_prefix_;
};

}  // namespace dlhost
