// backend.h — what plugin.cpp (the kit's Backend) and model.cpp share: the context (the process's
// JVM with BigDL's engine) and the compile call, and the step-loop extension model.cpp
// implements (ABI 1.5, DLHOST_EXT_STEP_LOOP: BigDL's LocalOptimizer runs the case's steps).
// Thread-safety: a Context and its models are used from one host thread at a time (the ABI's
// rule); every JNI call runs on the JVM's own thread (jvm.h).
#ifndef DLHOST_CPU_BIGDL_BACKEND_H
#define DLHOST_CPU_BIGDL_BACKEND_H

#include <memory>

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

}  // namespace dlhost::cpu_bigdl

#endif  // DLHOST_CPU_BIGDL_BACKEND_H
