// backend.h — what plugin.cpp (the kit's Backend, kept free of torch headers so that it compiles
// in seconds) needs from the torch side of cpu_libtorch: the opened device and the compile call;
// and what the model reports of plugin.cpp's (the BLAS). DLHOST_TORCH_PLUGIN_NAME (CMake) is
// cpu_libtorch or cpu_libtorch2, the prefix of every message.
// Thread-safety: a Context and its models are used from one host thread at a time (the ABI's
// rule); libtorch's thread settings are per process (intra-op) or once per process (inter-op).
#ifndef DLHOST_CPU_LIBTORCH_BACKEND_H
#define DLHOST_CPU_LIBTORCH_BACKEND_H

#include <cstdint>
#include <memory>
#include <string>

#include "dlhost/framework_kit.hpp"

namespace dlhost::cpu_libtorch {

// A device opened for one case (host.threads is what the case asked for; 0: libtorch's default,
// one per core).
struct Context : sdk::FrameworkContext {
  int threads = 1;  // what libtorch really uses
  // Sets ATen's intra-op threads (OpenMP: per calling thread, so every step re-applies it; MKL's
  // with them), OpenBLAS's where the libtorch calls it (FC layers reach it through ATen's addmm;
  // at::set_num_threads leaves it alone) and, once per process, the inter-op pool.
  void apply_threads() const;
};

// The BLAS under ATen's linear layers with its version: "OpenBLAS 0.3.21 Cooperlake" (Debian's
// libtorch) or "MKL 2024.2" (the PyPI wheel).
std::string blas_library();
// The allocator under ATen's memory: "glibc", "tcmalloc", "jemalloc" (plugin.cpp).
std::string malloc_library();

// The graph lowered to ATen calls, trained with autograd and torch::optim::SGD. `plain_autograd`:
// every gradient through autograd's accumulation (no FC writing its own), as a tool runtime's
// gradient hooks need (tool_runtime.h).
std::unique_ptr<sdk::Model> compile_model(const Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer,
                                          const sdk::HostSettings& host,
                                          bool plain_autograd = false);

}  // namespace dlhost::cpu_libtorch

#endif  // DLHOST_CPU_LIBTORCH_BACKEND_H
