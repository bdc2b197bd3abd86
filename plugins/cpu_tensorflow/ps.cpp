// ps.cpp — `comm: tf_ps` (built where the ABI has extra roles, DLHOST_RUNTIME_ROLE_LIMIT):
// TensorFlow's parameter servers as Du et al. ran them, from the C API, as cpu_tensorflow's tool
// runtime; asynchronous by default, synchronous with the cpu_tensorflow option `ps_mode: sync`
// (SyncReplicasOptimizer's accumulators and token queue: sync_replicas.h). dlhost starts the ps
// tasks (runtime_roles asks for `ps_tasks` of them, option, 1 by default; each is `dlhost
// runtime-role`, which calls runtime_serve: a TensorFlow server of job "ps" that serves until
// dlhost ends it) and hands every process the cluster ("worker=...;ps=...", host-chosen ports).
// Each worker:
// - starts its own server (job "worker", task = rank) in that cluster, and a session on it whose
//   device_filters are "/job:ps" and its own task;
// - builds, in a graph of the runtime's, the master copy of every variable on a ps task
//   (VarHandleOp, TF_SetDevice): variable p (the model's parameter order) on task p mod ps_tasks,
//   round-robin by variable as replica_device_setter's default strategy places them, with its
//   optimizer slots and apply ops (optimizer.cpp's add_update) on the same task, and a
//   ReadVariableOp of each; sync mode's global step and token queue on task 0;
// - rank 0 (the chief) initializes them from its model's variables; the others wait for it (a key
//   in dlhost's store);
// - each step: before the forward, pulls every variable (one run fetching the reads on the ps)
//   into its model's local variables; after the backward, pushes every gradient (one run); the
//   model's own update is then skipped. async: the push feeds the apply ops on the ps, no worker
//   waits for another. sync: the push feeds the accumulators and waits for a token (the chief's
//   run also takes the means, applies them and hands out the tokens), so every step's pull sees
//   the update of all workers' gradients of the step before, as 1 rank on the whole batch would.
// Every run of the runtime's session carries RunOptions.timeout_in_ms = the case's limit
// (args.timeout_ms): a sync worker waiting for a dead peer's gradient fails there at the latest
// (dlhost ends the case sooner when it sees the peer die).
// Communication time: per step, the pull's run plus the push's run (wall time; sync: with the
// wait for the other workers and the chief's update).
// Deviation from TensorFlow's between-graph replication: there the forward reads the remote
// variables inside the step's graph (transfers overlapping compute); here the pull is a run of its
// own into local copies, then the forward runs locally as on one rank.
// Thread-safety: one host thread per model (a worker); serve_ps blocks its process for good.
#include "tool_runtime.h"

#ifdef DLHOST_RUNTIME_ROLE_LIMIT
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cluster.h"
#include "dlhost/dlhost.hpp"
#include "dlhost/runtime_cluster.hpp"
#include "optimizer.h"
#include "sync_replicas.h"

