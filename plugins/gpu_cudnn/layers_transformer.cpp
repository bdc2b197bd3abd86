// layers_transformer.cpp — gpu_cudnn's lowering of ABI 1.4's Transformer ops: layer norm, GELU and
// learned positions on the plugin's kernels (kernels_transformer.h); attention split into two
// batched cuBLAS GEMMs around a masked softmax kernel (the dropout mask of dlhost_dropout_keep
// applied to the weights), following cpu_reference's ops_transformer.cpp call for call; the tied
// output layer as fc over the embedding's table.
#include <cmath>

#include "kernels_transformer.h"
#include "layers.h"

namespace dlhost::gpu_cudnn {

BackwardBuilder lower_layer_norm(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_layer_norm_attrs>(node, DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE);
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (in.dims.size() < 2 || in.value == nullptr || out.count != in.count)
    node_invalid(node, "layer_norm wants an F32 input of rank >= 2");
  const int64_t channels = in.dims.back(), rows = in.count / channels;
  if (node.num_params != 2 || m.param(node.params[0]).count != channels ||
      m.param(node.params[1]).count != channels)
    node_invalid(node, "layer_norm wants scale and shift [C]");
  if (!(a.epsilon > 0.0f)) node_invalid(node, "layer_norm epsilon must be > 0");
  Param &scale = m.param(node.params[0]), &shift = m.param(node.params[1]);
  float* mean = m.memory().alloc_n<float>(rows, out.name + " mean");
  float* inv_std = m.memory().alloc_n<float>(rows, out.name + " inverse deviation");
  double* partial =
      m.memory().alloc_n<double>(layer_norm_partial_count(channels), out.name + " partial sums");
  m.add_forward([&m, rows, channels, eps = a.epsilon, x = in.value, S = scale.value,
                 B = shift.value, y = out.value, mean, inv_std] {
    layer_norm_forward(rows, channels, eps, x, S, B, y, mean, inv_std, m.stream());
  });
  return [&m, rows, channels, &in, &out, &scale, &shift, mean, inv_std, partial] {
    const float beta = in.grad != nullptr ? m.beta_for(in) : 0.0f;
    m.add_backward([&m, rows, channels, beta, x = in.value, dx = in.grad, S = scale.value,
                    dS = scale.grad, dB = shift.grad, dy = out.grad, mean, inv_std, partial] {
      layer_norm_backward(rows, channels, x, S, mean, inv_std, dy, dx, beta, dS, dB, partial,
                          m.stream());
    });
  };
}

BackwardBuilder lower_gelu(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_gelu_attrs>(node, DLHOST_GELU_ATTRS_STRUCT_SIZE);
  if (a.approximation != DLHOST_GELU_ERF && a.approximation != DLHOST_GELU_TANH)
    node_invalid(node, "gelu approximation " + std::to_string(a.approximation));
  const bool tanh_form = a.approximation == DLHOST_GELU_TANH;
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (in.value == nullptr || out.count != in.count) node_invalid(node, "gelu wants an F32 input");
  m.add_forward([&m, tanh_form, n = in.count, x = in.value, y = out.value] {
    gelu_forward(tanh_form, n, x, y, m.stream());
  });
  return unary_backward(m, in, out,
                        [&m, tanh_form, n = in.count](float beta, const float* x, float* dx,
                                                      const float*, const float* dy) {
                          gelu_backward(tanh_form, n, x, dy, dx, beta, m.stream());
                        });
}

namespace {

// One attention node's geometry and saved buffers, shared by its step closures.
struct Attention {
  int64_t batch = 0, steps = 0, heads = 1, head_dim = 1, channels = 0;
  bool causal = false;
  float dropout = 0, scale = 1;
  float* probs = nullptr;    // P [N, H, T, T]: the scores, softmaxed in place
  float* weights = nullptr;  // P with dropout applied (null without dropout: P is used)
  uint8_t* keep = nullptr;   // 1 where a weight was kept (null without dropout)
  int64_t square() const { return steps * steps; }
  int64_t rows() const { return batch * heads * steps; }
  const float* used() const { return weights != nullptr ? weights : probs; }
  // One sample's [T, d] head slices of every head: batched over heads, d columns apart.
  GemmShape per_head(bool ta, bool tb, int64_t r, int64_t c, int64_t k) const {
    return {ta, tb, r, c, k, heads};
  }
  RowMajor slice(const float* base, int64_t n) const {
    return {base + n * steps * channels, channels, head_dim};
  }
  RowMajor square_of(const float* base, int64_t n) const {
    return {base + n * heads * square(), steps, square()};
  }
};

}  // namespace

BackwardBuilder lower_attention(Model& m, const dlhost_node& node, uint32_t index) {
  expect_inputs(node, 3);
  const auto& a = attrs_of<dlhost_attention_attrs>(node, DLHOST_ATTENTION_ATTRS_STRUCT_SIZE);
  Tensor &q = m.tensor(node.inputs[0]), &k = m.tensor(node.inputs[1]),
         &v = m.tensor(node.inputs[2]), &out = m.tensor(node.output);
  if (q.dims.size() != 3 || a.heads <= 0 || q.dims[2] % a.heads != 0 || k.dims != q.dims ||
      v.dims != q.dims || out.dims != q.dims || q.value == nullptr || k.value == nullptr ||
      v.value == nullptr)
    node_invalid(node, "attention wants F32 q, k, v and output [N, T, heads * d] of one shape");
  if (!(a.dropout >= 0.0f && a.dropout < 1.0f))
    node_invalid(node, "attention dropout outside [0, 1)");
  auto at = std::make_shared<Attention>();
  at->batch = q.dims[0];
  at->steps = q.dims[1];
  at->heads = a.heads;
  at->channels = q.dims[2];
  at->head_dim = at->channels / a.heads;
  at->causal = a.causal != 0;
  at->dropout = a.dropout;
  at->scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(at->head_dim)));
  const int64_t squares = at->rows() * at->steps;
  at->probs = m.memory().alloc_n<float>(squares, out.name + " attention weights");
  if (at->dropout > 0.0f) {
    at->weights = m.memory().alloc_n<float>(squares, out.name + " dropped attention weights");
    at->keep = m.memory().alloc_n<uint8_t>(squares, out.name + " attention dropout mask");
  }
  m.need_workspace(static_cast<uint64_t>(squares) * 4);  // backward's dP / dS
  m.note(node_label(node) + ": attention as 2 + 4 cuBLAS strided-batched GEMMs per sample " +
         "(batched over " + std::to_string(at->heads) + " heads) and a masked softmax kernel");
  m.add_forward([&m, at, index, Q = q.value, K = k.value, V = v.value, O = out.value] {
    const Attention& s = *at;
    for (int64_t n = 0; n < s.batch; ++n)  // S = Q K^T / sqrt(d)
      gemm(m, s.per_head(false, true, s.steps, s.steps, s.head_dim), s.scale, s.slice(Q, n),
           s.slice(K, n), 0.0f, s.probs + n * s.heads * s.square(), s.steps, s.square(),
           "attention scores");
    attention_softmax_forward(s.rows(), s.steps, s.causal, s.dropout, m.seed(), index,
                              m.forward_calls(), s.probs, s.weights, s.keep, m.stream());
    for (int64_t n = 0; n < s.batch; ++n)  // O = P V
      gemm(m, s.per_head(false, false, s.steps, s.head_dim, s.steps), 1.0f,
           s.square_of(s.used(), n), s.slice(V, n), 0.0f, O + n * s.steps * s.channels, s.channels,
           s.head_dim, "attention output");
  });
  return [&m, at, &q, &k, &v, &out] {
    // Decided in the order the products below write them (q, k, v may be one tensor).
    const float beta_v = v.grad != nullptr ? m.beta_for(v) : 0.0f;
    const float beta_q = q.grad != nullptr ? m.beta_for(q) : 0.0f;
    const float beta_k = k.grad != nullptr ? m.beta_for(k) : 0.0f;
    m.add_backward([&m, at, beta_v, beta_q, beta_k, Q = q.value, K = k.value, V = v.value,
                    dQ = q.grad, dK = k.grad, dV = v.grad, dO = out.grad] {
      const Attention& s = *at;
      auto* dP = static_cast<float*>(m.workspace());
      for (int64_t n = 0; dV != nullptr && n < s.batch; ++n)  // dV = Pd^T dO
        gemm(m, s.per_head(true, false, s.steps, s.head_dim, s.steps), 1.0f,
             s.square_of(s.used(), n), s.slice(dO, n), beta_v, dV + n * s.steps * s.channels,
             s.channels, s.head_dim, "attention dV");
      for (int64_t n = 0; n < s.batch; ++n)  // dPd = dO V^T
        gemm(m, s.per_head(false, true, s.steps, s.steps, s.head_dim), 1.0f, s.slice(dO, n),
             s.slice(V, n), 0.0f, dP + n * s.heads * s.square(), s.steps, s.square(),
             "attention dP");
      // dS = P * (dP - rowsum(dP * P)), dP = dPd * keep factor.
      attention_softmax_backward(s.rows(), s.steps, s.dropout, s.probs, s.keep, dP, m.stream());
      for (int64_t n = 0; dQ != nullptr && n < s.batch; ++n)  // dQ = dS K / sqrt(d)
        gemm(m, s.per_head(false, false, s.steps, s.head_dim, s.steps), s.scale, s.square_of(dP, n),
             s.slice(K, n), beta_q, dQ + n * s.steps * s.channels, s.channels, s.head_dim,
             "attention dQ");
      for (int64_t n = 0; dK != nullptr && n < s.batch; ++n)  // dK = dS^T Q / sqrt(d)
        gemm(m, s.per_head(true, false, s.steps, s.head_dim, s.steps), s.scale, s.square_of(dP, n),
             s.slice(Q, n), beta_k, dK + n * s.steps * s.channels, s.channels, s.head_dim,
             "attention dK");
    });
  };
}

