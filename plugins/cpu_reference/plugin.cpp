// plugin.cpp — the ABI face of cpu_reference, on the SDK's backend kit (dlhost/backend_kit.hpp):
// the one CPU device, contexts (the options a case sets), compile, and the plugin's identity.
// The kit fills the C table and turns exceptions into statuses; Model (model.h) is the rest.
//
// The backend is the numerical oracle the fast backends are compared against: clarity first,
// speed last. It ranks below every other backend when the host chooses one for a suite.
// Thread-safety: the kit's (device descriptions built once; one model, one thread at a time).
#include <cblas.h>

#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "dlhost/backend_kit.hpp"
#include "model.h"

namespace cpu_reference {
namespace {

namespace sdk = dlhost::sdk;

// A context only remembers the options a case gave it; compile's own options win over them.
struct Context {
  std::optional<int64_t> seed, threads;
};

// "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." -> "0.3.21": the version is the word after "OpenBLAS".
std::string openblas_version() {
  std::istringstream config(openblas_get_config() != nullptr ? openblas_get_config() : "");
  std::string word, version = "unknown";
  while (config >> word)
    if (word == "OpenBLAS" && config >> version) break;
  return version;
}

class ReferenceBackend final : public sdk::Backend<Context> {
 public:
  // Plain loops dispatch nothing ISA-specific (OpenBLAS picks its own kernels).
  sdk::Device device(int32_t) const override { return sdk::cpu_device("generic"); }
  std::string library() const override { return "reference (OpenBLAS " + openblas_version() + ")"; }
  // Usable everywhere; ranked low so the host picks a fast backend first when free to choose.
  int32_t query() const override { return -100; }
  // No option of its own: threads and seed are host-set: any option a suite gives it is a mistake.
  std::optional<std::vector<sdk::OptionSpec>> options() const override { return sdk::no_options(); }
  // Capabilities: every op through ABI 1.4's Transformer ops, SGD and AdamW; plain fp32 loops,
  // no reduced precision.
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities caps = sdk::fp32_capabilities(DLHOST_OP_TIED_FC);
    caps.optimizers |= sdk::bit(DLHOST_OPTIMIZER_ADAMW);
    return caps;
  }
  // Every tensor keeps its own buffer, so any value can be read back (evaluation's logits).
  bool reads_tensors() const override { return true; }

  std::unique_ptr<Context> open(int32_t, const sdk::Options& options) override {
    auto context = std::make_unique<Context>();
    context->seed = options.get_int("seed");
    context->threads = options.get_int("threads");
    return context;
  }

  std::unique_ptr<sdk::Model> compile(Context& context, const dlhost_graph& graph,
                                      const dlhost_optimizer_desc& optimizer,
                                      const sdk::Options& options) override {
    auto threads = options.get_int("threads");
    if (!threads) threads = context.threads;
    // Only matrix products are threaded (OpenBLAS); the loops around them are single-threaded.
    if (threads && *threads > 0) openblas_set_num_threads(static_cast<int>(*threads));
    Settings settings;
    auto seed = options.get_int("seed");
    settings.seed = static_cast<uint64_t>(seed ? *seed : context.seed.value_or(42));
    settings.threads = openblas_get_num_threads();
    return std::make_unique<Model>(graph, optimizer, settings);
  }
};

}  // namespace
}  // namespace cpu_reference

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<cpu_reference::ReferenceBackend>(
      host,
      {"cpu_reference", "1.0.0",
       "numerical reference: textbook loops in float32 with double sums, im2col + OpenBLAS sgemm"});
}
