// layers_transformer.cpp — ABI 1.4's Transformer ops on oneDNN primitives: layer normalization
// (layer_normalization forward/backward), GELU (eltwise gelu_erf / gelu_tanh), multi-head
// attention split into two batched matmuls around a softmax (the 1/sqrt(d) scale fused into
// the first matmul as a post-op), learned positions (a broadcasting binary add
// forward, a dnnl_sgemm sum for the table's gradient) and the tied output layer (matmul forward,
// dnnl_sgemm gradients, as the FC's GEMM path). Plain loops only where oneDNN has no primitive:
// the causal mask and the pinned dropout mask of the attention weights. Layers exist only while a
// model compiles, as in layers.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dlhost/common.hpp"
#include "layers.h"
#include "model.h"

namespace dlhost::cpu_onednn {

namespace {

namespace sdk = dlhost::sdk;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dnnl::algorithm;
using dnnl::memory;

// A memory over `bytes_of`'s data with another descriptor (a strided head view, the first rows
// of a table); unlike view(), the descriptor may cover fewer bytes. The caller keeps `bytes_of`
// alive.
memory alias(const memory& bytes_of, const Md& md) {
  if (md.get_size() > bytes_of.get_desc().get_size())
    sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: alias beyond its buffer");
  return memory(md, bytes_of.get_engine(), bytes_of.get_data_handle());
}

// y = scale * (x - mean) / sqrt(var + eps) + shift over the last axis, on plain [..., C].
class LayerNormLayer : public NodeLayer {
 public:
  LayerNormLayer(const dlhost_graph* g, const dlhost_node& n)
      : NodeLayer(g, n),
        a_(node_attrs<dlhost_layer_norm_attrs>(n, DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    expect_params(2);
    if (!(a_.epsilon > 0.0f)) bad("epsilon must be > 0");
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (x.dims.size() < 2 || x.dims.size() > 5) bad("input " + dims_str(x.dims));
    if (y.dims != x.dims) bad("output " + dims_str(y.dims) + " differs from input");
    const std::string what = name_ + ": layer normalization forward";
    const Md data = plain_md(x.dims, dt::f32);
    const Md vec = plain_md({x.dims.back()}, dt::f32);
    pd_ = compat::normalization_forward_pd<dnnl::layer_normalization_forward>(
        m.engine(), m.attr(), data, data, a_.epsilon, flags());
    src_ = m.as_layout(x.value, data, steps, what);
    m.alloc_param(params_[0], vec, vec);
    m.alloc_param(params_[1], vec, vec);
    m.alloc_tensor(y, pd_.dst_desc());
    mean_ = m.alloc(pd_.mean_desc());
    variance_ = m.alloc(pd_.variance_desc());
    m.add_primitive(steps, what, dnnl::layer_normalization_forward(pd_), pd_,
                    {{DNNL_ARG_SRC, src_},
                     {DNNL_ARG_SCALE, m.param(params_[0]).value},
                     {DNNL_ARG_SHIFT, m.param(params_[1]).value},
                     {DNNL_ARG_DST, y.value},
                     {DNNL_ARG_MEAN, mean_},
                     {DNNL_ARG_VARIANCE, variance_}});
    m.note_implementation("lnorm fwd", pd_.impl_info_str());
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    Tensor& y = m.tensor(output_);
    const std::string what = name_ + ": layer normalization backward";
    const Md data = pd_.src_desc();
    const auto pd = compat::normalization_backward_pd<dnnl::layer_normalization_backward>(
        m.engine(), m.attr(), data, data, data, a_.epsilon, flags(), pd_);
    memory diff_dst = m.as_layout(m.diff_of(y), pd.diff_dst_desc(), steps, what);
    Steps post;
    memory diff_src = x.needs_grad ? m.diff_sink(x, pd.diff_src_desc(), post, what)
                                   : m.scratch(pd.diff_src_desc());
    Args args = {{DNNL_ARG_SRC, src_},
                 {DNNL_ARG_MEAN, mean_},
                 {DNNL_ARG_VARIANCE, variance_},
                 {DNNL_ARG_DIFF_DST, diff_dst},
                 {DNNL_ARG_SCALE, m.param(params_[0]).value},
                 {DNNL_ARG_DIFF_SRC, diff_src},
                 {DNNL_ARG_DIFF_SCALE, m.param(params_[0]).grad},
                 {DNNL_ARG_DIFF_SHIFT, m.param(params_[1]).grad},
                 // Never read, but 3.2 fails the execution (invalid_arguments) without it, unlike
                 // its batch normalization; 2.6 takes it too.
                 {DNNL_ARG_SHIFT, m.param(params_[1]).value}};
    m.add_primitive(steps, what, dnnl::layer_normalization_backward(pd), pd, args);
    steps.insert(steps.end(), post.begin(), post.end());
    m.add_ready(steps, params_[0]);
    m.add_ready(steps, params_[1]);
    m.note_implementation("lnorm bwd", pd.impl_info_str());
  }

 private:
  static dnnl::normalization_flags flags() {
    return dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  }

  dlhost_layer_norm_attrs a_;
  dnnl::layer_normalization_forward::primitive_desc pd_;
  memory src_, mean_, variance_;
};

// GELU, exact (erf) or tanh-approximated: oneDNN's eltwise, in the input's layout. Backward
// reads the forward's source, so the output never overwrites it.
class GeluLayer : public NodeLayer {
 public:
  GeluLayer(const dlhost_graph* g, const dlhost_node& n)
      : NodeLayer(g, n), a_(node_attrs<dlhost_gelu_attrs>(n, DLHOST_GELU_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    expect_params(0);
    if (a_.approximation == DLHOST_GELU_ERF)
      alg_ = algorithm::eltwise_gelu_erf;
    else if (a_.approximation == DLHOST_GELU_TANH)
      alg_ = algorithm::eltwise_gelu_tanh;
    else
      bad("approximation " + std::to_string(a_.approximation) + " unknown");
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (y.dims != x.dims) bad("output " + dims_str(y.dims) + " differs from input");
    pd_ = compat::eltwise_forward_pd(m.engine(), m.attr(), alg_, x.md, x.md, 0.0f, 0.0f);
    m.alloc_tensor(y, pd_.dst_desc());
    m.add_primitive(steps, name_ + ": gelu forward", dnnl::eltwise_forward(pd_), pd_,
                    {{DNNL_ARG_SRC, x.value}, {DNNL_ARG_DST, y.value}});
    m.note_implementation("gelu fwd", pd_.impl_info_str());
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    if (!x.needs_grad) return;
    Tensor& y = m.tensor(output_);
    const std::string what = name_ + ": gelu backward";
    const auto pd =
        compat::eltwise_backward_pd(m.engine(), m.attr(), alg_, x.md, x.md, x.md, 0.0f, 0.0f, pd_);
    memory diff_dst = m.as_layout(m.diff_of(y), pd.diff_dst_desc(), steps, what);
    Steps post;
    memory diff_src = m.diff_sink(x, pd.diff_src_desc(), post, what);
    m.add_primitive(
        steps, what, dnnl::eltwise_backward(pd), pd,
        {{DNNL_ARG_SRC, x.value}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
    steps.insert(steps.end(), post.begin(), post.end());
  }

 private:
  dlhost_gelu_attrs a_;
  algorithm alg_ = algorithm::eltwise_gelu_erf;
  dnnl::eltwise_forward::primitive_desc pd_;
};

// Multi-head scaled dot-product attention over q, k, v [N, T, H*d], split as PyTorch's minimal
// GPT-2 writes it, each product one batched oneDNN matmul over [N, H]:
//   S = Q K^T (a post-op: * 1/sqrt(d)), then -inf above the diagonal where causal,
//   P = softmax(S) along the last axis (in place), Pd = P * M (the pinned dropout mask),
//   O = Pd V.
// No transposes are copied: a head's [T, d] slice of an [N, T, H*d] tensor is a strided 4-D
// descriptor [N, H, T, d] with strides (T*H*d, d, H*d, 1), its transpose the same bytes with the
// last two strides swapped, and matmul reads both. Backward:
//   dPd = dO V^T; dP = dPd * M; dS = softmax_backward(dP, P);
//   dV = Pd^T dO; dQ = dS K / sqrt(d); dK = dS^T Q / sqrt(d).
class AttentionLayer : public NodeLayer {
 public:
  AttentionLayer(const dlhost_graph* g, const dlhost_node& n, int32_t index)
      : NodeLayer(g, n),
        index_(index),
        a_(node_attrs<dlhost_attention_attrs>(n, DLHOST_ATTENTION_ATTRS_STRUCT_SIZE)) {
    expect_inputs(3);
    expect_params(0);
    if (a_.heads <= 0) bad("heads must be > 0");
    if (!(a_.dropout >= 0.0f && a_.dropout < 1.0f)) bad("dropout must be in [0, 1)");
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& q = activation(m, inputs_[0]);
    Tensor& k = activation(m, inputs_[1]);
    Tensor& v = activation(m, inputs_[2]);
    Tensor& y = m.tensor(output_);
    if (q.dims.size() != 3 || k.dims != q.dims || v.dims != q.dims || y.dims != q.dims)
      bad("q " + dims_str(q.dims) + ", k " + dims_str(k.dims) + ", v " + dims_str(v.dims) +
          ", output " + dims_str(y.dims) + ": all must be one [N, T, C]");
    n_ = q.dims[0];
    t_ = q.dims[1];
    c_ = q.dims[2];
    if (c_ % a_.heads != 0)
      bad(std::to_string(a_.heads) + " heads do not divide " + std::to_string(c_) + " channels");
    d_ = c_ / a_.heads;
    scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d_)));
    const std::string what = name_ + ": attention";
    const Md plain = plain_md(q.dims, dt::f32);
    q_ = m.as_layout(q.value, plain, steps, what);
    k_ = m.as_layout(k.value, plain, steps, what);
    v_ = m.as_layout(v.value, plain, steps, what);
    // Precision bf16: the four products read bf16 copies (kept for backward), write fp32.
    pt_ = m.product_type();
    q_low_ = m.product_operand(q_, steps, what + " q");
    k_low_ = m.product_operand(k_, steps, what + " k");
    v_low_ = m.product_operand(v_, steps, what + " v");
    m.alloc_tensor(y, plain);

    // S = Q K^T * scale into P's buffer; softmax then works in place.
    p_ = m.alloc(scores_md());
    dnnl::post_ops ops;
    compat::append_eltwise(ops, algorithm::eltwise_linear, scale_, 0.0f);
    add_matmul(m, steps, what + " scores (Q K^T)", attr_with(ops),
               {{DNNL_ARG_SRC, alias(q_low_, heads_md(pt_))},
                {DNNL_ARG_WEIGHTS, alias(k_low_, heads_t_md(pt_))},
                {DNNL_ARG_DST, p_}});
    if (a_.causal != 0) {
      // The causal mask: -inf above the diagonal of every [T, T] block. oneDNN has no masked
      // softmax, and a binary add of a [1, 1, T, T] mask would read T*T more floats per head
      // than this loop, which writes only the masked half.
      float* s = static_cast<float*>(p_.get_data_handle());
      const int64_t rows = n_ * a_.heads * t_, t = t_;
      m.add_function(steps, what + " causal mask", [s, rows, t] {
        const float minus_inf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for schedule(static) if (rows * t > kParallelMin)
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = r % t;
          float* row = s + r * t;
          for (int64_t j = i + 1; j < t; ++j) row[j] = minus_inf;
        }
      });
    }

