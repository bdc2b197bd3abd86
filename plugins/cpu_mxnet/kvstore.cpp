// kvstore.cpp — `comm: mxnet_kvstore`: MXNet's own distributed training, its kvstore `dist_sync`
// over ps-lite, as cpu_mxnet's tool runtime (ABI 1.5, DLHOST_EXT_TOOL_RUNTIME). What
// `python -m mxnet.kvstore_server` and a Gluon Trainer on `dist_sync` do, from the C API:
// - roles (runtime_roles): a scheduler and `kvstore_servers` parameter servers (option, default
//   1) beside the workers; dlhost starts each in a process of its own (runtime_serve: MXNet
//   loaded, MXInitPSEnv with DMLC_ROLE, MXKVStoreCreate("dist_sync"), MXKVStoreRunServer until
//   the workers' kvstores finalize and stop the servers);
// - every process's ps-lite variables come from the host's cluster text: DMLC_PS_ROOT_URI/PORT
//   the scheduler's place, DMLC_NODE_HOST and PORT the process's own (else ps-lite picks an
//   address itself), DMLC_NUM_WORKER/SERVER;
// - each worker (runtime_attach): MXKVStoreCreate("dist_sync") joins the job (ps-lite's barrier
//   of every node); one key per trainable array for its gradient and one for its value; the
//   values pulled back after the init, so that every worker starts from the kvstore's rank 0's
//   (ps-lite numbers the workers in the order they reach the scheduler, not by dlhost's rank:
//   only that rank's init reaches the servers);
// - after every backward: push every gradient, pull the servers' sum back into the same arrays
//   (on the CPU the pushed array is also the pull's target), wait, divide by the workers; the
//   model's own update then applies it on every worker alike. This is Gluon's Trainer with
//   update_on_kvstore=False: the servers aggregate, the workers update (the servers run no
//   optimizer, so none is set through the controller, which may only set one from its callback).
// `kvstore: dist_async` (option): no aggregation; each worker's push is applied by the servers at
// once with the case's SGD (an updater set from the servers' controller callback, on the
// workers' command: MXNet's server takes it nowhere else), and the workers pull the weights
// (update_on_kvstore, as MXNet's async training must); the model's own update does nothing.
// Communication time: per step, from the first push to the last pull's completion (nothing else
// runs on the engine meanwhile: backward has finished), measured by the worker.
// Thread-safety: one host thread per model; ps-lite's own threads move the data.
#include "kvstore.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "dlhost/dlhost.hpp"
#include "dlhost/runtime_cluster.hpp"
#include "mxnet_library.h"

