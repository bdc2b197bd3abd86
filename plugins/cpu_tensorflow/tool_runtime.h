// tool_runtime.h — cpu_tensorflow's own distributed runtimes as the ABI sees them (1.5,
// DLHOST_EXT_TOOL_RUNTIME): plugin.cpp links the extension, whose table is runtime_ext.cpp's;
// collective.cpp implements `comm: tf_collective`, MultiWorkerMirroredStrategy's synchronous
// all-reduce from the C API (a TensorFlow server per rank, job "worker", one task per rank, and
// CollectiveReduceV2 on every gradient between backward and update), ps.cpp `comm: tf_ps`
// (parameter servers, asynchronous or, with the option ps_mode: sync, synchronous as
// SyncReplicasOptimizer: sync_replicas.h); model.cpp offers its variables, its gradients and calls
// in forward and backward. Thread-safety: one host thread per model, as the ABI's calls.
#ifndef DLHOST_CPU_TENSORFLOW_TOOL_RUNTIME_H
#define DLHOST_CPU_TENSORFLOW_TOOL_RUNTIME_H

#include <memory>
#include <vector>

#include "backend.h"
#include "dlhost/backend_kit.hpp"
#include "dlhost/dlhost_device.h"
#include "lower.h"
#include "tf_api.h"

namespace dlhost::cpu_tensorflow {

// Publishes DLHOST_EXT_TOOL_RUNTIME in the plugin's chain (called once by the kit).
void link_tool_runtime(sdk::ExtensionChain& chain);

// A runtime attached to a model; destroyed with it.
class ModelRuntime {
 public:
  virtual ~ModelRuntime() = default;
  // After the forward's run computed `grads` (by parameter id, TensorFlow's layout), before
  // backward returns: replaces them by what the update is to apply (their mean over ranks).
  virtual void reduce_gradients(std::vector<tf::TensorPtr>& grads) = 0;
  // The communication time of every step so far, ms, oldest first (what RuntimeText says).
  virtual const std::vector<double>& comm_times() const = 0;
  // At the start of every forward (tf_ps: pulls the variables from the parameter servers).
  virtual void before_forward() {}
  // True when the runtime applies the update itself (tf_ps: on the parameter servers, in
  // reduce_gradients): the model's update then does nothing.
  virtual bool applies_update() const { return false; }
  // Before the host reads the model's weights (read_param): tf_ps pulls the parameter servers'
  // values when the last push's update is only there.
  virtual void before_read() {}
};

// What a runtime tells the host at attach (dlhost_tool_runtime_info); static strings.
struct RuntimeText {
  const char* mode;       // "sync" or "async"
  const char* library;    // e.g. "TensorFlow 2.21.0 CollectiveReduceV2 ..."
  const char* comm_time;  // what comm_times measures
};

// What model.cpp's model offers a runtime.
class RuntimeHost {
 public:
  virtual const Context& context() const = 0;
  virtual const std::vector<Variable>& variables() const = 0;  // by parameter id
  virtual std::vector<int32_t> ready_order() const = 0;        // parameter ids, gradients' order
  virtual bool fused() const = 0;  // forward applies the update itself: no gradients to reduce
  virtual tf::TensorPtr read_value(int32_t id) = 0;  // the variable's value now
  virtual void assign_value(int32_t id, TF_Tensor* value) = 0;
  virtual void set_runtime(std::unique_ptr<ModelRuntime> runtime) = 0;
  virtual ModelRuntime* runtime() const = 0;

 protected:
  ~RuntimeHost() = default;
};

// The model's RuntimeHost, or nullptr for a model of another backend (model.cpp).
RuntimeHost* runtime_host(sdk::Model& model);

// `comm: tf_collective` (collective.cpp): joins the model to every rank's; blocks until all have.
std::unique_ptr<ModelRuntime> attach_collective(RuntimeHost& host,
                                                const dlhost_tool_runtime_args& args);
const RuntimeText& collective_text();

#ifdef DLHOST_RUNTIME_ROLE_LIMIT  // ABI 1.5's extra roles (the host starts the ps tasks)
// `comm: tf_ps` (ps.cpp): a worker joins the parameter servers (args.cluster); a ps task serves.
std::unique_ptr<ModelRuntime> attach_ps(RuntimeHost& host, const dlhost_tool_runtime_args& args);
void serve_ps(const dlhost_tool_runtime_args& args);
// The text of the case's mode (option ps_mode: sync or async; INVALID_ARGUMENT otherwise).
const RuntimeText& ps_text(const dlhost_options* options);
// The ps tasks the case asks for (option ps_tasks, 1 by default, 1..kMaxPsTasks).
inline constexpr int64_t kMaxPsTasks = 16;
int32_t ps_tasks(const dlhost_options* options);
#endif

}  // namespace dlhost::cpu_tensorflow

#endif  // DLHOST_CPU_TENSORFLOW_TOOL_RUNTIME_H
