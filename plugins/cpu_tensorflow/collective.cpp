// collective.cpp — `comm: tf_collective`: TensorFlow's own synchronous data parallelism, the
// all-reduce MultiWorkerMirroredStrategy runs, from the C API, as cpu_tensorflow's tool runtime
// (ABI 1.5, DLHOST_EXT_TOOL_RUNTIME). What the strategy sets up, done by hand:
// - every rank picks a free port on its host address and publishes "host:port" through dlhost's
//   rendezvous store; a ServerDef needs every task's address up front, so each rank reads all of
//   them before it starts its server (cluster: job "worker", task r = rank r);
// - TF_NewServer + TF_ServerStart (gRPC), the group leader (/job:worker/replica:0/task:0) in the
//   server's default session config and the session's, the session's device_filters on its own
//   task (else it would wait for every task's devices), the session's target the server's;
// - in that session, CollectiveReduceV2 (merge Add, final Div: the mean over the group) on every
//   gradient, chained by control dependencies in the order backward produces the gradients (so
//   every rank launches them in one order); at attach, rank 0's variables broadcast to every
//   rank (CollectiveBcastSendV2/RecvV2), as the strategy does at variable creation.
// The model's own graph and session (forward, gradients, update) stay as on one rank: a step is
// the forward's run (loss and gradients), then backward runs the collectives on the fetched
// gradients in the server's session, then the update's run applies their means. The collectives
// thus start after the whole backward (no overlap with it); their run is the communication time.
// The server is never deleted (cluster.h: the process leaves through _exit).
// Thread-safety: one host thread per model.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "cluster.h"
#include "dlhost/dlhost.hpp"
#include "tool_runtime.h"

