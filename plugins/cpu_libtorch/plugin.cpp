// plugin.cpp — cpu_libtorch's face to the host, on the SDK's backend kit only
// (dlhost/backend_kit.hpp): the device as libtorch sees it (the vector ISA ATen dispatches, the
// library's version with its oneDNN and BLAS), contexts (threads), compile (on the framework kit,
// dlhost/framework_kit.hpp: the host-set options, the precision and optimizer refused) and the
// plugin's identity (from CMake: this source is cpu_libtorch on Debian's libtorch 1.13 and
// cpu_libtorch2 on the PyPI wheel). Only light torch headers here (threads, build configuration):
// the model's ATen code is in model.cpp and ops.cpp. Thread-safety: the kit's; the inter-op pool is
// sized once per process (libtorch allows no more).
#include <dlfcn.h>

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/util/Exception.h>
#include <torch/version.h>
#ifdef DLHOST_TORCH_OPENBLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "backend.h"
#include "dlhost/backend_kit.hpp"
#include "tool_runtime.h"

namespace dlhost::cpu_libtorch {
namespace {

namespace sdk = dlhost::sdk;

// The rest of the line of at::show_config() that starts with `key` (trimmed), or "".
std::string config_line(const std::string& key) {
  const std::string config = at::show_config();
  const size_t at = config.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size(), end = config.find('\n', begin);
  std::string value = config.substr(begin, end - begin);
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!value.empty() && space(value.back())) value.pop_back();
  return value.substr(std::find_if_not(value.begin(), value.end(), space) - value.begin());
}

// Up to the first space, ')' or ','.
std::string first_word(const std::string& s) { return s.substr(0, s.find_first_of(" ),")); }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

void set_interop_threads_once(int threads) {
  static std::once_flag once;
  std::call_once(once, [threads] {
    try {
      at::set_num_interop_threads(threads);
    } catch (const c10::Error& e) {  // the pool already started: libtorch keeps its size
      sdk::log(DLHOST_LOG_DEBUG, DLHOST_TORCH_PLUGIN_NAME, e.what_without_backtrace());
    }
  });
}

class TorchBackend final : public sdk::FrameworkBackend<Context> {
 public:
  sdk::Device device(int32_t) const override {
    // "CPU capability usage: AVX2": ATen's own kernels; oneDNN's are the same library dlhost's
    // cpu_onednn reports.
    const std::string isa = lower(config_line("CPU capability usage:"));
    return sdk::cpu_device(isa.empty() ? "default" : isa);
  }
  // "libtorch 1.13.0 (ATen avx2, oneDNN 2.6.3, OpenMP 4.5, OpenBLAS 0.3.21 Cooperlake, malloc
  // glibc)"
  std::string library() const override {
    return std::string("libtorch ") + TORCH_VERSION + " (ATen " + device(0).isa + ", oneDNN " +
           first_word(config_line("MKL-DNN v")) + ", OpenMP " +
           first_word(config_line("a.k.a. OpenMP ")) + ", " + blas_library() + ", malloc " +
           malloc_library() + ")";
  }
  int32_t query() const override { return -100; }  // a comparison, never the host's own choice
  // Capabilities (published from ABI 1.4 on, so that the host offers it AdamW): every op through
  // the Transformer's, SGD and AdamW, strict fp32.
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities caps = sdk::fp32_capabilities(DLHOST_OP_TIED_FC);
    caps.optimizers |= sdk::bit(DLHOST_OPTIMIZER_ADAMW);
    return caps;
  }

  // ABI 1.5: `comm: torch_ddp` (ddp.cpp).
  void link_extensions(sdk::ExtensionChain& chain) const override { link_tool_runtime(chain); }

  std::unique_ptr<Context> open_context(int32_t, const sdk::HostSettings& host,
                                        const sdk::Options&) override {
    auto context = std::make_unique<Context>();
    context->host = host;  // apply_threads reads it now (the kit sets it after open_context too)
    context->apply_threads();
    context->threads = at::get_num_threads();
    return context;
  }

  std::unique_ptr<sdk::Model> compile_graph(Context& context, const dlhost_graph& graph,
                                            const dlhost_optimizer_desc& optimizer,
                                            const sdk::HostSettings& host,
                                            const sdk::Options& options) override {
    // A model for `comm: torch_ddp` (ABI 1.5's compile option): DDP's hooks sit on autograd's
    // gradient accumulation, which an FC writing its own gradients bypasses.
    const bool tool_runtime = options.get("tool_runtime").has_value();
    return compile_model(context, graph, optimizer, host, tool_runtime);
  }
};

}  // namespace

// The allocator ATen's memory comes from: where `malloc` resolves for this library, in its own
// link-map namespace for cpu_libtorch2 (the case's allocator reaches it only when the loader
// opened the namespace with it: namespace_loader.cpp). "glibc", "tcmalloc", "jemalloc" or the
// library's file name.
std::string malloc_library() {
  Dl_info info{};
  void* (*const address)(size_t) = &malloc;
  if (dladdr(reinterpret_cast<void*>(address), &info) == 0 || info.dli_fname == nullptr)
    return "unknown";
  const std::string file = info.dli_fname;
  if (file.find("libc.so") != std::string::npos) return "glibc";
  if (file.find("tcmalloc") != std::string::npos) return "tcmalloc";
  if (file.find("jemalloc") != std::string::npos) return "jemalloc";
  return file.substr(file.rfind('/') + 1);
}

// Where the libtorch links OpenBLAS (Debian's), OpenBLAS's own report; else what
// at::show_config() says (the PyPI wheel: MKL, linked into libtorch_cpu.so).
std::string blas_library() {
#ifdef DLHOST_TORCH_OPENBLAS
  const std::string blas = openblas_get_config();  // "OpenBLAS 0.3.21 NO_LAPACKE ..."
  return blas.substr(0, blas.find(' ', blas.find(' ') + 1)) + " " + openblas_get_corename();
#else
  // "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for ..."
  const std::string mkl = config_line("Math Kernel Library Version ");
  if (!mkl.empty()) return "MKL " + mkl.substr(0, mkl.find_first_of("- "));
  const std::string info = first_word(config_line("BLAS_INFO="));  // "BLAS_INFO=mkl, ..."
  return "BLAS " + (info.empty() ? std::string("unknown") : info);
#endif
}

void Context::apply_threads() const {
  const int wanted = host.threads > 0 ? host.threads : at::get_num_threads();
  // In an MKL build at::set_num_threads sets MKL's threads too.
  if (at::get_num_threads() != wanted) at::set_num_threads(wanted);
#ifdef DLHOST_TORCH_OPENBLAS
  if (openblas_get_num_threads() != wanted) openblas_set_num_threads(wanted);
#endif
  set_interop_threads_once(wanted);
}

}  // namespace dlhost::cpu_libtorch

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<dlhost::cpu_libtorch::TorchBackend>(
      host,
      {DLHOST_TORCH_PLUGIN_NAME, DLHOST_TORCH_PLUGIN_VERSION, DLHOST_TORCH_PLUGIN_DESCRIPTION});
}
