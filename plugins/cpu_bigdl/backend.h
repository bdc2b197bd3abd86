// backend.h — what plugin.cpp (the kit's Backend) and model.cpp share: the context (the process's
// JVM with BigDL's engine) and the compile call, and the step-loop extension model.cpp
// implements (ABI 1.5, DLHOST_EXT_STEP_LOOP: BigDL's LocalOptimizer runs the case's steps), and
// the Spark job spark.cpp attaches a model to (DLHOST_EXT_TOOL_RUNTIME, `comm: bigdl_spark`).
// Thread-safety: a Context and its models are used from one host thread at a time (the ABI's
// rule); every JNI call runs on the JVM's own thread (jvm.h).
#ifndef DLHOST_CPU_BIGDL_BACKEND_H
#define DLHOST_CPU_BIGDL_BACKEND_H

#include <memory>
#include <string>
#include <vector>

#include "dlhost/framework_kit.hpp"
#include "jvm.h"

namespace dlhost::cpu_bigdl {

struct Context : sdk::FrameworkContext {
  Jvm* jvm = nullptr;
};

// The ops the lowering builds (model.cpp); every other op is UNIMPLEMENTED with its reason.
const std::vector<int32_t>& lowered_ops();

// The graph as a BigDL Sequential with its criterion and SGD; UNIMPLEMENTED for an op, a graph
// shape or a setting BigDL is not given here, with the reason.
std::unique_ptr<sdk::Model> compile_model(Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer);

// Publishes DLHOST_EXT_STEP_LOOP in the plugin's chain (called once by the kit).
void link_step_loop(sdk::ExtensionChain& chain);

// A model's part in `comm: bigdl_spark` (spark.cpp): this rank's Spark worker, and on rank 0 the
// driver. Set by runtime_attach; run_steps then trains through DistriOptimizer (rank 0) or times
// nothing (the other ranks).
struct SparkJob {
  Jvm* jvm = nullptr;  // the model's (the process's) JVM
  bool joined = false;
  int rank = 0, executors = 1;
  std::string library;
  // Per step since attach, DistriOptimizer's own (ms): its AllReduceParameter's time (the
  // gradients' reduce-scatter and the weights' all-gather, SparkCluster.java) and its
  // "computing time average"; zeros on the ranks that are not the driver.
  std::vector<double> comm_ms, compute_ms;
};

// The Spark job of a model of this backend; INVALID_ARGUMENT for another backend's model.
SparkJob& spark_job(dlhost_model* model);

// Publishes DLHOST_EXT_TOOL_RUNTIME (bigdl_spark) in the plugin's chain (spark.cpp).
void link_tool_runtime(sdk::ExtensionChain& chain);

}  // namespace dlhost::cpu_bigdl

#endif  // DLHOST_CPU_BIGDL_BACKEND_H
