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
#include "dlhost/op_visitor.hpp"

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
  // sets the entry (an FC that owns its weight and bias, Lowering::fc); the model then leaves that
  // grad() unzeroed, and the op calls (*gradient_written)(id) once grad() holds the step's
  // gradient (the grad-ready notice); the function outlives the closures. Why: see Lowering::fc.
  std::vector<bool>* writes_own_grad;
  const std::function<void(int32_t)>* gradient_written;
};

// The closure for node `index` (not INPUT); UNIMPLEMENTED naming the node when ATen cannot do
// what the ABI asks.
NodeForward lower_node(const LowerEnv& env, int32_t index);

// A node as the lowering's methods get it.
struct NodeView {
  const LowerEnv& env;
  const dlhost_node& node;
  int32_t index;

  int32_t in(int k) const { return node.inputs[k]; }
  const dlhost_tensor_desc& tensor(int32_t id) const { return *env.graph.tensors[id]; }
  const dlhost_tensor_desc& out() const { return tensor(node.output); }
  at::Tensor param(int k) const { return env.params[static_cast<size_t>(node.params[k])]; }
  // The bias when the node has one, else an undefined tensor (ATen's "no bias").
  at::Tensor bias() const { return node.num_params > 1 ? param(1) : at::Tensor(); }
};

// One method per op (sdk::OpVisitor): the node's closure. The ops of ABI 1.0-1.3 are in ops.cpp,
// ABI 1.4's Transformer ops in ops_transformer.cpp.
class Lowering final : public sdk::OpVisitor<NodeForward, NodeView> {
 private:
  NodeForward fc(const NodeView& v, const dlhost_fc_attrs& a) override;
  NodeForward conv2d(const NodeView& v, const dlhost_conv2d_attrs& a) override;
  NodeForward pool2d(const NodeView& v, const dlhost_pool2d_attrs& a) override;
  NodeForward activation(const NodeView& v, const dlhost_activation_attrs& a) override;
  NodeForward softmax_cross_entropy(const NodeView& v) override;
  NodeForward mse_loss(const NodeView& v) override;
  NodeForward batch_norm(const NodeView& v, const dlhost_batch_norm_attrs& a) override;
  NodeForward dropout(const NodeView& v, const dlhost_dropout_attrs& a) override;
  NodeForward add(const NodeView& v) override;
  NodeForward lrn(const NodeView& v, const dlhost_lrn_attrs& a) override;
  NodeForward embedding(const NodeView& v, const dlhost_embedding_attrs& a) override;
  NodeForward lstm(const NodeView& v, const dlhost_lstm_attrs& a) override;
  NodeForward global_avg_pool(const NodeView& v) override;
  NodeForward layer_norm(const NodeView& v, const dlhost_layer_norm_attrs& a) override;
  NodeForward gelu(const NodeView& v, const dlhost_gelu_attrs& a) override;
  NodeForward attention(const NodeView& v, const dlhost_attention_attrs& a) override;
  NodeForward position_embedding(const NodeView& v,
                                 const dlhost_position_embedding_attrs& a) override;
  NodeForward tied_fc(const NodeView& v, const dlhost_tied_fc_attrs& a) override;
};

// Fills `mask` (F32, contiguous) with 1/(1-p) where dlhost_dropout_keep keeps element i (its
// flat index), else 0: dropout's, and attention's on its weights.
void fill_dropout_mask(at::Tensor& mask, uint64_t seed, uint32_t node, uint64_t step, float p);

}  // namespace dlhost::cpu_libtorch

#endif  // DLHOST_CPU_LIBTORCH_OPS_H
