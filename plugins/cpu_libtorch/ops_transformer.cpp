// ops_transformer.cpp — ABI 1.4's Transformer ops as ATen calls, the way a minimal GPT-2 in plain
// PyTorch writes them: layer_norm, gelu (approximate "none" or "tanh"), attention split into
// matmul, a causal masked_fill, softmax and matmul (the ABI's pinned dropout mask multiplies the
// weights, so no fused SDPA: 1.13 has none, and its RNG is not the ABI's), learned positions as a
// broadcast add, and the tied output layer as linear() on the embedding's own table (autograd
// sums the two uses into one gradient). Only calls both libtorch 1.13 and 2.x have.
// Thread-safety: as ops.h.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>

#include "dlhost/common.hpp"
#include "dlhost/graph_access.hpp"
#include "ops.h"

namespace dlhost::cpu_libtorch {
namespace {

namespace sdk = dlhost::sdk;

// Checked: absent or truncated attributes are refused naming the node (graph_access.hpp).
template <class Attrs>
const Attrs& attrs_of(const dlhost_node& n) {
  return sdk::node_attrs<Attrs>(n);
}

NodeForward lower_layer_norm(const LowerEnv& env, const dlhost_node& n) {
  const dlhost_tensor_desc& in = *env.graph.tensors[n.inputs[0]];
  const int64_t channels = in.dims[in.rank - 1];
  const double eps = attrs_of<dlhost_layer_norm_attrs>(n).epsilon;
  return [x = n.inputs[0], channels, eps, g = env.params[size_t(n.params[0])],
          b = env.params[size_t(n.params[1])]](const Values& t) {
    return at::layer_norm(t[size_t(x)], {channels}, g, b, eps, /*cudnn_enable=*/false);
  };
}

NodeForward lower_gelu(const dlhost_node& n) {
  const bool tanh = attrs_of<dlhost_gelu_attrs>(n).approximation == DLHOST_GELU_TANH;
  return [x = n.inputs[0], tanh](const Values& t) {
    return at::gelu(t[size_t(x)], tanh ? "tanh" : "none");
  };
}

// [N, T, H*d] -> per head [N, H, T, d]; S = Q K^T / sqrt(d), masked; P = softmax; P * keep; P V.
NodeForward lower_attention(const LowerEnv& env, const dlhost_node& n, int32_t index) {
  const auto& a = attrs_of<dlhost_attention_attrs>(n);
  const dlhost_tensor_desc& in = *env.graph.tensors[n.inputs[0]];
  const int64_t batch = in.dims[0], steps = in.dims[1], channels = in.dims[2];
  const int64_t heads = a.heads, d = channels / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  // True above the diagonal: the future each position may not see.
  at::Tensor future = a.causal ? at::ones({steps, steps}, at::kBool).triu(1) : at::Tensor();
  at::Tensor keep = a.dropout > 0 ? at::empty({batch, heads, steps, steps}) : at::Tensor();
  const int32_t q = n.inputs[0], k = n.inputs[1], v = n.inputs[2];
  return [=, seed = env.seed, calls = env.forward_calls, node = static_cast<uint32_t>(index),
          p = a.dropout](const Values& t) mutable {
    auto split = [&](int32_t id) {
      return t[size_t(id)].view({batch, steps, heads, d}).transpose(1, 2);
    };
    at::Tensor scores = at::matmul(split(q), split(k).transpose(-2, -1)).mul(scale);
    if (future.defined())
      scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
    at::Tensor weights = at::softmax(scores, -1);
    if (keep.defined()) {
      fill_dropout_mask(keep, seed, node, *calls, p);
      weights = weights * keep;
    }
    return at::matmul(weights, split(v)).transpose(1, 2).reshape({batch, steps, channels});
  };
}

NodeForward lower_position_embedding(const LowerEnv& env, const dlhost_node& n) {
  const int64_t steps = env.graph.tensors[n.inputs[0]]->dims[1];
  const int64_t max_positions = attrs_of<dlhost_position_embedding_attrs>(n).max_positions;
  if (steps > max_positions)
    sdk::invalid(std::string(DLHOST_TORCH_PLUGIN_NAME ": ") + sdk::node_label(n) + " embeds " +
                 std::to_string(steps) + " positions, over its max_positions " +
                 std::to_string(max_positions));
  return [x = n.inputs[0], steps, table = env.params[size_t(n.params[0])]](const Values& t) {
    return t[size_t(x)] + table.narrow(0, 0, steps);
  };
}

// The weight is the embedding's table itself (params[0], owned by that node): one leaf used
// twice, whose gradient autograd sums.
NodeForward lower_tied_fc(const LowerEnv& env, const dlhost_node& n) {
  const int32_t has_bias = attrs_of<dlhost_tied_fc_attrs>(n).has_bias;
  if ((has_bias != 0) != (n.num_params > 1))
    sdk::invalid(std::string(DLHOST_TORCH_PLUGIN_NAME ": ") + sdk::node_label(n) + " has_bias=" +
                 std::to_string(has_bias) + " but " + std::to_string(n.num_params) + " parameters");
  at::Tensor bias = n.num_params > 1 ? env.params[size_t(n.params[1])] : at::Tensor();
  return [x = n.inputs[0], table = env.params[size_t(n.params[0])], bias](const Values& t) {
    return at::linear(t[size_t(x)], table, bias);
  };
}

}  // namespace

NodeForward lower_transformer_node(const LowerEnv& env, int32_t index) {
  const dlhost_node& n = *env.graph.nodes[index];
  switch (n.op) {
    case DLHOST_OP_LAYER_NORM:
      return lower_layer_norm(env, n);
    case DLHOST_OP_GELU:
      return lower_gelu(n);
    case DLHOST_OP_ATTENTION:
      return lower_attention(env, n, index);
    case DLHOST_OP_POSITION_EMBEDDING:
      return lower_position_embedding(env, n);
    case DLHOST_OP_TIED_FC:
      return lower_tied_fc(env, n);
    default:
      sdk::unimplemented(DLHOST_TORCH_PLUGIN_NAME ": " + sdk::op_name(n.op) + " '" + n.name +
                         "': not a Transformer op");
  }
}

}  // namespace dlhost::cpu_libtorch