    softmax_pd_ =
        compat::softmax_forward_pd(m.engine(), m.attr(), scores_md(), scores_md(), /*axis=*/3);
    m.add_primitive(steps, what + " softmax", dnnl::softmax_forward(softmax_pd_), softmax_pd_,
                    {{DNNL_ARG_SRC, p_}, {DNNL_ARG_DST, p_}});
    m.note_implementation("softmax fwd", softmax_pd_.impl_info_str());

    pd_ = p_;
    if (a_.dropout > 0.0f) {
      mask_ = m.alloc(scores_md());
      pd_ = m.alloc(scores_md());
      float* mask = static_cast<float*>(mask_.get_data_handle());
      const int64_t count = n_ * a_.heads * t_ * t_;
      const uint64_t seed = m.seed();
      const uint64_t* step = m.forward_calls();
      const uint32_t node = static_cast<uint32_t>(index_);
      const float p = a_.dropout;
      // Element (n, h, i, j) of the plain [N, H, T, T] buffer is the ABI's index
      // ((n * heads + h) * T + i) * T + j.
      m.add_function(steps, what + " dropout mask", [mask, count, seed, step, node, p] {
        fill_dropout_mask(mask, count, seed, node, *step, p);
      });
      add_multiply(m, steps, what + " dropout", p_, pd_);
    }
    pd_low_ = m.product_operand(pd_, steps, what + " P");
    add_matmul(m, steps, what + " output (P V)", m.attr(),
               {{DNNL_ARG_SRC, pd_low_},
                {DNNL_ARG_WEIGHTS, alias(v_low_, heads_md(pt_))},
                {DNNL_ARG_DST, alias(y.value, heads_md())}});
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& q = m.tensor(inputs_[0]);
    Tensor& k = m.tensor(inputs_[1]);
    Tensor& v = m.tensor(inputs_[2]);
    if (!q.needs_grad && !k.needs_grad && !v.needs_grad) return;  // nothing upstream learns
    Tensor& y = m.tensor(output_);
    const std::string what = name_ + ": attention backward";
    const Md plain = plain_md(y.dims, dt::f32);
    memory dy =
        alias(m.product_operand(m.as_layout(m.diff_of(y), plain, steps, what), steps, what + " dO"),
              heads_md(pt_));
    // dV = Pd^T dO
    if (v.needs_grad) {
      Steps post;
      memory dv = m.diff_sink(v, plain, post, what + " dV");
      add_matmul(m, steps, what + " dV (P^T dO)", m.attr(),
                 {{DNNL_ARG_SRC, alias(pd_low_, scores_t_md(pt_))},
                  {DNNL_ARG_WEIGHTS, dy},
                  {DNNL_ARG_DST, alias(dv, heads_md())}});
      steps.insert(steps.end(), post.begin(), post.end());
    }
    if (!q.needs_grad && !k.needs_grad) return;
    // dP = (dO V^T) * M, then dS = softmax backward, each in a scratch of the scores' shape.
    memory dp = m.scratch(scores_md());
    add_matmul(m, steps, what + " dP (dO V^T)", m.attr(),
               {{DNNL_ARG_SRC, dy},
                {DNNL_ARG_WEIGHTS, alias(v_low_, heads_t_md(pt_))},
                {DNNL_ARG_DST, dp}});
    if (a_.dropout > 0.0f) add_multiply(m, steps, what + " dropout", dp, dp);
    memory ds = m.scratch(scores_md());
    const auto spd = compat::softmax_backward_pd(m.engine(), m.attr(), scores_md(), scores_md(),
                                                 scores_md(), /*axis=*/3, softmax_pd_);
    m.add_primitive(steps, what + " softmax", dnnl::softmax_backward(spd), spd,
                    {{DNNL_ARG_DST, p_}, {DNNL_ARG_DIFF_DST, dp}, {DNNL_ARG_DIFF_SRC, ds}});
    m.note_implementation("softmax bwd", spd.impl_info_str());
    const memory ds_low = m.product_operand(ds, steps, what + " dS");
    dnnl::post_ops ops;
    compat::append_eltwise(ops, algorithm::eltwise_linear, scale_, 0.0f);
    const dnnl::primitive_attr scaled = attr_with(ops);
    // dQ = dS K * scale
    if (q.needs_grad) {
      Steps post;
      memory dq = m.diff_sink(q, plain, post, what + " dQ");
      add_matmul(m, steps, what + " dQ (dS K)", scaled,
                 {{DNNL_ARG_SRC, ds_low},
                  {DNNL_ARG_WEIGHTS, alias(k_low_, heads_md(pt_))},
                  {DNNL_ARG_DST, alias(dq, heads_md())}});
      steps.insert(steps.end(), post.begin(), post.end());
    }
    // dK = dS^T Q * scale
    if (k.needs_grad) {
      Steps post;
      memory dk = m.diff_sink(k, plain, post, what + " dK");
      add_matmul(m, steps, what + " dK (dS^T Q)", scaled,
                 {{DNNL_ARG_SRC, alias(ds_low, scores_t_md(pt_))},
                  {DNNL_ARG_WEIGHTS, alias(q_low_, heads_md(pt_))},
                  {DNNL_ARG_DST, alias(dk, heads_md())}});
      steps.insert(steps.end(), post.begin(), post.end());
    }
  }

