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

NodeForward Lowering::layer_norm(const NodeView& v, const dlhost_layer_norm_attrs& a) {
  const dlhost_tensor_desc& in = v.tensor(v.in(0));
  const int64_t channels = in.dims[in.rank - 1];
  const double eps = a.epsilon;
  return [x = v.in(0), channels, eps, g = v.param(0), b = v.param(1)](const Values& t) {
    return at::layer_norm(t[size_t(x)], {channels}, g, b, eps, /*cudnn_enable=*/false);
  };
}

NodeForward Lowering::gelu(const NodeView& v, const dlhost_gelu_attrs& a) {
  const bool tanh = a.approximation == DLHOST_GELU_TANH;
  return [x = v.in(0), tanh](const Values& t) {
    return at::gelu(t[size_t(x)], tanh ? "tanh" : "none");
  };
}

// [N, T, H*d] -> per head [N, H, T, d]; S = Q K^T / sqrt(d), masked; P = softmax; P * keep; P V.
NodeForward Lowering::attention(const NodeView& node, const dlhost_attention_attrs& a) {
  const dlhost_tensor_desc& in = node.tensor(node.in(0));
  const int64_t batch = in.dims[0], steps = in.dims[1], channels = in.dims[2];
  const int64_t heads = a.heads, d = channels / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  // True above the diagonal: the future each position may not see.
  at::Tensor future = a.causal ? at::ones({steps, steps}, at::kBool).triu(1) : at::Tensor();
  at::Tensor keep = a.dropout > 0 ? at::empty({batch, heads, steps, steps}) : at::Tensor();
  const int32_t q = node.in(0), k = node.in(1), v = node.in(2);
  return [=, seed = node.env.seed, calls = node.env.forward_calls,
          index = static_cast<uint32_t>(node.index), p = a.dropout](const Values& t) mutable {
    auto split = [&](int32_t id) {
      return t[size_t(id)].view({batch, steps, heads, d}).transpose(1, 2);
    };
    at::Tensor scores = at::matmul(split(q), split(k).transpose(-2, -1)).mul(scale);
    if (future.defined())
      scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
    at::Tensor weights = at::softmax(scores, -1);
    if (keep.defined()) {
      fill_dropout_mask(keep, seed, index, *calls, p);
      weights = weights * keep;
    }
    return at::matmul(weights, split(v)).transpose(1, 2).reshape({batch, steps, channels});
  };
}

NodeForward Lowering::position_embedding(const NodeView& v,
                                         const dlhost_position_embedding_attrs& a) {
  const int64_t steps = v.tensor(v.in(0)).dims[1];
  const int64_t max_positions = a.max_positions;
  if (steps > max_positions)
    sdk::invalid(std::string(DLHOST_TORCH_PLUGIN_NAME ": ") + sdk::node_label(v.node) + " embeds " +
                 std::to_string(steps) + " positions, over its max_positions " +
                 std::to_string(max_positions));
  return [x = v.in(0), steps, table = v.param(0)](const Values& t) {
    return t[size_t(x)] + table.narrow(0, 0, steps);
  };
}

// The weight is the embedding's table itself (params[0], owned by that node): one leaf used
// twice, whose gradient autograd sums.
NodeForward Lowering::tied_fc(const NodeView& v, const dlhost_tied_fc_attrs& a) {
  const int32_t has_bias = a.has_bias;
  if ((has_bias != 0) != (v.node.num_params > 1))
    sdk::invalid(std::string(DLHOST_TORCH_PLUGIN_NAME ": ") + sdk::node_label(v.node) +
                 " has_bias=" + std::to_string(has_bias) + " but " +
                 std::to_string(v.node.num_params) + " parameters");
  return [x = v.in(0), table = v.param(0), bias = v.bias()](const Values& t) {
    return at::linear(t[size_t(x)], table, bias);
  };
}

}  // namespace dlhost::cpu_libtorch
