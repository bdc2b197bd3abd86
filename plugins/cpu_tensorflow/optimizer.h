// optimizer.h — the ABI's SGD and AdamW as TensorFlow graph ops (optimizer.cpp): the gradients
// enter as placeholders (what the forward fetched, or the host's buffers after an all-reduce), are
// scaled by the global-norm clip and get the weight decay added, then TensorFlow's own in-place
// kernels apply them: ResourceApplyMomentum (accum = momentum * accum + grad; var -= lr * accum,
// the ABI's formula) or ResourceApplyGradientDescent when momentum is 0; AdamW (ABI 1.4) with
// ResourceApplyAdam after an AssignSubVariableOp of the decoupled weight decay.
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
  uint64_t state_bytes = 0;      // momentum accumulators, AdamW's moments
  // AdamW only (else unset): scalars fed with every run of `step`, t the update's number from 1.
  TF_Output beta1_power{}, beta2_power{};  // beta1^t, beta2^t
  TF_Output epsilon_hat{};                 // epsilon sqrt(1 - beta2^t): see optimizer.cpp
  bool adamw() const { return beta1_power.oper != nullptr; }
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
