// handles.cpp — see handles.h.
#include "core/handles.h"

#include "core/plugin_registry.h"

namespace dlhost {

ContextHandle create_context(const LoadedPlugin& backend, int32_t device,
                             const dlhost_options& options) {
  const dlhost_backend_api* api = backend.table->backend;
  dlhost_context* context = nullptr;
  check_status(api->context_create(device, &options, &context), backend.name + " context_create");
  return ContextHandle(context, ContextDeleter{api});
}

ModelHandle compile_model(const LoadedPlugin& backend, dlhost_context* context,
                          const dlhost_graph* graph, const dlhost_optimizer_desc& optimizer,
                          const dlhost_options& options) {
  const dlhost_backend_api* api = backend.table->backend;
  dlhost_model* model = nullptr;
  check_status(api->compile(context, graph, &optimizer, &options, &model),
               backend.name + " compile");
  return ModelHandle(model, ModelDeleter{api});
}

CommSession::CommSession(const LoadedPlugin& plugin, const RankEnv& rank, dlhost_options options,
                         CommDevice device)
    : plugin_(plugin), api_(plugin.table->comm), options_(std::move(options)) {
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
  args.extensions = device.extensions;
  check_status(api_->init(&args, &comm_), "comm '" + name() + "' init (rank " +
                                              std::to_string(rank.rank) + " of " +
                                              std::to_string(rank.size) + ")");
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
