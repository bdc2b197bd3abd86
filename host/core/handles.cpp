// handles.cpp — see handles.h.
#include "core/handles.h"

#include <atomic>

#include "core/compatibility.h"
#include "core/plugin_registry.h"

namespace dlhost {

ContextHandle create_context(const LoadedPlugin& backend, int32_t device,
                             const dlhost_options& options) {
  const dlhost_backend_api* api = backend.table->backend;
  const char* precision = host_api()->option_get(&options, "precision");
  if (auto why = precision_gap(backend, precision != nullptr ? precision : "fp32"))
    throw Error(DLHOST_CODE_UNIMPLEMENTED, *why);
  dlhost_context* context = nullptr;
  check_status(api->context_create(device, &options, &context), backend.name + " context_create");
  return ContextHandle(context, ContextDeleter{api});
}

ModelHandle compile_model(const LoadedPlugin& backend, dlhost_context* context,
                          const dlhost_graph* graph, const dlhost_optimizer_desc& optimizer,
                          const dlhost_options& options) {
  const dlhost_backend_api* api = backend.table->backend;
  // Never hand a backend what its ABI minor cannot see (a 1.0 backend would read a 1.1 op as
  // garbage or train the wrong network), nor an op its capabilities do not list.
  if (auto why = abi_gap(backend, *graph)) throw Error(DLHOST_CODE_UNIMPLEMENTED, *why);
  if (auto why = ops_gap(backend, *graph)) throw Error(DLHOST_CODE_UNIMPLEMENTED, *why);
  if (auto why = optimizer_gap(backend, optimizer.kind))
    throw Error(DLHOST_CODE_UNIMPLEMENTED, *why);
  dlhost_model* model = nullptr;
  check_status(api->compile(context, graph, &optimizer, &options, &model),
               backend.name + " compile");
  return ModelHandle(model, ModelDeleter{api});
}

namespace {

// "comm<n>.<plugin>/", n counting the comms this process has made. Every rank of a case runs the
// same code and so makes its comms in the same order: the ranks agree on each comm's prefix, and
// two comms of one case (or of two cases run in one process) never share one.
std::string next_store_prefix(const std::string& plugin) {
  static std::atomic<int> made{0};
  return "comm" + std::to_string(made++) + "." + plugin + "/";
}

}  // namespace

CommSession::CommSession(const LoadedPlugin& plugin, const RankEnv& rank, dlhost_options options,
                         CommDevice device)
    : plugin_(plugin),
      api_(plugin.table->comm),
      options_(std::move(options)),
      store_prefix_(next_store_prefix(plugin.name)) {
  caps_.struct_size = DLHOST_COMM_CAPS_STRUCT_SIZE;
  check_status(api_->capabilities(&caps_), "comm '" + name() + "' capabilities");
  dlhost_comm_init_args args{};
  args.struct_size = DLHOST_COMM_INIT_ARGS_STRUCT_SIZE;
  args.rank = rank.rank;
  args.world_size = rank.size;
  args.local_rank = rank.local_rank;
  args.local_size = rank.local_size;
  args.device = device.device;
  args.options = &options_;
  args.store_prefix = store_prefix_.c_str();
  args.extensions = device.extensions;
  check_status(api_->init(&args, &comm_), "comm '" + name() + "' init (rank " +
                                              std::to_string(rank.rank) + " of " +
                                              std::to_string(rank.size) + ")");
  // Asked again once the comm runs: some answers need its runtime (Open MPI's
  // MPIX_Query_cuda_support is valid only after MPI_Init).
  check_status(api_->capabilities(&caps_), "comm '" + name() + "' capabilities");
}

CommSession::~CommSession() { api_->finalize(comm_); }

const std::string& CommSession::name() const { return plugin_.name; }

void CommSession::wait(dlhost_request* r, const std::string& what) const {
  if (r == nullptr) throw Error(DLHOST_CODE_INTERNAL, name() + ": " + what + ": NULL request");
  dlhost_status* failed = api_->wait(r);
  if (failed != nullptr) api_->request_free(r);
  check_status(failed, name() + ": " + what);
}

void CommSession::complete(dlhost_request* r, const std::string& what) const {
  wait(r, what);
  release(r);
}

void CommSession::barrier() const {
  dlhost_request* r = nullptr;
  check_status(api_->barrier(comm_, &r), name() + ": barrier");
  complete(r, "barrier");
}

void CommSession::goodbye() const {
  // The last barrier may fail on the rank that finished it last (its peer, done, closed first).
  dlhost_request* r = nullptr;
  if (StatusPtr(api_->barrier(comm_, &r)) || r == nullptr) return;
  StatusPtr ignored(api_->wait(r));
  api_->request_free(r);
}

void CommSession::all_reduce(void* data, uint64_t count, int32_t dtype, int32_t redop) const {
  dlhost_request* r = nullptr;
  check_status(api_->all_reduce(comm_, data, data, count, dtype, redop, DLHOST_MEMORY_HOST, &r),
               name() + ": all_reduce");
  complete(r, "all_reduce");
}

void CommSession::all_gather(const void* send, void* recv, uint64_t count, int32_t dtype) const {
  dlhost_request* r = nullptr;
  check_status(api_->all_gather(comm_, send, recv, count, dtype, DLHOST_MEMORY_HOST, &r),
               name() + ": all_gather");
  complete(r, "all_gather");
}

}  // namespace dlhost
