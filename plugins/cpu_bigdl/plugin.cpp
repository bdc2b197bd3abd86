// plugin.cpp — cpu_bigdl's face to the host, on the SDK's framework kit: the device (the ISA
// BigDL's MKL dispatches for this CPU), the library (BigDL, Spark, Scala and Java versions, as
// configure found them), the capabilities (the ops model.cpp lowers, fp32, SGD), contexts (the
// process's JVM with BigDL's engine on the case's threads, jvm.h), compile (model.cpp), and the
// step-loop extension (ABI 1.5: BigDL's LocalOptimizer owns the loop) and the tool runtime
// `comm: bigdl_spark` (BigDL's DistriOptimizer on a Spark standalone cluster, spark.cpp).
// Thread-safety: the kit's; the JVM is per process (jvm.h).
#include <memory>
#include <string>

#include "backend.h"
#include "bigdl_config.h"
#include "dlhost/framework_kit.hpp"

namespace dlhost::cpu_bigdl {
namespace {

namespace sdk = dlhost::sdk;

class BigDLBackend final : public sdk::FrameworkBackend<Context> {
 public:
  // bigdl-core's MKL (libmklml_intel) picks its kernels for the widest ISA of the CPU at run time.
  sdk::Device device(int32_t) const override { return sdk::cpu_device(sdk::cpu_info().best_isa()); }
  std::string library() const override { return DLHOST_BIGDL_LIBRARY; }
  int32_t query() const override { return -100; }  // a comparison, never the host's own choice

  std::optional<std::vector<sdk::OptionSpec>> options() const override {
    return std::vector<sdk::OptionSpec>{};
  }
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities caps;
    caps.ops = lowered_ops();
    return caps;
  }
  bool reads_tensors() const override { return true; }
  void link_extensions(sdk::ExtensionChain& chain) const override {
    link_step_loop(chain);
    link_tool_runtime(chain);  // comm: bigdl_spark (spark.cpp)
  }

  std::unique_ptr<Context> open_context(int32_t, const sdk::HostSettings& host,
                                        const sdk::Options&) override {
    auto context = std::make_unique<Context>();
    context->jvm = &Jvm::get(host.threads);
    return context;
  }

  std::unique_ptr<sdk::Model> compile_graph(Context& context, const dlhost_graph& graph,
                                            const dlhost_optimizer_desc& optimizer,
                                            const sdk::HostSettings& host,
                                            const sdk::Options&) override {
    if (host.threads != context.jvm->threads())
      sdk::unimplemented("cpu_bigdl: threads=" + std::to_string(host.threads) +
                         " at compile, the JVM runs BigDL on " +
                         std::to_string(context.jvm->threads()) + " (one JVM per process)");
    return compile_model(context, graph, optimizer);
  }
};

}  // namespace
}  // namespace dlhost::cpu_bigdl

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<dlhost::cpu_bigdl::BigDLBackend>(
      host, {"cpu_bigdl", "0.1.0",
             "CPU training backend on BigDL DLlib 2.4 (Spark 3.1's jars) in a JVM hosted through "
             "JNI: BigDL's own layers, criterion and SGD; LocalOptimizer owns the loop, "
             "DistriOptimizer on "
             "Spark for comm bigdl_spark"});
}