namespace dlhost::cpu_tensorflow {
namespace {

namespace sdk = dlhost::sdk;

constexpr const char* kCollective = "tf_collective";
constexpr const char* kJob = "worker";
constexpr const char* kLeader = "/job:worker/replica:0/task:0";
// One group (every rank's CPU), its collectives told apart by instance keys: the broadcast of
// parameter p is kBroadcastKey + p, the all-reduce of its gradient kReduceKey + p.
constexpr int64_t kGroupKey = 1, kBroadcastKey = 1, kReduceKey = 1000000;
// RunOptions.experimental.collective_graph_key of each of the two runs with collectives, the
// same on every rank (as TensorFlow's graph-mode collective tests set it): a master takes the
// step id of a run with a key from the group leader's sequence for it, so the ranks' runs agree.
constexpr int64_t kBroadcastGraphKey = 4101, kReduceGraphKey = 4102;

// This rank's server, started, in a cluster of every rank's address (exchanged through the
// store). Blocks until every rank's server is up (the first collective's group resolution needs
// the leader listening); `target` receives the server's.
TF_Server* start_worker_server(const dlhost_tool_runtime_args& a, const std::string& config,
                               std::string& target) {
  const std::string prefix = std::string(a.store_prefix) + kCollective + "/";
  const std::string mine = cluster::host_port(a.host, cluster::free_port(a.host));
  const std::string rank = std::to_string(a.rank);
  cluster::store_put(prefix + "address/" + rank, mine, "publishing rank " + rank + "'s server");
  cluster::Job workers{kJob, {}};
  for (int32_t r = 0; r < a.world_size; ++r)
    workers.addresses.push_back(cluster::store_take(prefix + "address/" + std::to_string(r),
                                                    a.timeout_ms,
                                                    "rank " + std::to_string(r) + "'s server"));
  TF_Server* server = cluster::start_server(cluster::server_def({workers}, kJob, a.rank, config),
                                            "tf_collective rank " + rank + " on " + mine);
  cluster::store_put(prefix + "started/" + rank, mine, "rank " + rank + "'s server start");
  for (int32_t r = 0; r < a.world_size; ++r)
    cluster::store_take(prefix + "started/" + std::to_string(r), a.timeout_ms,
                        "rank " + std::to_string(r) + "'s server start");
  target = TF_ServerTarget(server);
  return server;
}

TF_Output int_scalar(TF_Graph* g, const std::string& name, int32_t v) {
  tf::TensorPtr t = tf::int_tensor({});
  *static_cast<int32_t*>(TF_TensorData(t.get())) = v;
  return tf::Op(g, "Const", name).attr("dtype", TF_INT32).tensor("value", t.get()).out();
}

TF_Output shape_const(TF_Graph* g, const std::string& name, const std::vector<int64_t>& dims) {
  tf::TensorPtr t(TF_AllocateTensor(TF_INT64, std::vector<int64_t>{int64_t(dims.size())}.data(), 1,
                                    dims.size() * sizeof(int64_t)));
  if (!dims.empty())
    std::memcpy(TF_TensorData(t.get()), dims.data(), dims.size() * sizeof(int64_t));
  return tf::Op(g, "Const", name).attr("dtype", TF_INT64).tensor("value", t.get()).out();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Collective final : public ModelRuntime {
 public:
  Collective(RuntimeHost& host, const dlhost_tool_runtime_args& a) : graph_(TF_NewGraph()) {
    // The server's pools run the collectives only (the model keeps its own session): the case's
    // threads, and at least two inter-op threads so that one waiting collective never holds the
    // only one.
    const Context& context = host.context();
    const std::string config = cluster::session_config(
        context.host.threads, std::max(2, context.inter_op_threads),
        {"/job:" + std::string(kJob) + "/task:" + std::to_string(a.rank)}, kLeader);
    server_ = start_worker_server(a, config, target_);
    const std::vector<Variable>& vars = host.variables();
    TF_Graph* g = graph_.get();
    group_size_ = int_scalar(g, "collective/group_size", a.world_size);
    group_key_ = int_scalar(g, "collective/group_key", int32_t(kGroupKey));
    // The all-reduce of every gradient, launched in backward's order, one after the other.
    TF_Operation* previous = nullptr;
    reduced_.resize(vars.size());
    grads_.resize(vars.size());
    for (int32_t p : host.ready_order()) {
      const Variable& v = vars[size_t(p)];
      grads_[size_t(p)] = tf::Op(g, "Placeholder", "collective/" + v.name + "/grad")
                              .attr("dtype", TF_FLOAT)
                              .shape("shape", v.dims)
                              .out();
      tf::Op reduce(g, "CollectiveReduceV2", "collective/" + v.name + "/all_reduce");
      reduce.in(grads_[size_t(p)])
          .in(group_size_)
          .in(group_key_)
          .in(int_scalar(g, "collective/" + v.name + "/reduce_key", int32_t(kReduceKey + p)))
          .ins({})
          .attr("T", TF_FLOAT)
          .attr("merge_op", "Add")
          .attr("final_op", "Div")
          .attr("communication_hint", "auto");
      if (previous != nullptr) reduce.after(previous);
      reduced_[size_t(p)] = reduce.out();
      previous = reduced_[size_t(p)].oper;
      order_.push_back(p);
    }
    if (order_.size() != vars.size())
      sdk::fail(DLHOST_CODE_INTERNAL, "cpu_tensorflow: tf_collective: the gradients' order names " +
                                          std::to_string(order_.size()) + " of " +
                                          std::to_string(vars.size()) + " parameters");
    session_ = std::make_unique<tf::Session>(g, config, target_);
    if (a.world_size > 1) broadcast_from_rank0(host, a.rank);
  }

  void reduce_gradients(std::vector<tf::TensorPtr>& grads) override {
    std::vector<TF_Output> feeds, fetches;
    std::vector<TF_Tensor*> values;
    for (int32_t p : order_) {
      feeds.push_back(grads_[size_t(p)]);
      values.push_back(grads[size_t(p)].get());
      fetches.push_back(reduced_[size_t(p)]);
    }
    std::vector<tf::TensorPtr> out;
    const int64_t start = now_ns();
    session_->run(feeds, values, fetches, out, {}, "tf_collective: all-reduce of the gradients",
                  reduce_options_);
    comm_ms_.push_back(double(now_ns() - start) / 1e6);
    for (size_t k = 0; k < order_.size(); ++k) grads[size_t(order_[k])] = std::move(out[k]);
  }

  const std::vector<double>& comm_times() const override { return comm_ms_; }

 private:
  // MultiWorkerMirroredStrategy's start: every variable takes rank 0's value (one run of
  // CollectiveBcastSendV2 on rank 0, CollectiveBcastRecvV2 elsewhere, chained in one order).
  void broadcast_from_rank0(RuntimeHost& host, int32_t rank) {
    const std::vector<Variable>& vars = host.variables();
    TF_Graph* g = graph_.get();
    std::vector<TF_Output> feeds, fetches;
    std::vector<tf::TensorPtr> values;
    std::vector<TF_Operation*> targets;
    TF_Operation* previous = nullptr;
    for (size_t p = 0; p < vars.size(); ++p) {
      const Variable& v = vars[p];
      const std::string name = "collective/" + v.name + "/broadcast";
      TF_Output key = int_scalar(g, name + "_key", int32_t(kBroadcastKey + int64_t(p)));
      if (rank == 0) {
        TF_Output value = tf::Op(g, "Placeholder", name + "_value")
                              .attr("dtype", TF_FLOAT)
                              .shape("shape", v.dims)
                              .out();
        tf::Op send(g, "CollectiveBcastSendV2", name);
        send.in(value).in(group_size_).in(group_key_).in(key).attr("T", TF_FLOAT);
        if (previous != nullptr) send.after(previous);
        previous = send.finish();
        targets.push_back(previous);
        feeds.push_back(value);
        values.push_back(host.read_value(int32_t(p)));
      } else {
        tf::Op recv(g, "CollectiveBcastRecvV2", name);
        recv.in(group_size_)
            .in(group_key_)
            .in(key)
            .in(shape_const(g, name + "_shape", v.dims))
            .attr("T", TF_FLOAT)
            .attr("Tshape", TF_INT64);
        if (previous != nullptr) recv.after(previous);
        fetches.push_back(recv.out());
        previous = fetches.back().oper;
      }
    }
    std::vector<TF_Tensor*> raw;
    for (const tf::TensorPtr& t : values) raw.push_back(t.get());
    std::vector<tf::TensorPtr> out;
    session_->run(feeds, raw, fetches, out, targets,
                  "tf_collective: broadcast of rank 0's variables",
                  cluster::run_options_with_graph_key(kBroadcastGraphKey));
    for (size_t p = 0; p < out.size(); ++p) host.assign_value(int32_t(p), out[p].get());
  }

  TF_Server* server_ = nullptr;  // never deleted: see the file's top
  std::string target_;
  tf::GraphPtr graph_;
  TF_Output group_size_{}, group_key_{};
  std::vector<TF_Output> grads_, reduced_;  // by parameter id
  std::vector<int32_t> order_;              // the order the all-reduces are chained in
  std::unique_ptr<tf::Session> session_;
  const std::string reduce_options_ = cluster::run_options_with_graph_key(kReduceGraphKey);
  std::vector<double> comm_ms_;
};

}  // namespace

std::unique_ptr<ModelRuntime> attach_collective(RuntimeHost& host,
                                                const dlhost_tool_runtime_args& args) {
  if (host.fused())
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
              "cpu_tensorflow: tf_collective: the model was compiled with fused_step (its forward "
              "applies the update), so there are no gradients to all-reduce");
  return std::make_unique<Collective>(host, args);
}

const RuntimeText& collective_text() {
  static const std::string library = std::string("TensorFlow ") + TF_Version() +
                                     " CollectiveReduceV2 (ring over gRPC, one server per rank: "
                                     "MultiWorkerMirroredStrategy's all-reduce)";
  static const RuntimeText text{
      "sync", library.c_str(),
      "per step, the wall time of the session run of the CollectiveReduceV2 ops on every "
      "gradient (after the whole backward, before the update: feeding and fetching the "
      "gradients and the wait for the slowest rank included)"};
  return text;
}

}  // namespace dlhost::cpu_tensorflow
