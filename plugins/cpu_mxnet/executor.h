// executor.h — the two ways cpu_mxnet runs a Program's forward, under autograd recording in
// training mode (what `with autograd.record():` does), so that MXAutogradBackwardEx on the loss
// is the backward pass:
//   hybridized: one Symbol composed from the calls, run by a CachedOp with static_alloc and
//               static_shape (Gluon's hybridize(static_alloc=True, static_shape=True)): the
//               symbolic path of the paper's MXNet measurements;
//   imperative: one MXImperativeInvoke per call (Gluon's layers without hybridize).
// Both compose the Symbol at compile to check MXNet's inferred shapes against the graph's: a node
// whose shapes MXNet computes otherwise (pooling's ceil mode) is UNIMPLEMENTED, never wrong.
// Thread-safety: one host thread at a time, as the model.
#ifndef DLHOST_CPU_MXNET_EXECUTOR_H
#define DLHOST_CPU_MXNET_EXECUTOR_H

#include <memory>
#include <string>

#include "program.h"

namespace dlhost::cpu_mxnet {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs the forward, recording for autograd; the loss array (owned by the executor, valid until
  // the next forward).
  virtual NDArrayHandle forward() = 0;
};

// `mode` is "hybridized" or "imperative".
std::unique_ptr<Executor> make_executor(const std::string& mode, const dlhost_graph& graph,
                                        Program& program);

}  // namespace dlhost::cpu_mxnet

#endif  // DLHOST_CPU_MXNET_EXECUTOR_H
