// ops.h — one dlhost graph node lowered to ATen calls (ops.cpp): a closure that computes the
// node's output from the tensors computed before it. Autograd records what each call does, so
// the backward pass is libtorch's own; only dropout's mask (the ABI's, not torch's RNG) is made
// here.
// Thread-safety: closures run on the model's calling thread; ATen parallelizes inside them.
#ifndef DLHOST_CPU_LIBTORCH_OPS_H
#define DLHOST_CPU_LIBTORCH_OPS_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "dlhost/dlhost_graph.h"

namespace dlhost::cpu_libtorch {

// Every tensor of the graph by id; inputs and parameters are persistent, activations are made
// by each forward (and hold autograd's graph until backward).
using Values = std::vector<at::Tensor>;
using NodeForward = std::function<at::Tensor(const Values&)>;

// What a node's closure may read besides the values.
struct LowerEnv {
  const dlhost_graph& graph;
  const std::vector<at::Tensor>& params;  // by parameter id: leaves with preallocated gradients
  uint64_t seed;                          // the case's seed: dropout's mask
  const uint64_t* forward_calls;          // forward calls made before the running one
  // Parameters whose gradient their op writes itself in backward, by parameter id: lowering
  // sets the entry (an FC that owns its weight and bias, lower_fc); the model then leaves that
  // grad() unzeroed, and the op calls (*gradient_written)(id) once grad() holds the step's
  // gradient (the grad-ready notice); the function outlives the closures. Why: see lower_fc.
  std::vector<bool>* writes_own_grad;
  const std::function<void(int32_t)>* gradient_written;
};

// The closure for node `index` (not INPUT); UNIMPLEMENTED naming the node when ATen cannot do
// what the ABI asks.
NodeForward lower_node(const LowerEnv& env, int32_t index);
// ABI 1.4's Transformer ops (ops_transformer.cpp), called by lower_node.
NodeForward lower_transformer_node(const LowerEnv& env, int32_t index);

// Fills `mask` (F32, contiguous) with 1/(1-p) where dlhost_dropout_keep keeps element i (its
// flat index), else 0: dropout's, and attention's on its weights.
void fill_dropout_mask(at::Tensor& mask, uint64_t seed, uint32_t node, uint64_t step, float p);

}  // namespace dlhost::cpu_libtorch

#endif  // DLHOST_CPU_LIBTORCH_OPS_H