 private:
  // [N, H, T, d] over the bytes of an [N, T, H*d] tensor, and its [N, H, d, T] transpose.
  Md heads_md(dt type = dt::f32) const {
    return Md({n_, a_.heads, t_, d_}, type, memory::dims{t_ * c_, d_, c_, 1});
  }
  Md heads_t_md(dt type = dt::f32) const {
    return Md({n_, a_.heads, d_, t_}, type, memory::dims{t_ * c_, d_, 1, c_});
  }
  // The plain [N, H, T, T] scores, and their per-head transpose.
  Md scores_md() const { return plain_md({n_, a_.heads, t_, t_}, dt::f32); }
  Md scores_t_md(dt type) const {
    return Md({n_, a_.heads, t_, t_}, type, memory::dims{a_.heads * t_ * t_, t_ * t_, 1, t_});
  }

  // One batched matmul: args hold SRC, WEIGHTS and DST, their descriptors the primitive's.
  static void add_matmul(Model& m, Steps& steps, const std::string& what,
                         const dnnl::primitive_attr& attr, const Args& args) {
    cpu_onednn::add_matmul(m, steps, what, attr, args, "attention matmul");
  }

  void add_multiply(Model& m, Steps& steps, const std::string& what, const memory& src,
                    const memory& dst) const {
    const Md md = scores_md();
    const auto pd = compat::make_pd<dnnl::binary>(m.engine(), m.attr(), false,
                                                  algorithm::binary_mul, md, md, md);
    m.add_primitive(steps, what, dnnl::binary(pd), pd,
                    {{DNNL_ARG_SRC_0, src}, {DNNL_ARG_SRC_1, mask_}, {DNNL_ARG_DST, dst}});
  }