namespace dlhost::cpu_mxnet {
namespace {

namespace sdk = dlhost::sdk;

constexpr const char* kRuntime = "mxnet_kvstore";
constexpr const char* kCommTime =
    "per step, after backward, from the first gradient's push to the last pull's completion "
    "(dist_sync: the servers' sum of every worker's gradients back in each worker's arrays; "
    "dist_async: the weights the servers updated with this worker's gradients), measured by the "
    "worker; not overlapped with backward";
// The command a worker sends the servers of a dist_async kvstore before its first push: the
// servers set their updater on it (MXNet's kController head, 0; MXNet's server may only set its
// updater from the controller callback: set before RunServer, it crashes).
constexpr int kSetUpdater = 0;

// The case's kvstore type (cpu_mxnet option `kvstore`): "dist_sync" or "dist_async".
std::string kvstore_type(const dlhost_options* options) {
  const std::string type = sdk::Options(options).get("kvstore").value_or("dist_sync");
  if (type != "dist_sync" && type != "dist_async")
    sdk::invalid("cpu_mxnet: option kvstore=" + type + " (dist_sync or dist_async)");
  return type;
}

// dist_async's servers update with MXNet's SGD operators, parameter by parameter: neither
// AdamW nor the ABI's clipping by the global norm (every parameter's gradient at once) is theirs.
void check_async_optimizer(const dlhost_optimizer_desc* opt) {
  if (opt == nullptr) sdk::invalid("cpu_mxnet: mxnet_kvstore dist_async: no optimizer given");
  if (opt->kind != DLHOST_OPTIMIZER_SGD || opt->clip_norm > 0)
    sdk::invalid(
        "cpu_mxnet: mxnet_kvstore dist_async updates on the servers with SGD (MXNet's "
        "sgd_update/sgd_mom_update per parameter): AdamW and clip_norm are not available there");
}

// An owned KVStoreHandle.
struct KvStore {
  KVStoreHandle h = nullptr;
  explicit KvStore(const std::string& type) {
    check(mx().MXKVStoreCreate(type.c_str(), &h), "MXKVStoreCreate");
  }
  ~KvStore() {
    // A worker's MXKVStoreFree waits for every other worker (ps-lite's Finalize barrier); worker
    // rank 0's also stops the servers.
    if (h != nullptr) mx().MXKVStoreFree(h);
  }
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;
};

// The ps-lite variables of a process of `role` ("worker", "server", "scheduler") at `self`.
void init_ps_env(const std::string& role, const sdk::RuntimeCluster& cluster,
                 const sdk::Endpoint& self) {
  auto scheduler = cluster.find("scheduler");
  auto servers = cluster.find("ps");
  auto workers = cluster.find("worker");
  if (scheduler == cluster.end() || scheduler->second.size() != 1 || servers == cluster.end() ||
      workers == cluster.end())
    sdk::invalid(
        "cpu_mxnet: mxnet_kvstore: the cluster needs workers, servers (ps) and one "
        "scheduler");
  const std::map<std::string, std::string> vars = {
      {"DMLC_ROLE", role},
      {"DMLC_PS_ROOT_URI", scheduler->second[0].address},
      {"DMLC_PS_ROOT_PORT", std::to_string(scheduler->second[0].port)},
      {"DMLC_NUM_WORKER", std::to_string(workers->second.size())},
      {"DMLC_NUM_SERVER", std::to_string(servers->second.size())},
      {"DMLC_NODE_HOST", self.address},
      {"PORT", std::to_string(self.port)}};
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : vars) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  check(mx().MXInitPSEnv(uint32_t(keys.size()), keys.data(), values.data()), "MXInitPSEnv");
}

// This process's place in the cluster: `name`'s entry `index`.
sdk::Endpoint place(const sdk::RuntimeCluster& cluster, const std::string& name, int index) {
  auto it = cluster.find(name);
  if (it == cluster.end() || index < 0 || size_t(index) >= it->second.size())
    sdk::invalid("cpu_mxnet: mxnet_kvstore: no " + name + " " + std::to_string(index) +
                 " in the cluster");
  return it->second[size_t(index)];
}

sdk::RuntimeCluster cluster_of(const dlhost_tool_runtime_args& args) {
  if (!DLHOST_HAS_FIELD(&args, dlhost_tool_runtime_args, cluster) || args.cluster == nullptr)
    sdk::invalid(
        "cpu_mxnet: mxnet_kvstore needs the host's cluster (a dlhost with ABI 1.5's "
        "extra roles)");
  try {
    return sdk::parse_runtime_cluster(args.cluster);
  } catch (const std::invalid_argument& e) {
    sdk::invalid(std::string("cpu_mxnet: ") + e.what());
  }
}

// The worker's side, attached to one model.
class KvStoreRuntime final : public ModelRuntime {
 public:
  KvStoreRuntime(RuntimeHost& host, int workers, const std::string& type)
      : kv_(type),
        async_(type == "dist_async"),
        values_(host.trainable_values()),
        grads_(host.trainable_grads()),
        workers_(workers) {
    const int n = int(grads_.size());
    for (int k = 0; k < n; ++k) {
      grad_keys_.push_back(k);
      value_keys_.push_back(n + k);
    }
    // Only the kvstore's rank 0's init reaches the servers; every worker then pulls it.
    std::vector<NDArrayHandle> v = values_;
    check(mx().MXKVStoreInit(kv_.h, uint32_t(n), value_keys_.data(), v.data()), "MXKVStoreInit");
    if (!async_) {
      std::vector<NDArrayHandle> g = grads_;
      check(mx().MXKVStoreInit(kv_.h, uint32_t(n), grad_keys_.data(), g.data()), "MXKVStoreInit");
    }
    check(mx().MXKVStorePull(kv_.h, uint32_t(n), value_keys_.data(), v.data(), 0), "MXKVStorePull");
    check(mx().MXNDArrayWaitAll(), "MXNDArrayWaitAll");
    if (async_)
      check(mx().MXKVStoreSendCommmandToServers(kv_.h, kSetUpdater, ""),
            "MXKVStoreSendCommmandToServers");
  }

  bool owns_update() const override { return async_; }

