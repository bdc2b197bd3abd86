// plugin.cpp — the gpu_cudnn backend's face to the host, on the SDK's backend kit: the devices
// as the CUDA runtime reports them (or why there is none), the library versions, contexts (a
// device and the case's options) and compile. The kit fills the C table; the ABI 1.2 extension
// chain (extensions.cpp) is hung on the plugin table here, after the kit has built it, because
// the kit has no hook for extensions yet.
#include <memory>
#include <string>

#include "extensions.h"
#include "model.h"

namespace dlhost::gpu_cudnn {
namespace {

class GpuBackend final : public sdk::Backend<Context> {
 public:
  int32_t device_count() const override { return probe().count; }
  sdk::Device device(int32_t index) const override { return describe_device(index); }
  std::string library() const override { return library_versions(); }
  // Above the CPU backends (0): a suite that names no backend runs on the GPU when there is one.
  int32_t query() const override {
    if (probe().count == 0) sdk::fail(DLHOST_CODE_UNAVAILABLE, probe().reason);
    return 10;
  }

  std::unique_ptr<Context> open(int32_t device, const sdk::Options& options) override {
    Settings base;
    base.device = device;
    auto context = std::make_unique<Context>();
    context->settings = read_settings(options, base);
    check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
    return context;
  }

  std::unique_ptr<sdk::Model> compile(Context& context, const dlhost_graph& graph,
                                      const dlhost_optimizer_desc& optimizer,
                                      const sdk::Options& options) override {
    Settings s = read_settings(options, context.settings);
    s.device = context.settings.device;
    return std::make_unique<Model>(graph, optimizer, s);
  }
};

}  // namespace
}  // namespace dlhost::gpu_cudnn

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  const dlhost_plugin* plugin = dlhost::sdk::backend_plugin<dlhost::gpu_cudnn::GpuBackend>(
      host, {"gpu_cudnn", "0.1.0",
             "single-GPU training backend on cuDNN 9 and cuBLAS (one CUDA stream per model)"});
  // The kit's table is a static object it owns but hands out const; it is not const itself.
  if (plugin != nullptr)
    const_cast<dlhost_plugin*>(plugin)->extensions = dlhost::gpu_cudnn::extension_chain();
  return plugin;
}