  int32_t index_;
  dlhost_attention_attrs a_;
  int64_t n_ = 0, t_ = 0, c_ = 0, d_ = 0;
  float scale_ = 1.0f;
  memory q_, k_, v_;                       // the inputs, plain
  dt pt_ = dt::f32;                        // what the products read: bf16 in precision bf16
  memory q_low_, k_low_, v_low_, pd_low_;  // q, k, v and Pd as the products read them
  memory p_;                               // softmax(S), kept for backward
  memory mask_, pd_;                       // with dropout: the mask and P * mask (else pd_ is p_)
  dnnl::softmax_forward::primitive_desc softmax_pd_;
};

// y[n, t, :] = x[n, t, :] + table[t, :]: a binary add broadcasting the table's first T rows over
// N. The table's gradient is dy summed over N (dnnl_sgemm); rows T.. stay zero (the
// buffer starts zeroed and nothing else writes them).
class PositionEmbeddingLayer : public NodeLayer {
 public:
  PositionEmbeddingLayer(const dlhost_graph* g, const dlhost_node& n)
      : NodeLayer(g, n),
        a_(node_attrs<dlhost_position_embedding_attrs>(
            n, DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    expect_params(1);
    if (a_.max_positions <= 0) bad("max_positions must be > 0");
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (x.dims.size() != 3 || y.dims != x.dims)
      bad("input " + dims_str(x.dims) + ", output " + dims_str(y.dims) + ": want one [N, T, C]");
    if (x.dims[1] > a_.max_positions)
      bad(std::to_string(x.dims[1]) + " positions, the table has " +
          std::to_string(a_.max_positions));
    const std::string what = name_ + ": position embedding";
    const Md plain = plain_md(x.dims, dt::f32);
    const Md table_md = plain_md({a_.max_positions, x.dims[2]}, dt::f32);
    m.alloc_param(params_[0], table_md, table_md);
    rows_md_ = plain_md({1, x.dims[1], x.dims[2]}, dt::f32);
    m.alloc_tensor(y, plain);
    const auto pd = compat::make_pd<dnnl::binary>(m.engine(), m.attr(), false,
                                                  algorithm::binary_add, plain, rows_md_, plain);
    m.add_primitive(steps, what, dnnl::binary(pd), pd,
                    {{DNNL_ARG_SRC_0, m.as_layout(x.value, plain, steps, what)},
                     {DNNL_ARG_SRC_1, alias(m.param(params_[0]).value, rows_md_)},
                     {DNNL_ARG_DST, y.value}});
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    Tensor& y = m.tensor(output_);
    const std::string what = name_ + ": position embedding backward";
    memory dy = m.diff_of(y);
    // dtable[0:T] = ones [1, N] x dY [N, T*C]: one dnnl_sgemm. oneDNN 2.6's reduction primitive
    // has only its reference kernel for this (6% of gpt2_tiny's step), and refuses N = 1.
    const int64_t n = y.dims[0], row = y.elements / n;
    ones_ = m.alloc(plain_md({n}, dt::f32));
    float* ones = static_cast<float*>(ones_.get_data_handle());
    std::fill(ones, ones + n, 1.0f);
    const float* d = static_cast<const float*>(dy.get_data_handle());
    float* dtable = static_cast<float*>(m.param(params_[0]).grad.get_data_handle());
    m.add_function(steps, what + " (table)", [=, name = name_] {
      sgemm(name, 'N', 'N', 1, row, n, 1.0f, ones, n, d, row, 0.0f, dtable, row);
    });
    m.add_ready(steps, params_[0]);
    // dx = dy: the same buffer where x has no gradient yet, else a copy or a sum into it.
    m.hand_over_diff(y, x, steps, what + " (input)");
  }

 private:
  dlhost_position_embedding_attrs a_;
  Md rows_md_;   // [1, T, C]: the table rows in use
  memory ones_;  // [N] ones, the table gradient's dnnl_sgemm operand
};

// logits = x E^T (+ b) over the last axis, E the [vocab, dim] table of an earlier embedding
// node: the forward a matmul reading E as its transpose (tag ba), the gradients dnnl_sgemm calls
// as FcLayer's GEMM path. E's gradient is written here first (backward runs in reverse graph
// order) and the embedding's scatter-add adds to it, then reports it ready.
class TiedFcLayer : public NodeLayer {
 public:
  TiedFcLayer(const dlhost_graph* g, const dlhost_node& n)
      : NodeLayer(g, n), a_(node_attrs<dlhost_tied_fc_attrs>(n, DLHOST_TIED_FC_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    expect_params(a_.has_bias != 0 ? 2 : 1);
    if (a_.embedding_node < 0 || a_.embedding_node >= g->num_nodes ||
        g->nodes[a_.embedding_node]->op != DLHOST_OP_EMBEDDING)
      bad("embedding_node " + std::to_string(a_.embedding_node) + " is not an embedding node");
    const auto& e = node_attrs<dlhost_embedding_attrs>(*g->nodes[a_.embedding_node],
                                                       DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE);
    vocab_ = e.vocab;
    dim_ = e.dim;
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (x.dims.size() < 2 || x.dims.back() != dim_)
      bad("input " + dims_str(x.dims) + " does not end in the table's " + std::to_string(dim_));
    std::vector<int64_t> ydims = x.dims;
    ydims.back() = vocab_;
    if (y.dims != ydims) bad("output " + dims_str(y.dims) + ", want " + dims_str(ydims));
    Param& table = m.param(params_[0]);
    if (!table.value || table.count != vocab_ * dim_)
      bad("its table " + table.name + " is not the earlier embedding node's [vocab, dim]");
    rows_ = x.elements / dim_;
    const std::string what = name_ + ": tied fc forward";
    const Md src_md = plain_md({rows_, dim_}, dt::f32);
    const Md dst_md = plain_md({rows_, vocab_}, dt::f32);
    const Md weights_md = Md({dim_, vocab_}, dt::f32, tag::ba);
    const Md bias_md = plain_md({1, vocab_}, dt::f32);
    const bool bias = a_.has_bias != 0;
    if (bias) m.alloc_param(params_[1], plain_md({vocab_}, dt::f32), plain_md({vocab_}, dt::f32));
    const auto pd = bias ? compat::make_pd<dnnl::matmul>(m.engine(), m.attr(), false, src_md,
                                                         weights_md, bias_md, dst_md)
                         : compat::make_pd<dnnl::matmul>(m.engine(), m.attr(), false, src_md,
                                                         weights_md, dst_md);
    src_ = view(m.as_layout(x.value, plain_md(x.dims, dt::f32), steps, what), src_md);
    m.alloc_tensor(y, plain_md(y.dims, dt::f32));
    if (m.bf16()) {
      build_forward_bf16(m, steps, y);
      return;
    }
    Args args = {{DNNL_ARG_SRC, src_},
                 {DNNL_ARG_WEIGHTS, view(table.value, weights_md)},
                 {DNNL_ARG_DST, view(y.value, dst_md)}};
    if (bias) args.push_back({DNNL_ARG_BIAS, view(m.param(params_[1]).value, bias_md)});
    m.add_primitive(steps, what, dnnl::matmul(pd), pd, args);
    m.note_implementation("tied fc fwd", pd.impl_info_str());
  }

  void build_backward(Model& m, Steps& steps) override {
    if (m.bf16()) {
      build_backward_bf16(m, steps);
      return;
    }
    const std::string what = name_ + ": tied fc backward";
    const int64_t rows = rows_, dim = dim_, vocab = vocab_;
    Param& table = m.param(params_[0]);
    const float beta = table.grad_written ? 1.0f : 0.0f;
    table.grad_written = true;
    const float* x = static_cast<const float*>(src_.get_data_handle());
    const float* dy = static_cast<const float*>(m.diff_of(m.tensor(output_)).get_data_handle());
    float* de = static_cast<float*>(table.grad.get_data_handle());
    float* db = nullptr;
    const float* ones = nullptr;
    if (a_.has_bias != 0) {
      db = static_cast<float*>(m.param(params_[1]).grad.get_data_handle());
      ones_ = m.alloc(plain_md({rows}, dt::f32));
      float* o = static_cast<float*>(ones_.get_data_handle());
      std::fill(o, o + rows, 1.0f);
      ones = o;
    }
    // dE [vocab, dim] (+)= dY^T [vocab, rows] x X [rows, dim]; db = dY^T x ones.
    m.add_function(steps, what + " weights", [=, name = name_] {
      sgemm(name, 'T', 'N', vocab, dim, rows, 1.0f, dy, vocab, x, dim, beta, de, dim);
      if (db != nullptr)
        sgemm(name, 'T', 'N', vocab, 1, rows, 1.0f, dy, vocab, ones, 1, 0.0f, db, 1);
    });
    if (a_.has_bias != 0) m.add_ready(steps, params_[1]);
    m.note_implementation("tied fc bwd", "dnnl_sgemm");
    Tensor& in = m.tensor(inputs_[0]);
    if (!in.needs_grad) return;
    // dX [rows, dim] = dY [rows, vocab] x E [vocab, dim].
    Steps post;
    const float* e = static_cast<const float*>(table.value.get_data_handle());
    float* dx = static_cast<float*>(
        m.diff_sink(in, plain_md(in.dims, dt::f32), post, what + " data").get_data_handle());
    m.add_function(steps, what + " data", [=, name = name_] {
      sgemm(name, 'N', 'N', rows, dim, vocab, 1.0f, dy, vocab, e, dim, 0.0f, dx, dim);
    });
    steps.insert(steps.end(), post.begin(), post.end());
  }

 private:
  // Precision bf16: logits = X E^T (+ b) on bf16 copies of X and E (the table's made every
  // step, as the update changes it; both kept for backward), fp32 out.
  void build_forward_bf16(Model& m, Steps& steps, Tensor& y) {
    const std::string what = name_ + ": tied fc forward";
    src_low_ = m.product_operand(src_, steps, what);
    table_low_ = m.product_operand(
        view(m.param(params_[0]).value, plain_md({vocab_, dim_}, dt::f32)), steps, what);
    Args args = {{DNNL_ARG_SRC, src_low_},
                 {DNNL_ARG_WEIGHTS, view(table_low_, Md({dim_, vocab_}, dt::bf16, tag::ba))},
                 {DNNL_ARG_DST, view(y.value, plain_md({rows_, vocab_}, dt::f32))}};
    if (a_.has_bias != 0)
      args.push_back(
          {DNNL_ARG_BIAS, view(m.param(params_[1]).value, plain_md({1, vocab_}, dt::f32))});
    add_matmul(m, steps, what, m.attr(), args, "tied fc fwd bf16");
  }

  // Precision bf16: dE (+)= dY^T X and dX = dY E as matmuls on bf16 copies (dY's made here),
  // fp32 out (the embedding's scatter-add then adds to dE in fp32); db stays an fp32
  // dnnl_sgemm column sum.
  void build_backward_bf16(Model& m, Steps& steps) {
    const std::string what = name_ + ": tied fc backward";
    const int64_t rows = rows_, vocab = vocab_;
    Param& table = m.param(params_[0]);
    const bool accumulate = table.grad_written;
    table.grad_written = true;
    const memory dy = view(m.diff_of(m.tensor(output_)), plain_md({rows, vocab}, dt::f32));
    const memory dy_low = m.product_operand(dy, steps, what);
    add_matmul(m, steps, what + " weights", accumulate ? accumulating_attr() : m.attr(),
               {{DNNL_ARG_SRC, view(dy_low, Md({vocab, rows}, dt::bf16, tag::ba))},
                {DNNL_ARG_WEIGHTS, src_low_},
                {DNNL_ARG_DST, view(table.grad, plain_md({vocab, dim_}, dt::f32))}},
               "tied fc bwd_w bf16");
    if (a_.has_bias != 0) {
      const float* d = static_cast<const float*>(dy.get_data_handle());
      float* db = static_cast<float*>(m.param(params_[1]).grad.get_data_handle());
      ones_ = m.alloc(plain_md({rows}, dt::f32));
      float* ones = static_cast<float*>(ones_.get_data_handle());
      std::fill(ones, ones + rows, 1.0f);
      m.add_function(steps, what + " bias", [=, name = name_] {
        sgemm(name, 'T', 'N', vocab, 1, rows, 1.0f, d, vocab, ones, 1, 0.0f, db, 1);
      });
      m.add_ready(steps, params_[1]);
    }
    Tensor& in = m.tensor(inputs_[0]);
    if (in.needs_grad)
      add_bf16_data_gradient(m, steps, in, dy_low, table_low_, what + " data",
                             "tied fc bwd_d bf16");
  }

  dlhost_tied_fc_attrs a_;
  int64_t vocab_ = 0, dim_ = 0, rows_ = 0;
  memory src_;                  // the input as plain [rows, dim]
  memory ones_;                 // [rows] ones, the bias gradient's dnnl_sgemm operand
  memory src_low_, table_low_;  // precision bf16: the forward's bf16 copies of X and E
};

}  // namespace

std::unique_ptr<Layer> make_layer_norm_layer(const dlhost_graph* graph, const dlhost_node& node) {
  return std::make_unique<LayerNormLayer>(graph, node);
}
std::unique_ptr<Layer> make_gelu_layer(const dlhost_graph* graph, const dlhost_node& node) {
  return std::make_unique<GeluLayer>(graph, node);
}
std::unique_ptr<Layer> make_attention_layer(const dlhost_graph* graph, const dlhost_node& node,
                                            int32_t index) {
  return std::make_unique<AttentionLayer>(graph, node, index);
}
std::unique_ptr<Layer> make_position_embedding_layer(const dlhost_graph* graph,
                                                     const dlhost_node& node) {
  return std::make_unique<PositionEmbeddingLayer>(graph, node);
}
std::unique_ptr<Layer> make_tied_fc_layer(const dlhost_graph* graph, const dlhost_node& node) {
  return std::make_unique<TiedFcLayer>(graph, node);
}

}  // namespace dlhost::cpu_onednn
