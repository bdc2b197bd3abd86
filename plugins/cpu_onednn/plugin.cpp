// plugin.cpp — the cpu_onednn backend's face to the host, on the SDK's backend kit
// (dlhost/backend_kit.hpp): the device as oneDNN sees it (the ISA it dispatches, its version and
// threading runtime), contexts (engine, stream, threads, seed), compile, and the plugin's
// identity. The kit fills the C table, checks handles and turns exceptions into statuses.
// Thread-safety: the kit's (device descriptions built once; one model, one thread at a time).
#include <omp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlhost/backend_kit.hpp"
#include "model.h"

namespace dlhost::cpu_onednn {
namespace {

const char* runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_OMP:
      return "OMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_SEQ:
      return "SEQ";
    case DNNL_RUNTIME_THREADPOOL:
      return "THREADPOOL";
    default:
      return "unknown";
  }
}

class OnednnBackend final : public sdk::Backend<Context> {
 public:
  sdk::Device device(int32_t) const override {
    return sdk::cpu_device(compat::isa_name(dnnl::get_effective_cpu_isa()));
  }
  std::string library() const override {
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch) + " (cpu_runtime=" + runtime_name(v->cpu_runtime) + ")";
  }
  // No option of its own: the thread count and seed come from the host keys, nothing else.
  std::optional<std::vector<sdk::OptionSpec>> options() const override { return sdk::no_options(); }
  // Capabilities: every op up to ABI 1.4's Transformer ops, SGD and AdamW; fp32 (strict f32
  // primitives), and bf16 only where oneDNN dispatches bf16 products on this CPU (its ISA after
  // ONEDNN_MAX_CPU_ISA): elsewhere the host records a bf16 case SKIPPED, naming the ISA.
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities caps = sdk::fp32_capabilities(DLHOST_OP_TIED_FC);
    caps.optimizers |= sdk::bit(DLHOST_OPTIMIZER_ADAMW);
    if (has_bf16_isa()) caps.precisions |= sdk::bit(DLHOST_PRECISION_BF16);
    return caps;
  }
  // Every value can be read back between forward and backward, except a tensor that an
  // in-place successor overwrites (a ReLU, a residual sum): UNIMPLEMENTED names it.
  bool reads_tensors() const override { return true; }

  std::unique_ptr<Context> open(int32_t, const sdk::Options& options) override {
    auto context = std::make_unique<Context>();
    context->host = sdk::host_settings(options);
    context->apply_threads();
    context->threads = omp_get_max_threads();
    with_dnnl("engine", [&] {
      context->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
      context->stream = dnnl::stream(context->engine);
    });
    return context;
  }

  std::unique_ptr<sdk::Model> compile(Context& context, const dlhost_graph& graph,
                                      const dlhost_optimizer_desc& optimizer,
                                      const sdk::Options& options) override {
    // The compile options are the case's; the context's are the fallback for a host that
    // passes the seed only there. fused_step (ABI 1.4, never declared) is "1" when nothing reads
    // the gradients between backward and update (one rank, no comm, no gradient hook).
    const sdk::HostSettings host = sdk::host_settings(options, context.host);
    // bf16 without bf16 products names the ISA; the kit's refusal would say only the mode.
    if (host.precision == "bf16" && !has_bf16_isa())
      sdk::unimplemented(std::string(DLHOST_ONEDNN_PLUGIN_NAME) + ": " + bf16_isa_gap());
    // A precision or optimizer kind the capabilities lack, negative optimizer settings: refused
    // as every framework backend refuses them.
    sdk::check_compile(*capabilities(), host, optimizer);
    return std::make_unique<Model>(context, &graph, optimizer, static_cast<uint64_t>(host.seed),
                                   host.precision == "bf16", host.fused_step);
  }
};

}  // namespace
}  // namespace dlhost::cpu_onednn

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<dlhost::cpu_onednn::OnednnBackend>(
      host, {DLHOST_ONEDNN_PLUGIN_NAME, "0.1.0",
             "CPU training backend on " DLHOST_ONEDNN_WHICH
             " primitives (blocked layouts, OpenMP threads)"});
}
