// sync_replicas.cpp — see sync_replicas.h. Op and attribute names from TensorFlow's
// data_flow_ops (ResourceConditionalAccumulator, ResourceAccumulatorApplyGradient,
// ResourceAccumulatorTakeGradient, ResourceAccumulatorSetGlobalStep, FIFOQueueV2,
// QueueEnqueueManyV2, QueueDequeueV2) and resource_variable_ops.
#include "sync_replicas.h"

#include <cstring>
#include <string>

using dlhost::cpu_tensorflow::tf::Op;

namespace dlhost::cpu_tensorflow {

namespace {

TF_Output int64_const(TF_Graph* g, const std::string& name, int64_t v) {
  tf::TensorPtr t = tf::int64_scalar(v);
  return Op(g, "Const", name).attr("dtype", TF_INT64).tensor("value", t.get()).out();
}

TF_Output int32_scalar_const(TF_Graph* g, const std::string& name, int32_t v) {
  tf::TensorPtr t = tf::int_tensor({});
  std::memcpy(TF_TensorData(t.get()), &v, sizeof v);
  return Op(g, "Const", name).attr("dtype", TF_INT32).tensor("value", t.get()).out();
}

std::string scoped(const char* name) { return std::string(kSyncReplicasScope) + name; }

}  // namespace

SyncReplicas add_sync_replicas(TF_Graph* g, Lowered& ps, const dlhost_optimizer_desc& optimizer,
                               int32_t workers) {
  SyncReplicas s;
  // Fed by every worker; unnamed after any variable, so on the worker's own task.
  s.local_step =
      Op(g, "Placeholder", "sync_local_step").attr("dtype", TF_INT64).shape("shape", {}).out();
  const TF_Output zero = int64_const(g, scoped("zero"), 0);
  const TF_Output required = int32_scalar_const(g, scoped("replicas_to_aggregate"), workers);
  TF_Operation* global_step = Op(g, "VarHandleOp", scoped("global_step"))
                                  .attr("dtype", TF_INT64)
                                  .shape("shape", {})
                                  .attr("shared_name", scoped("global_step").c_str())
                                  .finish();
  Op chief_init(g, "NoOp", scoped("chief_init"));
  chief_init.after(Op(g, "AssignVariableOp", scoped("global_step/init"))
                       .in({global_step, 0})
                       .in(zero)
                       .attr("dtype", TF_INT64)
                       .finish());
  std::vector<TF_Operation*> applied;  // every gradient of this worker into its accumulator
  std::vector<TF_Output> means;        // the chief's takes, by parameter id
  for (const Variable& v : ps.params) {
    TF_Output grad =
        Op(g, "Placeholder", v.name + "/grad").attr("dtype", TF_FLOAT).shape("shape", v.dims).out();
    s.grads.push_back(grad);
    const std::string accum_name = v.name + "/grad_accum";
    // Shared by name: every worker's session reaches the same accumulator on the ps.
    TF_Output accum = Op(g, "ResourceConditionalAccumulator", accum_name)
                          .attr("dtype", TF_FLOAT)
                          .shape("shape", v.dims)
                          .attr("shared_name", accum_name.c_str())
                          .attr("reduction_type", "MEAN")
                          .out();
    TF_Operation* apply = Op(g, "ResourceAccumulatorApplyGradient", v.name + "/grad_accum/apply")
                              .in(accum)
                              .in(s.local_step)
                              .in(grad)
                              .attr("dtype", TF_FLOAT)
                              .finish();
    applied.push_back(apply);
    // After the chief's own gradient is in; then it waits for the other workers'.
    means.push_back(Op(g, "ResourceAccumulatorTakeGradient", v.name + "/grad_accum/take")
                        .in(accum)
                        .in(required)
                        .attr("dtype", TF_FLOAT)
                        .after(apply)
                        .out());
    chief_init.after(Op(g, "ResourceAccumulatorSetGlobalStep", v.name + "/grad_accum/set_step")
                         .in(accum)
                         .in(zero)
                         .finish());
  }
  s.chief_init = chief_init.finish();
  // The optimizer reads the means as a fused step reads its gradients (optimizer.h).
  const std::vector<TF_Output> own = ps.grads;
  ps.grads = means;
  s.update = add_update(g, ps, optimizer, true);
  ps.grads = own;
  TF_Operation* increment = Op(g, "AssignAddVariableOp", scoped("global_step/increment"))
                                .in({global_step, 0})
                                .in(int64_const(g, scoped("one"), 1))
                                .attr("dtype", TF_INT64)
                                .after(s.update.step)
                                .finish();
  TF_Output step = Op(g, "ReadVariableOp", scoped("global_step/read"))
                       .in({global_step, 0})
                       .attr("dtype", TF_INT64)
                       .after(increment)
                       .out();
  TF_Output tokens = Op(g, "Fill", scoped("tokens"))
                         .in(ints_const(g, scoped("tokens/count"), {workers}))
                         .in(step)
                         .out();
  TF_Output queue = Op(g, "FIFOQueueV2", scoped("token_queue"))
                        .attr_types("component_types", {TF_INT64})
                        .attr("capacity", int64_t(-1))
                        .attr("shared_name", "sync_token_q")
                        .out();
  TF_Operation* enqueue = Op(g, "QueueEnqueueManyV2", scoped("token_queue/enqueue"))
                              .in(queue)
                              .ins({tokens})
                              .attr_types("Tcomponents", {TF_INT64})
                              .finish();
  Op token(g, "QueueDequeueV2", scoped("token_queue/dequeue"));
  Op chief_token(g, "QueueDequeueV2", scoped("token_queue/chief_dequeue"));
  for (TF_Operation* op : applied) {
    token.after(op);
    chief_token.after(op);
  }
  s.token = token.in(queue).attr_types("component_types", {TF_INT64}).out();
  s.chief_token =
      chief_token.in(queue).attr_types("component_types", {TF_INT64}).after(enqueue).out();
  return s;
}

}  // namespace dlhost::cpu_tensorflow
