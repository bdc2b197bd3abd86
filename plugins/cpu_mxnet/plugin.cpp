// plugin.cpp — cpu_mxnet's face to the host, on the SDK's backend kit only
// (dlhost/backend_kit.hpp): the device (the ISA the oneDNN inside MXNet dispatches), the library
// (what libmxnet.so said of itself when the plugin was built: describe.cpp), the options (mode,
// engine), the capabilities (every op of the ABI, fp32), contexts (MXNet loaded for the case's
// threads and engine), the tool runtime `comm: mxnet_kvstore` (kvstore.h) and compile, on the
// framework kit (dlhost/framework_kit.hpp: the host-set
// options, the precision and optimizer refused at compile).
// Thread-safety: the kit's; MXNet's engine settings are per process (mxnet_library.h).
#include <memory>
#include <string>

#include "backend.h"
#include "dlhost/framework_kit.hpp"
#include "kvstore.h"
#include "mxnet_description.h"

namespace dlhost::cpu_mxnet {
namespace {

namespace sdk = dlhost::sdk;

class MxnetBackend final : public sdk::FrameworkBackend<Context> {
 public:
  // oneDNN (inside libmxnet) picks its kernels for the widest ISA of the CPU at run time; MXNet's
  // own kernels are built for the ISA the library string names.
  sdk::Device device(int32_t) const override { return sdk::cpu_device(sdk::cpu_info().best_isa()); }
  std::string library() const override { return DLHOST_MXNET_DESCRIPTION; }
  int32_t query() const override { return -100; }  // a comparison, never the host's own choice

  std::optional<std::vector<sdk::OptionSpec>> options() const override {
    return std::vector<sdk::OptionSpec>{
        {"mode", DLHOST_OPTION_ENUM, "hybridized",
         "hybridized: one CachedOp over the network's Symbol (Gluon's hybridize); imperative: "
         "one MXNet operator call at a time (Gluon without hybridize)",
         "hybridized|imperative"},
        {"engine", DLHOST_OPTION_ENUM, "ThreadedEnginePerDevice",
         "MXNET_ENGINE_TYPE; fixed per process when MXNet loads",
         "ThreadedEnginePerDevice|ThreadedEngine|NaiveEngine"},
        {"kvstore", DLHOST_OPTION_ENUM, "dist_sync",
         "comm: mxnet_kvstore: dist_sync (the servers sum every worker's gradients, the workers "
         "update) or dist_async (the servers update with each push)",
         "dist_sync|dist_async"},
        {"kvstore_servers", DLHOST_OPTION_INT, "1",
         "comm: mxnet_kvstore: the parameter servers dlhost starts beside the workers", "1..16"}};
  }
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities caps = sdk::fp32_capabilities(DLHOST_OP_TIED_FC);
    caps.optimizers |= sdk::bit(DLHOST_OPTIMIZER_ADAMW);
    return caps;
  }

  void link_extensions(sdk::ExtensionChain& chain) const override { link_tool_runtime(chain); }

  std::unique_ptr<Context> open_context(int32_t, const sdk::HostSettings& host,
                                        const sdk::Options& options) override {
    EngineRequest request;
    request.threads = host.threads;
    request.engine = options.get("engine").value_or(request.engine);
    auto context = std::make_unique<Context>();
    context->engine = load_mxnet(request);
    context->mode = mode_of(options, "hybridized");
    return context;
  }

  // The compile options are the case's; the context's are the fallback.
  std::unique_ptr<sdk::Model> compile_graph(Context& context, const dlhost_graph& graph,
                                            const dlhost_optimizer_desc& optimizer,
                                            const sdk::HostSettings& host,
                                            const sdk::Options& options) override {
    return compile_model(context, graph, optimizer, mode_of(options, context.mode), host);
  }

 private:
  static std::string mode_of(const sdk::Options& options, const std::string& fallback) {
    const std::string mode = options.get("mode").value_or(fallback);
    if (mode != "hybridized" && mode != "imperative")
      sdk::invalid("cpu_mxnet: option mode=" + mode + " (hybridized or imperative)");
    return mode;
  }
};

}  // namespace
}  // namespace dlhost::cpu_mxnet

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<dlhost::cpu_mxnet::MxnetBackend>(
      host, {"cpu_mxnet", "0.1.0",
             "CPU training backend on MXNet 1.9's C API (CachedOp or imperative, autograd, "
             "MXNet's SGD operators)"});
}