  void after_backward() override {
    const auto start = std::chrono::steady_clock::now();
    const uint32_t n = uint32_t(grads_.size());
    std::vector<NDArrayHandle> g = grads_, v = values_;
    // dist_sync: the gradients' sum comes back into them; dist_async: the servers apply each
    // push to the weights, which come back into the values.
    const std::vector<int>& keys = async_ ? value_keys_ : grad_keys_;
    std::vector<NDArrayHandle>& into = async_ ? v : g;
    // Priorities as Gluon's Trainer gives them (-index): the first layers' arrays go first.
    for (uint32_t k = 0; k < n; ++k)
      check(mx().MXKVStorePush(kv_.h, 1, &keys[k], &g[k], -int(k)), "MXKVStorePush");
    for (uint32_t k = 0; k < n; ++k)
      check(mx().MXKVStorePull(kv_.h, 1, &keys[k], &into[k], -int(k)), "MXKVStorePull");
    check(mx().MXNDArrayWaitAll(), "MXNDArrayWaitAll");
    times_.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    // The servers summed; the average is what one rank's update would see for the global batch.
    if (!async_ && workers_ > 1) {
      const Attrs scale = {{"scalar", number(1.0 / workers_)}};
      for (NDArrayHandle grad : grads_) invoke("_mul_scalar", {grad}, scale, {grad});
      check(mx().MXNDArrayWaitAll(), "MXNDArrayWaitAll");
    }
  }

  const std::vector<double>& comm_times() const { return times_; }

 private:
  KvStore kv_;
  bool async_ = false;
  std::vector<NDArrayHandle> values_, grads_;  // the model's (it outlives this runtime)
  std::vector<int> grad_keys_, value_keys_;
  int workers_ = 1;
  std::vector<double> times_;
};

const std::string& library_text(bool async) {
  auto text = [](bool a) {
    int version = 0;
    if (mx().MXGetVersion(&version) != 0) version = 0;
    return "MXNet " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
           "." + std::to_string(version % 100) + " kvstore " +
           (a ? "dist_async (ps-lite over ZeroMQ): workers push gradients, the servers update "
                "the weights with each push (SGD), workers pull the weights"
              : "dist_sync (ps-lite over ZeroMQ): workers push gradients, the servers sum them, "
                "workers pull and update (Gluon's update_on_kvstore=False)");
  };
  static const std::string sync_text = text(false), async_text = text(true);
  return async ? async_text : sync_text;
}

// A dist_async server's updater: the case's SGD on each push, per key (MXNet's sgd_update, or
// sgd_mom_update with the key's momentum).
struct ServerUpdater {
  KVStoreHandle kv = nullptr;
  dlhost_optimizer_desc opt{};
  std::map<int, NDArray> momentum;

  static void update(int key, NDArrayHandle recv, NDArrayHandle local, void* self) {
    auto& u = *static_cast<ServerUpdater*>(self);
    // The C API hands over copies of both handles (sharing the arrays): this updater frees them.
    const NDArray grad(recv), weight(local);
    const Attrs common{{"lr", number(u.opt.learning_rate)}, {"wd", number(u.opt.weight_decay)}};
    if (u.opt.momentum <= 0) {
      invoke("sgd_update", {weight.get(), grad.get()}, common, {weight.get()});
      return;
    }
    auto it = u.momentum.find(key);
    if (it == u.momentum.end())
      it = u.momentum.emplace(key, std::move(invoke("zeros_like", {weight.get()}, {}).at(0))).first;
    Attrs with_momentum = common;
    with_momentum.push_back({"momentum", number(u.opt.momentum)});
    invoke("sgd_mom_update", {weight.get(), grad.get(), it->second.get()}, with_momentum,
           {weight.get()});
  }
  // From the controller callback, on the server's own thread (the only place MXNet's server
  // takes an updater).
  static void control(int head, const char*, void* self) {
    auto& u = *static_cast<ServerUpdater*>(self);
    if (head == kSetUpdater) mx().MXKVStoreSetUpdater(u.kv, update, self);
  }
};

dlhost_status* query(const char* runtime) {
  return sdk::guard([&] {
    if (runtime == nullptr || std::string(runtime) != kRuntime)
      sdk::unimplemented("cpu_mxnet: no runtime '" + std::string(runtime ? runtime : "") +
                         "' (owns: mxnet_kvstore)");
  });
}

RuntimeHost& host_of(dlhost_model* model) {
  RuntimeHost* h = model == nullptr ? nullptr : runtime_host(*reinterpret_cast<sdk::Model*>(model));
  if (h == nullptr) sdk::invalid("cpu_mxnet: not a model of this backend");
  return *h;
}

dlhost_status* attach(dlhost_model* model, const dlhost_tool_runtime_args* args,
                      dlhost_tool_runtime_info* info) {
  return sdk::guard([&] {
    if (args == nullptr || !DLHOST_HAS_FIELD(args, dlhost_tool_runtime_args, optimizer))
      sdk::invalid("cpu_mxnet: runtime_attach: args missing or too short");
    sdk::check(query(args->runtime));
    if (args->role != DLHOST_RUNTIME_WORKER || args->world_size < 1 || args->rank < 0 ||
        args->rank >= args->world_size)
      sdk::invalid("cpu_mxnet: mxnet_kvstore: bad rank, world or role");
    const sdk::RuntimeCluster cluster = cluster_of(*args);
    const std::string type = kvstore_type(args->options);
    const bool async = type == "dist_async";
    if (async) check_async_optimizer(args->optimizer);
    RuntimeHost& h = host_of(model);
    init_ps_env("worker", cluster, place(cluster, "worker", args->rank));
    h.set_runtime(std::make_unique<KvStoreRuntime>(h, args->world_size, type));
    if (info != nullptr) {
      if (DLHOST_HAS_FIELD(info, dlhost_tool_runtime_info, mode))
        info->mode = async ? "async" : "sync";
      if (DLHOST_HAS_FIELD(info, dlhost_tool_runtime_info, library))
        info->library = library_text(async).c_str();
      if (DLHOST_HAS_FIELD(info, dlhost_tool_runtime_info, comm_time)) info->comm_time = kCommTime;
      if (DLHOST_HAS_FIELD(info, dlhost_tool_runtime_info, no_comm_time))
        info->no_comm_time = nullptr;
    }
  });
}

dlhost_status* comm_times(dlhost_model* model, double* ms, size_t capacity, size_t* count) {
  return sdk::guard([&] {
    auto* kv = dynamic_cast<KvStoreRuntime*>(host_of(model).runtime());
    if (kv == nullptr) sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "cpu_mxnet: no runtime attached");
    if (count == nullptr || (ms == nullptr && capacity > 0))
      sdk::invalid("cpu_mxnet: runtime_comm_times: null output");
    const std::vector<double>& times = kv->comm_times();
    for (size_t k = 0; k < times.size() && k < capacity; ++k) ms[k] = times[k];
    *count = times.size();
  });
}

