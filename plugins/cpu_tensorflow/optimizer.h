// optimizer.h — the ABI's SGD as TensorFlow graph ops (optimizer.cpp): the gradients enter as
// placeholders (what the forward fetched, or the host's buffers after an all-reduce), are scaled
// by the global-norm clip and get the weight decay added, then TensorFlow's own in-place kernels
// apply them: ResourceApplyMomentum (accum = momentum * accum + grad; var -= lr * accum, the ABI's
// formula) or ResourceApplyGradientDescent when momentum is 0.
// Thread-safety: built once by compile, on the calling thread.
#ifndef DLHOST_CPU_TENSORFLOW_OPTIMIZER_H
#define DLHOST_CPU_TENSORFLOW_OPTIMIZER_H

#include <vector>

#include "dlhost/dlhost_backend.h"
#include "lower.h"

namespace dlhost::cpu_tensorflow {

struct Update {
  std::vector<TF_Output> grads;  // placeholders by parameter id, TensorFlow's layout (unfused)
  TF_Operation* step = nullptr;  // runs every apply op
  uint64_t state_bytes = 0;      // momentum accumulators
};

// Adds the update of `lowered.params` to `g`; the accumulators' initializers go to
// `lowered.initializers`.
// With `fused` (the host's ABI 1.4 option fused_step) the apply ops read lowered.grads, the
// TF_AddGradients outputs, directly, so that one run does the whole step; otherwise they read
// placeholders (Update::grads) that update feeds.
Update add_update(TF_Graph* g, Lowered& lowered, const dlhost_optimizer_desc& optimizer,
                  bool fused);

}  // namespace dlhost::cpu_tensorflow

#endif  // DLHOST_CPU_TENSORFLOW_OPTIMIZER_H
