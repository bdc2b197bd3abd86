// backend.h — what plugin.cpp (the kit's Backend: device, library, options, contexts) needs from
// the model side of cpu_tensorflow (model.cpp): the opened device and the compile call.
// Thread-safety: a Context and its models are used from one host thread at a time (the ABI's
// rule); every model has its own TensorFlow graph and session.
#ifndef DLHOST_CPU_TENSORFLOW_BACKEND_H
#define DLHOST_CPU_TENSORFLOW_BACKEND_H

#include <cstdint>
#include <memory>
#include <string>

#include "dlhost/framework_kit.hpp"

namespace dlhost::cpu_tensorflow {

// A device opened for one case: how every session of its models is configured (host.threads is
// TensorFlow's intra-op pool; 0: TensorFlow's default, every core).
struct Context : sdk::FrameworkContext {
  int32_t inter_op_threads = 0;  // "inter_op_threads", else the same as host.threads
  bool xla = false;              // "mode": graph (false) or xla (true)
  std::string library;           // "TensorFlow 2.21.0 (oneDNN on, NHWC)"
};

// The graph lowered to TensorFlow ops in one session, trained by TF_SessionRun calls.
std::unique_ptr<sdk::Model> compile_model(const Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer,
                                          const sdk::HostSettings& host);

// "on" or "off": whether TensorFlow rewrites its CPU kernels to oneDNN's
// (TF_ENABLE_ONEDNN_OPTS, on by default on x86 Linux).
const char* onednn_setting();

}  // namespace dlhost::cpu_tensorflow

#endif  // DLHOST_CPU_TENSORFLOW_BACKEND_H
