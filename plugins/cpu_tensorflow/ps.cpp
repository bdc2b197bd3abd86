// ps.cpp — `comm: tf_ps` (built where the ABI has extra roles, DLHOST_RUNTIME_ROLE_LIMIT):
// TensorFlow's parameter servers as Du et al. ran them, asynchronous, from the C API, as
// cpu_tensorflow's tool runtime. dlhost starts the ps tasks (runtime_roles asks for one; each is
// `dlhost runtime-role`, which calls runtime_serve: a TensorFlow server of job "ps" that serves
// until dlhost ends it) and hands every process the cluster ("worker=...;ps=...", host-chosen
// ports). Each worker:
// - starts its own server (job "worker", task = rank) in that cluster, and a session on it whose
//   device_filters are "/job:ps" and its own task;
// - builds, in a graph of the runtime's, the master copy of every variable on a ps task
//   (VarHandleOp, round-robin over the ps tasks, TF_SetDevice), its optimizer slots and the apply
//   ops (optimizer.cpp's add_update) on the same task, and a ReadVariableOp of each;
// - rank 0 (the chief) initializes them from its model's variables; the others wait for it (a key
//   in dlhost's store);
// - each step: before the forward, pulls every variable (one run fetching the reads on the ps)
//   into its model's local variables; after the backward, pushes every gradient (one run feeding
//   them to the apply ops on the ps); the model's own update is then skipped. Asynchronous: no
//   worker waits for another.
// Communication time: per step, the pull's run plus the push's run (wall time).
// Deviation from TensorFlow's between-graph replication: there the forward reads the remote
// variables inside the step's graph (transfers overlapping compute); here the pull is a run of its
// own into local copies, then the forward runs locally as on one rank.
// Thread-safety: one host thread per model (a worker); serve_ps blocks its process for good.
#include "tool_runtime.h"

#ifdef DLHOST_RUNTIME_ROLE_LIMIT
#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cluster.h"
#include "dlhost/dlhost.hpp"
#include "dlhost/runtime_cluster.hpp"
#include "optimizer.h"

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

class ParameterServers final : public ModelRuntime {
 public:
  ParameterServers(RuntimeHost& host, const dlhost_tool_runtime_args& a,
                   const dlhost_optimizer_desc& optimizer)
      : host_(host), graph_(TF_NewGraph()) {
    const std::vector<cluster::Job> jobs = jobs_of(a.cluster);
    const Context& context = host.context();
    const std::string rank = std::to_string(a.rank);
    const std::string config =
        cluster::session_config(context.host.threads, context.inter_op_threads,
                                {"/job:ps", "/job:worker/task:" + rank}, "");
    TF_Server* server = cluster::start_server(cluster::server_def(jobs, "worker", a.rank, config),
                                              "tf_ps worker " + rank);
    // The master copies: parameter p on ps task p mod tasks, with everything named after it
    // (its slots, its apply op) on the same task.
    std::map<std::string, std::string> device_of;
    const size_t tasks = jobs[1].addresses.size();
    for (size_t p = 0; p < host.variables().size(); ++p)
      device_of[host.variables()[p].name] = "/job:ps/replica:0/task:" + std::to_string(p % tasks);
    {
      tf::DeviceScope scope([&](const std::string& op) {
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
      update_ = add_update(graph_.get(), ps_, optimizer, false);
    }
    session_ = std::make_unique<tf::Session>(graph_.get(), config, TF_ServerTarget(server));
    const std::string key = std::string(a.store_prefix) + "tf_ps/initialized";
    if (a.rank == 0) {  // the chief: zero slots, its own initial values into the master copies
      tf::Op init(graph_.get(), "NoOp", "ps_initialize");
      for (TF_Operation* op : ps_.initializers) init.after(op);
      std::vector<tf::TensorPtr> none;
      session_->run({}, {}, {}, none, {init.finish()}, "tf_ps: initializing the parameter servers");
      for (size_t p = 0; p < ps_.params.size(); ++p) {
        tf::TensorPtr value = host.read_value(int32_t(p));
        session_->run({ps_.params[p].value}, {value.get()}, {}, none, {ps_.params[p].assign},
                      "tf_ps: rank 0's value of " + ps_.params[p].name);
      }
      cluster::store_put(key, "1", "tf_ps: the chief's initialization");
    } else {
      cluster::store_take(key, a.timeout_ms, "tf_ps: the chief's initialization");
    }
  }

  bool applies_update() const override { return true; }

  void before_forward() override {  // pull
    std::vector<TF_Output> reads;
    for (const Variable& v : ps_.params) reads.push_back(v.read);
    std::vector<tf::TensorPtr> values;
    const int64_t start = now_ns();
    session_->run({}, {}, reads, values, {}, "tf_ps: pulling the variables");
    for (size_t p = 0; p < values.size(); ++p) host_.assign_value(int32_t(p), values[p].get());
    pull_ms_ = double(now_ns() - start) / 1e6;
  }

  void reduce_gradients(std::vector<tf::TensorPtr>& grads) override {  // push
    std::vector<TF_Tensor*> values;
    for (const tf::TensorPtr& g : grads) values.push_back(g.get());
    std::vector<tf::TensorPtr> none;
    const int64_t start = now_ns();
    session_->run(update_.grads, values, {}, none, {update_.step}, "tf_ps: pushing the gradients");
    comm_ms_.push_back(pull_ms_ + double(now_ns() - start) / 1e6);
  }

  const std::vector<double>& comm_times() const override { return comm_ms_; }

 private:
  RuntimeHost& host_;
  tf::GraphPtr graph_;
  Lowered ps_;  // params and initializers only: the master copies
  Update update_;
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

const RuntimeText& ps_text() {
  static const std::string library = std::string("TensorFlow ") + TF_Version() +
                                     " parameter servers (gRPC; variables and their apply ops on "
                                     "/job:ps, Du et al.'s setting)";
  static const RuntimeText text{
      "async", library.c_str(),
      "per step, the wall time of the pull (every variable read from its parameter server, one "
      "run before the forward) plus the push (every gradient sent to its parameter server and "
      "applied there, one run after the backward)"};
  return text;
}

}  // namespace dlhost::cpu_tensorflow

#endif  // DLHOST_RUNTIME_ROLE_LIMIT
