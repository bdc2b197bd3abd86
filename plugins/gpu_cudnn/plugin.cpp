// plugin.cpp — the gpu_cudnn backend's face to the host, on the SDK's backend kit: the devices
// as the CUDA runtime reports them (or why there is none), the library versions, what it
// implements (capabilities, options, tensor reads: declared here, so that the kit's own checks,
// such as the precision a context may ask for, read the same declaration the host does),
// contexts (a device and the case's options) and compile. The device extensions (stream, events,
// device memory) are the kit's, published from its device virtuals (device_virtuals(); the CUDA
// side is in extensions.cpp), in the one chain with the rest.
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

  std::optional<std::vector<sdk::OptionSpec>> options() const override {
    return std::vector<sdk::OptionSpec>{
        {"algo", DLHOST_OPTION_ENUM, "heuristic",
         "convolution algorithms: cuDNN's heuristic, or autotuned on the layer's buffers at "
         "compile",
         "heuristic|exhaustive"},
        {"workspace_limit_mb", DLHOST_OPTION_INT, "1024",
         "most workspace one convolution call may use, MiB", "0..1073741824"}};
  }

  // Every op through ABI 1.4's Transformer ops, SGD and AdamW; fp32, tf32, and bf16 / fp16 for
  // the cuBLAS products (model.h; a convolution or LSTM graph refuses those two at compile).
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities c = sdk::fp32_capabilities(DLHOST_OP_TIED_FC);
    c.optimizers |= sdk::bit(DLHOST_OPTIMIZER_ADAMW);
    c.precisions |= sdk::bit(DLHOST_PRECISION_TF32) | sdk::bit(DLHOST_PRECISION_BF16) |
                    sdk::bit(DLHOST_PRECISION_FP16);
    c.memory_spaces = sdk::bit(DLHOST_MEMORY_DEVICE);
    c.asynchronous = true;
    return c;
  }
  // Every tensor keeps its own value buffer (no op computes in place): any can be read back.
  bool reads_tensors() const override { return true; }
  bool device_virtuals() const override { return true; }
  dlhost_buffer alloc_buffer(Context& c, uint64_t bytes, int32_t dtype) override {
    return alloc_device_buffer(c, bytes, dtype);
  }
  void free_buffer(Context& c, const dlhost_buffer& b) override { free_device_buffer(c, b); }
  void* host_alloc(Context& c, uint64_t bytes) override { return alloc_pinned(c, bytes); }
  void host_free(Context&, void* data) override { free_pinned(data); }
  void copy_to_host(Context& c, const dlhost_buffer& src, uint64_t offset, void* dst,
                    uint64_t bytes) override {
    copy_to_host_unordered(c, src, offset, dst, bytes);
  }
  void copy_from_host(Context& c, const void* src, const dlhost_buffer& dst, uint64_t offset,
                      uint64_t bytes) override {
    copy_from_host_unordered(c, src, dst, offset, bytes);
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
  return dlhost::sdk::backend_plugin<dlhost::gpu_cudnn::GpuBackend>(
      host, {"gpu_cudnn", "0.1.0",
             "single-GPU training backend on cuDNN 9 and cuBLAS (one CUDA stream per model)"});
}
