// backend.h — what plugin.cpp (the kit's Backend) and model.cpp share: the device opened for a
// case (MXNet loaded with its engine settings, the mode, the seed) and the compile call.
// Thread-safety: a Context and its models are used from one host thread at a time (the ABI's
// rule); MXNet's engine settings are per process.
#ifndef DLHOST_CPU_MXNET_BACKEND_H
#define DLHOST_CPU_MXNET_BACKEND_H

#include <cstdint>
#include <memory>
#include <string>

#include "dlhost/backend_kit.hpp"
#include "mxnet_library.h"

namespace dlhost::cpu_mxnet {

// A device opened for one case.
struct Context {
  EngineState engine;               // what MXNet was loaded with
  std::string mode = "hybridized";  // or "imperative"
  int64_t seed = 42;                // the "seed" option; 42 is the runner's default
};

// The graph as an MXNet program, trained with autograd and MXNet's SGD operators.
std::unique_ptr<sdk::Model> compile_model(const Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer,
                                          const std::string& mode, uint64_t seed);

}  // namespace dlhost::cpu_mxnet

#endif  // DLHOST_CPU_MXNET_BACKEND_H
