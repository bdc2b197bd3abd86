// plugin.cpp — cpu_tensorflow's face to the host, on the SDK's backend kit only
// (dlhost/backend_kit.hpp): the device (the CPU; TensorFlow does not say which ISA its oneDNN
// dispatches, so the CPU's best), the library string (TensorFlow's version, whether its oneDNN
// rewrite is on, the layout), the options schema (mode graph|xla, inter_op_threads), contexts
// and compile, on the framework kit (dlhost/framework_kit.hpp: the host-set options, the
// precision and optimizer refused at compile), and its own distributed runtime (tool_runtime.h).
// The model is model.cpp's.
// Thread-safety: the kit's.
#include <tensorflow/c/c_api.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "backend.h"
#include "dlhost/framework_kit.hpp"
#include "tool_runtime.h"

// Exported by libtensorflow_framework (tensorflow/core/util/util.h): whether the oneDNN graph
// rewrite runs, which TF_ENABLE_ONEDNN_OPTS decides once per process.
namespace tensorflow {
bool IsMKLEnabled();
}  // namespace tensorflow

namespace dlhost::cpu_tensorflow {

const char* onednn_setting() { return tensorflow::IsMKLEnabled() ? "on" : "off"; }

namespace {

namespace sdk = dlhost::sdk;

class TensorFlowBackend final : public sdk::FrameworkBackend<Context> {
 public:
  sdk::Device device(int32_t) const override { return sdk::cpu_device(sdk::cpu_info().best_isa()); }
  std::string library() const override {
    return std::string("TensorFlow ") + TF_Version() + " (oneDNN " + onednn_setting() + ", NHWC)";
  }
  int32_t query() const override { return -100; }  // a comparison, never the host's own choice

  std::optional<std::vector<sdk::OptionSpec>> options() const override {
    return std::vector<sdk::OptionSpec>{
        {"mode", DLHOST_OPTION_ENUM, "graph",
         "graph: TensorFlow's graph executor; xla: the same graph with XLA's CPU JIT on every "
         "op it clusters (ConfigProto global_jit_level ON_1, cpu_global_jit)",
         "graph|xla"},
        {"inter_op_threads", DLHOST_OPTION_INT, "0",
         "TensorFlow's inter-op pool; 0: as many as the threads option (intra-op)",
         sdk::kThreadsRange},
        {"ps_mode", DLHOST_OPTION_ENUM, "async",
         "comm: tf_ps: async (each worker's push applied on the parameter servers at once, Du et "
         "al.'s setting) or sync (SyncReplicasOptimizer's way: the mean of every worker's "
         "gradients, applied by the chief, each worker waiting for it)",
         "sync|async"},
        {"ps_tasks", DLHOST_OPTION_INT, "1",
         "comm: tf_ps: the parameter server tasks dlhost starts beside the workers (variables "
         "round-robin over them)",
         "1..16"}};
  }
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities caps = sdk::fp32_capabilities(DLHOST_OP_TIED_FC);
    caps.optimizers |= sdk::bit(DLHOST_OPTIMIZER_ADAMW);
    return caps;
  }

  // ABI 1.5: `comm: tf_collective` (collective.cpp), `comm: tf_ps` (ps.cpp).
  void link_extensions(sdk::ExtensionChain& chain) const override { link_tool_runtime(chain); }

  std::unique_ptr<Context> open_context(int32_t, const sdk::HostSettings& host,
                                        const sdk::Options& options) override {
    // TensorFlow's INFO lines at the first session (CPU feature guard, MLIR passes) would mix
    // into the case's stderr, which the host keeps as the case's diagnostics: warnings and
    // errors only, unless the user set the level.
    ::setenv("TF_CPP_MIN_LOG_LEVEL", "1", 0);
    const int64_t inter = options.get_int_in("inter_op_threads", 0, 0, sdk::kMaxThreads);
    const std::string mode = options.get("mode").value_or("graph");
    if (mode != "graph" && mode != "xla")
      sdk::invalid("cpu_tensorflow: option mode=" + mode + " (graph or xla)");
    auto context = std::make_unique<Context>();
    context->inter_op_threads = inter > 0 ? static_cast<int32_t>(inter) : host.threads;
    context->xla = mode == "xla";
    context->library = library();
    return context;
  }

  std::unique_ptr<sdk::Model> compile_graph(Context& context, const dlhost_graph& graph,
                                            const dlhost_optimizer_desc& optimizer,
                                            const sdk::HostSettings& host,
                                            const sdk::Options&) override {
    return compile_model(context, graph, optimizer, host);
  }
};

}  // namespace
}  // namespace dlhost::cpu_tensorflow

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<dlhost::cpu_tensorflow::TensorFlowBackend>(
      host, {"cpu_tensorflow", "0.1.0",
             "CPU training backend on TensorFlow's C API (graph ops, TF_AddGradients, "
             "ResourceApplyMomentum, ResourceApplyAdam)"});
}