namespace dlhost::cpu_tensorflow {
namespace {

namespace sdk = dlhost::sdk;

std::vector<cluster::Job> jobs_of(const char* text) {
  if (text == nullptr) sdk::invalid("cpu_tensorflow: tf_ps: the host gave no cluster");
  sdk::RuntimeCluster c;
  try {
    c = sdk::parse_runtime_cluster(text);
  } catch (const std::invalid_argument& e) {
    sdk::invalid(std::string("cpu_tensorflow: tf_ps: ") + e.what());
  }
  std::vector<cluster::Job> jobs;
  for (const char* name : {"worker", "ps"}) {
    cluster::Job j{name, {}};
    for (const sdk::Endpoint& e : c[name])
      j.addresses.push_back(cluster::host_port(e.address, e.port));
    if (j.addresses.empty())
      sdk::invalid(std::string("cpu_tensorflow: tf_ps: no ") + name + " in " + text);
    jobs.push_back(j);
  }
  return jobs;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The case's ps_mode (cpu_tensorflow option): true for "sync", false for "async" (the default).
bool sync_mode(const dlhost_options* options) {
  const std::string mode = sdk::Options(options).get("ps_mode").value_or("async");
  if (mode != "sync" && mode != "async")
    sdk::invalid("cpu_tensorflow: option ps_mode=" + mode + " (sync or async)");
  return mode == "sync";
}

class ParameterServers final : public ModelRuntime {
 public:
  ParameterServers(RuntimeHost& host, const dlhost_tool_runtime_args& a,
                   const dlhost_optimizer_desc& optimizer)
      : host_(host),
        graph_(TF_NewGraph()),
        sync_(sync_mode(a.options)),
        chief_(a.rank == 0),
        run_options_(cluster::run_options_with_timeout(a.timeout_ms)) {
    const std::vector<cluster::Job> jobs = jobs_of(a.cluster);
    const Context& context = host.context();
    const std::string rank = std::to_string(a.rank);
    const std::string config =
        cluster::session_config(context.host.threads, context.inter_op_threads,
                                {"/job:ps", "/job:worker/task:" + rank}, "");
    TF_Server* server = cluster::start_server(cluster::server_def(jobs, "worker", a.rank, config),
                                              "tf_ps worker " + rank);
    // The master copies: parameter p on ps task p mod tasks, with everything named after it
    // (its slots, its apply op, its accumulator) on the same task; the global step and the token
    // queue (sync) on task 0.
    std::map<std::string, std::string> device_of;
    const size_t tasks = jobs[1].addresses.size();
    for (size_t p = 0; p < host.variables().size(); ++p)
      device_of[host.variables()[p].name] = ps_device(p % tasks);
    {
      tf::DeviceScope scope([&](const std::string& op) {
        if (op.rfind(kSyncReplicasScope, 0) == 0) return ps_device(0);
        for (const auto& [name, device] : device_of)
          if (op == name || op.rfind(name + "/", 0) == 0) return device;
        return std::string();
      });
      for (const Variable& local : host.variables()) {
        Variable v = local;  // name, dims, count, layout
        v.handle = make_variable(graph_.get(), v.name, v.dims, 0.0f, ps_.initializers);
        v.read = tf::Op(graph_.get(), "ReadVariableOp", v.name + "/read")
                     .in({v.handle, 0})
                     .attr("dtype", TF_FLOAT)
                     .out();
        v.value = tf::Op(graph_.get(), "Placeholder", v.name + "/value")
                      .attr("dtype", TF_FLOAT)
                      .shape("shape", v.dims)
                      .out();
        v.assign = tf::Op(graph_.get(), "AssignVariableOp", v.name + "/assign")
                       .in({v.handle, 0})
                       .in(v.value)
                       .attr("dtype", TF_FLOAT)
                       .finish();
        ps_.params.push_back(v);
      }
      if (sync_)
        sync_replicas_ = add_sync_replicas(graph_.get(), ps_, optimizer, a.world_size);
      else
        update_ = add_update(graph_.get(), ps_, optimizer, false);
    }
    session_ = std::make_unique<tf::Session>(graph_.get(), config, TF_ServerTarget(server));
    const std::string key = std::string(a.store_prefix) + "tf_ps/initialized";
    if (a.rank == 0) {  // the chief: zero slots, its own initial values into the master copies
      tf::Op init(graph_.get(), "NoOp", "ps_initialize");
      for (TF_Operation* op : ps_.initializers) init.after(op);
      if (sync_) init.after(sync_replicas_.chief_init);
      std::vector<tf::TensorPtr> none;
      session_->run({}, {}, {}, none, {init.finish()}, "tf_ps: initializing the parameter servers",
                    run_options_);
      for (size_t p = 0; p < ps_.params.size(); ++p) {
        tf::TensorPtr value = host.read_value(int32_t(p));
        session_->run({ps_.params[p].value}, {value.get()}, {}, none, {ps_.params[p].assign},
                      "tf_ps: rank 0's value of " + ps_.params[p].name, run_options_);
      }
      cluster::store_put(key, "1", "tf_ps: the chief's initialization");
    } else {
      cluster::store_take(key, a.timeout_ms, "tf_ps: the chief's initialization");
    }
  }

  bool applies_update() const override { return true; }

  void before_forward() override {  // pull
    const int64_t start = now_ns();
    pull();
    pull_ms_ = double(now_ns() - start) / 1e6;
  }

  void reduce_gradients(std::vector<tf::TensorPtr>& grads) override {  // push
    std::vector<TF_Tensor*> values;
    for (const tf::TensorPtr& g : grads) values.push_back(g.get());
    std::vector<tf::TensorPtr> out;
    const int64_t start = now_ns();
    if (sync_) {
      // The gradients into the accumulators, then the next token (the chief: after its update).
      std::vector<TF_Output> feeds = sync_replicas_.grads;
      feeds.push_back(sync_replicas_.local_step);
      tf::TensorPtr step = tf::int64_scalar(local_step_);
      values.push_back(step.get());
      session_->run(feeds, values, {chief_ ? sync_replicas_.chief_token : sync_replicas_.token},
                    out, {}, "tf_ps: pushing the gradients and waiting for the step's update",
                    run_options_);
      std::memcpy(&local_step_, TF_TensorData(out[0].get()), sizeof local_step_);
    } else {
      session_->run(update_.grads, values, {}, out, {update_.step}, "tf_ps: pushing the gradients",
                    run_options_);
    }
    comm_ms_.push_back(pull_ms_ + double(now_ns() - start) / 1e6);
    pulled_ = false;
  }

  // The parameter servers' values into the model before the host reads its weights (the last
  // push's update is on the ps only); not a step's communication.
  void before_read() override {
    if (!pulled_) pull();
  }

  const std::vector<double>& comm_times() const override { return comm_ms_; }

 private:
  static std::string ps_device(size_t task) {
    return "/job:ps/replica:0/task:" + std::to_string(task);
  }

  // Every variable's value on its ps into the model's variable (one run).
  void pull() {
    std::vector<TF_Output> reads;
    for (const Variable& v : ps_.params) reads.push_back(v.read);
    std::vector<tf::TensorPtr> values;
    session_->run({}, {}, reads, values, {}, "tf_ps: pulling the variables", run_options_);
    for (size_t p = 0; p < values.size(); ++p) host_.assign_value(int32_t(p), values[p].get());
    pulled_ = true;
  }

  RuntimeHost& host_;
  tf::GraphPtr graph_;
  const bool sync_, chief_;
  const std::string run_options_;  // the case's limit on every run (RunOptions.timeout_in_ms)
  Lowered ps_;                     // params and initializers only: the master copies
  Update update_;                  // async: the apply ops on the pushed gradients
  SyncReplicas sync_replicas_;     // sync: accumulators, the chief's update, the tokens
  int64_t local_step_ = 0;         // sync: the last token, the global step this worker is at
  bool pulled_ = true;             // the model's variables hold the ps's values
  std::unique_ptr<tf::Session> session_;
  double pull_ms_ = 0;
  std::vector<double> comm_ms_;
};

}  // namespace

std::unique_ptr<ModelRuntime> attach_ps(RuntimeHost& host, const dlhost_tool_runtime_args& args) {
  if (args.optimizer == nullptr) sdk::invalid("cpu_tensorflow: tf_ps: the host gave no optimizer");
  if (args.optimizer->kind == DLHOST_OPTIMIZER_ADAMW)
    sdk::unimplemented(
        "cpu_tensorflow: tf_ps: AdamW on the parameter servers is not built (its "
        "per-update scalars are fed by the model's update)");
  if (host.fused())
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "cpu_tensorflow: tf_ps: a fused model");
  return std::make_unique<ParameterServers>(host, args, *args.optimizer);
}

// A ps task: its server in the cluster, serving until dlhost ends the process (a started server
// cannot stop: TF_ServerJoin returns only on an error).
void serve_ps(const dlhost_tool_runtime_args& a) {
  const std::vector<cluster::Job> jobs = jobs_of(a.cluster);
  const std::string config = cluster::session_config(0, 0, {}, "");
  TF_Server* server = cluster::start_server(cluster::server_def(jobs, "ps", a.rank, config),
                                            "tf_ps ps task " + std::to_string(a.rank));
  tf::StatusPtr status(TF_NewStatus());
  TF_ServerJoin(server, status.get());
  tf::check(status.get(), "tf_ps: ps task " + std::to_string(a.rank));
}

int32_t ps_tasks(const dlhost_options* options) {
  return int32_t(sdk::Options(options).get_int_in("ps_tasks", 1, 1, kMaxPsTasks));
}

const RuntimeText& ps_text(const dlhost_options* options) {
  static const std::string async_library =
      std::string("TensorFlow ") + TF_Version() +
      " parameter servers (gRPC; variables and their apply ops on /job:ps, round-robin by "
      "variable; asynchronous, Du et al.'s setting)";
  static const std::string sync_library =
      std::string("TensorFlow ") + TF_Version() +
      " parameter servers (gRPC; variables on /job:ps, round-robin by variable), synchronous as "
      "SyncReplicasOptimizer: ConditionalAccumulators (mean of all workers), the chief's update, "
      "a token queue";
  static const RuntimeText async_text{
      "async", async_library.c_str(),
      "per step, the wall time of the pull (every variable read from its parameter server, one "
      "run before the forward) plus the push (every gradient sent to its parameter server and "
      "applied there, one run after the backward)"};
  static const RuntimeText sync_text{
      "sync", sync_library.c_str(),
      "per step, the wall time of the pull (every variable read from its parameter server, one "
      "run before the forward) plus the push (every gradient into its accumulator on its "
      "parameter server, then the wait for the step's token: until every worker's gradient is "
      "in and the chief has applied their mean; one run after the backward)"};
  return sync_mode(options) ? sync_text : async_text;
}

}  // namespace dlhost::cpu_tensorflow

#endif  // DLHOST_RUNTIME_ROLE_LIMIT
