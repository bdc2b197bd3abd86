// kvstore.h — cpu_mxnet's own distributed runtime as the ABI sees it (1.5,
// DLHOST_EXT_TOOL_RUNTIME): `comm: mxnet_kvstore` is MXNet's kvstore `dist_sync` over ps-lite,
// with a scheduler and parameter servers that dlhost starts as the runtime's extra roles.
// plugin.cpp links the extension, kvstore.cpp implements it, model.cpp offers its trainable
// arrays and a call after each backward.
#ifndef DLHOST_CPU_MXNET_KVSTORE_H
#define DLHOST_CPU_MXNET_KVSTORE_H

#include <memory>
#include <vector>

#include "dlhost/backend_kit.hpp"
#include "mxnet_library.h"

namespace dlhost::cpu_mxnet {

// Publishes DLHOST_EXT_TOOL_RUNTIME in the plugin's chain (called once by the kit).
void link_tool_runtime(sdk::ExtensionChain& chain);

// A runtime attached to a model: told after every backward (the gradients are final, the engine
// idle); destroyed with the model, before its arrays.
class ModelRuntime {
 public:
  virtual ~ModelRuntime() = default;
  virtual void after_backward() = 0;
  // True when the runtime has already updated the weights (dist_async: the servers apply each
  // push, the workers pull the weights): the model's update then does nothing.
  virtual bool owns_update() const { return false; }
};

// What model.cpp's model offers a runtime: its trainable arrays (whole leaves, in leaf order)
// and their gradients, which never move.
class RuntimeHost {
 public:
  virtual std::vector<NDArrayHandle> trainable_values() const = 0;
  virtual std::vector<NDArrayHandle> trainable_grads() const = 0;
  virtual void set_runtime(std::unique_ptr<ModelRuntime> runtime) = 0;
  virtual ModelRuntime* runtime() const = 0;

 protected:
  ~RuntimeHost() = default;
};

// The model's RuntimeHost, or nullptr for a model of another backend (model.cpp).
RuntimeHost* runtime_host(sdk::Model& model);

}  // namespace dlhost::cpu_mxnet

#endif  // DLHOST_CPU_MXNET_KVSTORE_H
