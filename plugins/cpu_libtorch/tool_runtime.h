// tool_runtime.h — cpu_libtorch's own distributed runtime as the ABI sees it (1.5,
// DLHOST_EXT_TOOL_RUNTIME): plugin.cpp links the extension, ddp.cpp implements it, model.cpp
// offers its parameters and a call before each backward. `comm: torch_ddp` is PyTorch's
// DistributedDataParallel from C++: c10d's Reducer over a ProcessGroupGloo (libtorch 2.x only).
// Torch-free apart from the model's side (RuntimeHost), which names at::Tensor.
#ifndef DLHOST_CPU_LIBTORCH_TOOL_RUNTIME_H
#define DLHOST_CPU_LIBTORCH_TOOL_RUNTIME_H

#include <memory>
#include <vector>

#include "dlhost/backend_kit.hpp"

namespace at {
class Tensor;
}

namespace dlhost::cpu_libtorch {

// Publishes DLHOST_EXT_TOOL_RUNTIME in the plugin's chain (called once by the kit).
void link_tool_runtime(sdk::ExtensionChain& chain);

// A runtime attached to a model: told before every backward (the Reducer's
// prepare_for_backward); destroyed with the model, before its parameters.
class ModelRuntime {
 public:
  virtual ~ModelRuntime() = default;
  virtual void before_backward(const at::Tensor& loss) = 0;
};

// What model.cpp's model offers a runtime.
class RuntimeHost {
 public:
  virtual std::vector<at::Tensor>& parameters() = 0;
  virtual void set_runtime(std::unique_ptr<ModelRuntime> runtime) = 0;
  virtual ModelRuntime* runtime() const = 0;

 protected:
  ~RuntimeHost() = default;
};

// The model's RuntimeHost, or nullptr for a model of another backend (model.cpp).
RuntimeHost* runtime_host(sdk::Model& model);

}  // namespace dlhost::cpu_libtorch

#endif  // DLHOST_CPU_LIBTORCH_TOOL_RUNTIME_H
