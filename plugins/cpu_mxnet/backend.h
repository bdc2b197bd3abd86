// backend.h — what plugin.cpp (the kit's Backend) and model.cpp share: the device opened for a
// case (MXNet loaded with its engine settings, the mode, the seed) and the compile call.
// Thread-safety: a Context and its models are used from one host thread at a time (the ABI's
// rule); MXNet's engine settings are per process.
#ifndef DLHOST_CPU_MXNET_BACKEND_H
#define DLHOST_CPU_MXNET_BACKEND_H

#include <cstdint>
#include <memory>
#include <string>

#include "dlhost/framework_kit.hpp"
#include "mxnet_library.h"

namespace dlhost::cpu_mxnet {

// A device opened for one case (the host's threads and seed in host).
struct Context : sdk::FrameworkContext {
  EngineState engine;               // what MXNet was loaded with
  std::string mode = "hybridized";  // or "imperative"
};

// The graph as an MXNet program, trained with autograd and MXNet's SGD operators.
std::unique_ptr<sdk::Model> compile_model(const Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer,
                                          const std::string& mode, const sdk::HostSettings& host);

}  // namespace dlhost::cpu_mxnet

#endif  // DLHOST_CPU_MXNET_BACKEND_H