BackwardBuilder lower_position_embedding(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a =
      attrs_of<dlhost_position_embedding_attrs>(node, DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE);
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (in.dims.size() != 3 || in.value == nullptr || in.dims[1] > a.max_positions ||
      node.num_params != 1 || m.param(node.params[0]).count != a.max_positions * in.dims[2] ||
      out.count != in.count)
    node_invalid(node, "position_embedding wants [N, T, C] and a table [max_positions, C]");
  Param& table = m.param(node.params[0]);
  const int64_t batch = in.dims[0], per_sample = in.dims[1] * in.dims[2];
  m.add_forward([&m, batch, per_sample, x = in.value, E = table.value, y = out.value] {
    position_embedding_forward(batch, per_sample, x, E, y, m.stream());
  });
  return [&m, batch, per_sample, &in, &out, &table] {
    const float beta = in.grad != nullptr ? m.beta_for(in) : 0.0f;
    m.add_backward([&m, batch, per_sample, beta, dx = in.grad, dy = out.grad, dE = table.grad,
                    count = table.count] {
      position_embedding_backward(batch, per_sample, count, dy, dx, beta, dE, m.stream());
    });
  };
}

// E belongs to the embedding node, whose backward runs after this one: fc_layer writes this
// node's share of dE first (Param::grad_written), and the embedding adds its scatter to it.
BackwardBuilder lower_tied_fc(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_tied_fc_attrs>(node, DLHOST_TIED_FC_ATTRS_STRUCT_SIZE);
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (node.num_params != 1 + (a.has_bias ? 1 : 0) ||
      m.param(node.params[0]).owner != a.embedding_node)
    node_invalid(node, "tied_fc's first parameter is not the table of its embedding node");
  Param& table = m.param(node.params[0]);
  if (in.dims.size() < 2 || in.value == nullptr) node_invalid(node, "tied_fc wants [N, T, dim]");
  const int64_t dim = in.dims.back(), rows = in.count / dim, vocab = table.count / dim;
  if (vocab * dim != table.count || out.count != rows * vocab ||
      (a.has_bias && m.param(node.params[1]).count != vocab))
    node_invalid(node, "tied_fc's input, table and output do not agree");
  return fc_layer(m, in, out, rows, dim, vocab, table,
                  a.has_bias ? &m.param(node.params[1]) : nullptr);
}

}  // namespace dlhost::gpu_cudnn