dlhost_status* roles(const char* runtime, int32_t workers, const dlhost_options* options,
                     int32_t* counts) {
  return sdk::guard([&] {
    sdk::check(query(runtime));
    if (workers < 1 || counts == nullptr) sdk::invalid("cpu_mxnet: runtime_roles: bad arguments");
    counts[DLHOST_RUNTIME_PARAMETER_SERVER] =
        int32_t(sdk::Options(options).get_int_in("kvstore_servers", 1, 1, 16));
    counts[DLHOST_RUNTIME_SCHEDULER] = 1;
  });
}

// A server or the scheduler: MXNet loaded as a context would load it, then ps-lite's loop.
dlhost_status* serve(const dlhost_tool_runtime_args* args) {
  return sdk::guard([&] {
    if (args == nullptr || !DLHOST_HAS_FIELD(args, dlhost_tool_runtime_args, optimizer))
      sdk::invalid("cpu_mxnet: runtime_serve: args missing or too short");
    sdk::check(query(args->runtime));
    const char* role = args->role == DLHOST_RUNTIME_PARAMETER_SERVER ? "server"
                       : args->role == DLHOST_RUNTIME_SCHEDULER      ? "scheduler"
                                                                     : nullptr;
    if (role == nullptr)
      sdk::invalid("cpu_mxnet: mxnet_kvstore: role " + std::to_string(args->role) +
                   " is served by neither a server nor the scheduler");
    const sdk::RuntimeCluster cluster = cluster_of(*args);
    const sdk::Options options(args->options);
    const std::string type = kvstore_type(args->options);
    EngineRequest request;
    request.threads = int(options.get_int_in("threads", 0, 0, sdk::kMaxThreads));
    request.engine = options.get("engine").value_or(request.engine);
    load_mxnet(request);
    init_ps_env(role, cluster, place(cluster, sdk::runtime_role_name(args->role), int(args->rank)));
    KvStore kv(type);
    // dist_sync's servers only sum (no updater); dist_async's take the case's SGD, set when the
    // workers ask (ServerUpdater::control).
    ServerUpdater updater;
    updater.kv = kv.h;
    if (type == "dist_async") {
      check_async_optimizer(args->optimizer);
      updater.opt = *args->optimizer;
    }
    check(mx().MXKVStoreRunServer(kv.h, ServerUpdater::control, &updater), "MXKVStoreRunServer");
  });
}

}  // namespace

void link_tool_runtime(sdk::ExtensionChain& chain) {
  static dlhost_tool_runtime_ext ext = [] {
    dlhost_tool_runtime_ext e{};
    e.struct_size = DLHOST_TOOL_RUNTIME_EXT_STRUCT_SIZE;
    e.type = DLHOST_EXT_TOOL_RUNTIME;
    e.runtimes = kRuntime;
    e.runtime_query = query;
    e.runtime_attach = attach;
    e.runtime_comm_times = comm_times;
    e.runtime_roles = roles;
    e.runtime_serve = serve;
    return e;
  }();
  chain.link(&ext);
}

}  // namespace dlhost::cpu_mxnet
