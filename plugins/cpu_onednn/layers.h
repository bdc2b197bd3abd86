// layers.h — what the layer files of the cpu_onednn backend share: the NodeLayer base (a node's
// name, tensors and parameters, kept after the graph is gone), WeightedLayer (what FC and
// convolution share), small helpers over oneDNN memory descriptors, the factories of the
// layers that live outside layers.cpp, and what the plain layers offer the fused layers
// (fused_layers.cpp) that build the fusion plan's spans.
// Internal to the plugin; thread-safety as model.h (layers exist only while a model compiles).
#ifndef DLHOST_CPU_ONEDNN_LAYERS_H
#define DLHOST_CPU_ONEDNN_LAYERS_H

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/common.hpp"
#include "dlhost/graph_access.hpp"
#include "model.h"

namespace dlhost::cpu_onednn {

// Below this many elements an OpenMP region costs more than the loop it would split.
inline constexpr int64_t kParallelMin = 1 << 14;

inline Md any_md(const std::vector<int64_t>& dims) {
  return Md(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

// Whether a primitive descriptor exists and is not oneDNN's slow reference implementation.
inline bool fast(const dnnl::primitive_desc_base& pd) {
  return pd && std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
}

// Whether a node may overwrite tensor `x` with its output: it is x's only reader, and x's
// producer does not read its own output in backward (these read their sources, or nothing).
// Graph inputs never qualify.
inline bool may_overwrite(const Tensor& x) {
  const int32_t p = x.producer_op;
  const bool producer_forgets_output = p == DLHOST_OP_CONV2D || p == DLHOST_OP_FC ||
                                       p == DLHOST_OP_BATCH_NORM || p == DLHOST_OP_ADD ||
                                       p == DLHOST_OP_POOL2D || p == DLHOST_OP_LRN;
  return x.consumers == 1 && producer_forgets_output;
}

// Another descriptor over the same bytes (a [N, T, C] tensor seen as [N*T, C], or as oneDNN's
// RNN [T, N, C] with the ntc tag). The caller keeps `mem` alive as long as the view.
inline dnnl::memory view(const dnnl::memory& mem, const Md& md) {
  if (md.get_size() != mem.get_desc().get_size())
    dlhost::sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: view of another size");
  return dnnl::memory(md, mem.get_engine(), mem.get_data_handle());
}

inline std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Row-major C [m, n] = alpha op(A) x op(B) + beta C with oneDNN's dnnl_sgemm; `name` is the
// node's, for the error.
inline void sgemm(const std::string& name, char transa, char transb, int64_t m, int64_t n,
                  int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                  float beta, float* c, int64_t ldc) {
  if (dnnl_sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) != dnnl_success)
    dlhost::sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: node " + name + ": dnnl_sgemm failed");
}

// One oneDNN matmul: `args` hold SRC, WEIGHTS and DST (and BIAS), whose descriptors (strided
// views for transposes, bf16 or f32 operands) are the primitive's. `kind` names it in
// model_info ("attention matmul").
inline void add_matmul(Model& m, Steps& steps, const std::string& what,
                       const dnnl::primitive_attr& attr, const Args& args, const char* kind) {
  Md src, weights, bias, dst;
  for (const auto& [arg, mem] : args) {
    if (arg == DNNL_ARG_SRC) src = mem.get_desc();
    if (arg == DNNL_ARG_WEIGHTS) weights = mem.get_desc();
    if (arg == DNNL_ARG_BIAS) bias = mem.get_desc();
    if (arg == DNNL_ARG_DST) dst = mem.get_desc();
  }
  const bool has_bias = bias.get_size() != 0;
  const auto pd =
      has_bias ? compat::make_pd<dnnl::matmul>(m.engine(), attr, false, src, weights, bias, dst)
               : compat::make_pd<dnnl::matmul>(m.engine(), attr, false, src, weights, dst);
  m.add_primitive(steps, what, dnnl::matmul(pd), pd, args);
  m.note_implementation(kind, pd.impl_info_str());
}

// The data gradient of a layer whose forward was X W^T on bf16 copies: dX [rows, cols] =
// dY_low [rows, k] x W_low [k, cols], one matmul writing fp32 into `in`'s gradient (or a
// scratch that diff_sink's steps add to it).
inline void add_bf16_data_gradient(Model& m, Steps& steps, Tensor& in, const dnnl::memory& dy_low,
                                   const dnnl::memory& weights_low, const std::string& what,
                                   const char* kind) {
  const int64_t rows = compat::dims_of(dy_low.get_desc())[0];
  const int64_t cols = compat::dims_of(weights_low.get_desc())[1];
  Steps post;
  const dnnl::memory dx =
      m.diff_sink(in, plain_md(in.dims, dnnl::memory::data_type::f32), post, what);
  add_matmul(m, steps, what, m.attr(),
             {{DNNL_ARG_SRC, dy_low},
              {DNNL_ARG_WEIGHTS, weights_low},
              {DNNL_ARG_DST, view(dx, plain_md({rows, cols}, dnnl::memory::data_type::f32))}},
             kind);
  steps.insert(steps.end(), post.begin(), post.end());
}

// A fresh attribute with the model's user scratchpad and `ops`: primitive_attr copies share one
// handle, so m.attr() itself must not take post-ops.
inline dnnl::primitive_attr attr_with(const dnnl::post_ops& ops) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_post_ops(ops);
  return attr;
}

// An attribute whose matmul adds to its destination (beta = 1) instead of overwriting it.
inline dnnl::primitive_attr accumulating_attr() {
  dnnl::post_ops ops;
  ops.append_sum(1.0f);
  return attr_with(ops);
}

// The ABI's pinned inverted-dropout mask over `n` elements in logical (row-major) order, as the
// framework kit makes it (sdk::DropoutMask: 1 / (1 - p) where dlhost_dropout_keep(seed, node,
// step, i, p), else 0), its blocks split over the OpenMP threads.
inline void fill_dropout_mask(float* mask, int64_t n, uint64_t seed, uint32_t node, uint64_t step,
                              float p) {
  const sdk::DropoutMask keep{seed, node, step, p};
  constexpr int64_t kBlock = 4096;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t begin = 0; begin < n; begin += kBlock)
    keep.fill(mask, static_cast<uint64_t>(begin),
              static_cast<uint64_t>(std::min(n, begin + kBlock)));
}

// The node's attribute struct, checked to be present and at least `needed` bytes long.
template <class Attrs>
const Attrs& node_attrs(const dlhost_node& node, size_t needed) {
  return dlhost::sdk::node_attrs<Attrs>(node, needed);
}

// What every layer knows about its node; the graph itself is gone after compile.
class NodeLayer : public Layer {
 protected:
  NodeLayer(const dlhost_graph* graph, const dlhost_node& node)
      : name_(node.name != nullptr ? node.name : "?"),
        inputs_(node.inputs, node.inputs + node.num_inputs),
        params_(node.params, node.params + node.num_params),
        output_(node.output),
        index_(index_of(graph, node)),
        is_graph_loss_(node.output == graph->loss) {}

  [[noreturn]] void bad(const std::string& why) const {
    dlhost::sdk::invalid("cpu_onednn: node " + name_ + ": " + why);
  }
  void expect_inputs(size_t n) const {
    if (inputs_.size() != n)
      bad("expects " + std::to_string(n) + " inputs, has " + std::to_string(inputs_.size()));
  }
  void expect_params(size_t n) const {
    if (params_.size() != n)
      bad("expects " + std::to_string(n) + " parameters, has " + std::to_string(params_.size()));
  }
  // An F32 activation that the producer has already laid out.
  Tensor& activation(Model& m, int32_t id) const {
    Tensor& t = m.tensor(id);
    if (t.dtype != DLHOST_DTYPE_F32) bad("input " + t.name + " is not F32");
    if (!t.value) bad("input " + t.name + " is not computed before this node");
    return t;
  }

  std::string name_;
  std::vector<int32_t> inputs_, params_;
  int32_t output_;
  int32_t index_;  // the node's place in the graph: how the plan's FC strategies name it
  bool is_graph_loss_;

 private:
  static int32_t index_of(const dlhost_graph* graph, const dlhost_node& node) {
    for (int32_t i = 0; i < graph->num_nodes; ++i)
      if (graph->nodes[i] == &node) return i;
    return -1;
  }
};

// Inner product and convolution share their backward structure: weight (and bias) gradients
// first, so that the host can start reducing them, then the data gradient.
class WeightedLayer : public NodeLayer {
 protected:
  WeightedLayer(const dlhost_graph* g, const dlhost_node& n, bool has_bias) : NodeLayer(g, n) {
    size_t expected = has_bias ? 2 : 1;
    if (params_.size() != expected)
      bad("expects " + std::to_string(expected) + " parameters, has " +
          std::to_string(params_.size()));
    weight_ = params_[0];
    bias_ = has_bias ? params_[1] : -1;
  }
  Args forward_args(Model& m, const dnnl::memory& dst) const {
    Args args = {{DNNL_ARG_SRC, src_},
                 {DNNL_ARG_WEIGHTS, weights_low_ ? weights_low_ : m.param(weight_).value}};
    if (bias_ >= 0) args.push_back({DNNL_ARG_BIAS, m.param(bias_).value});
    args.push_back({DNNL_ARG_DST, dst});
    return args;
  }
  // Appends the weights-gradient primitive and the grad-ready notices.
  template <class Pd, class Prim>
  void add_backward_weights(Model& m, Steps& steps, const Pd& pd, const char* kind) {
    const std::string what = name_ + ": " + kind + " backward weights";
    dnnl::memory src = m.as_layout(src_, pd.src_desc(), steps, what);
    dnnl::memory diff_dst = m.as_layout(output_diff(m), pd.diff_dst_desc(), steps, what);
    Steps post;
    Args args = {{DNNL_ARG_SRC, src},
                 {DNNL_ARG_DIFF_DST, diff_dst},
                 {DNNL_ARG_DIFF_WEIGHTS,
                  m.output_as(m.param(weight_).grad, pd.diff_weights_desc(), post, what)}};
    if (bias_ >= 0)
      args.push_back(
          {DNNL_ARG_DIFF_BIAS, m.output_as(m.param(bias_).grad, pd.diff_bias_desc(), post, what)});
    m.add_primitive(steps, what, Prim(pd), pd, args);
    steps.insert(steps.end(), post.begin(), post.end());
    m.add_ready(steps, weight_);
    if (bias_ >= 0) m.add_ready(steps, bias_);
    m.note_implementation(std::string(kind) + " bwd_w", pd.impl_info_str());
  }
  // Appends the data-gradient primitive (callers skip it when nothing upstream learns).
  template <class Pd, class Prim>
  void add_backward_data(Model& m, Steps& steps, const Pd& pd, const char* kind) {
    const std::string what = name_ + ": " + kind + " backward data";
    Tensor& x = m.tensor(inputs_[0]);
    // Precision bf16: the forward's bf16 copy where it has the layout wanted.
    dnnl::memory weights =
        weights_low_ && weights_low_.get_desc() == pd.weights_desc()
            ? weights_low_
            : m.as_layout(m.param(weight_).value, pd.weights_desc(), steps, what);
    dnnl::memory diff_dst = m.as_layout(output_diff(m), pd.diff_dst_desc(), steps, what);
    Steps post;
    // A flattened source is a plain view of the input, so its gradient is too.
    dnnl::memory diff_src =
        flat_ ? view(m.diff_sink(x, plain_md(x.dims, dnnl::memory::data_type::f32), post, what),
                     pd.diff_src_desc())
              : m.diff_sink(x, pd.diff_src_desc(), post, what);
    m.add_primitive(steps, what, Prim(pd), pd,
                    {{DNNL_ARG_DIFF_DST, diff_dst},
                     {DNNL_ARG_WEIGHTS, weights},
                     {DNNL_ARG_DIFF_SRC, diff_src}});
    steps.insert(steps.end(), post.begin(), post.end());
    m.note_implementation(std::string(kind) + " bwd_d", pd.impl_info_str());
  }

  // The output's gradient as the primitives see it.
  dnnl::memory output_diff(Model& m) const {
    Tensor& y = m.tensor(output_);
    return flat_ ? view(m.diff_of(y), flat_dst_md_) : m.diff_of(y);
  }

  int32_t weight_ = -1, bias_ = -1;
  dnnl::memory src_;  // the forward source in the layout the forward primitive read
  // Precision bf16: the forward's bf16 copy of the weights (from the fp32 master, every step).
  dnnl::memory weights_low_;
  dnnl::memory ones_;  // GEMM path: [rows] ones, the bias gradient's dnnl_sgemm operand
  // A per-time-step FC works on 2-D plain views of its [N, T, ...] input and [N, T, out] output.
  bool flat_ = false;
  Md flat_dst_md_;
};

// --- what the plain layers offer the fused layers ------------------------------------------------
// A fused layer (fused_layers.cpp) builds the nodes of one span of the fusion plan with their
// plain layers (make_layer) and asks each, through one of these, for its part of the fusion; a
// plain layer never sees the plan. Each offer says whether it took the fused form, and why not
// where it did not (then that part is built as the plain layer builds it).

// A convolution or a batch norm with the ReLU behind it (the one reader of its output).
class ReluHead {
 public:
  // Builds the forward with the ReLU in this node's own primitive (the convolution's post-op,
  // batch norm's fuse_norm_relu) where oneDNN keeps the same kernel and layouts: "" then (the
  // output then holds the ReLU's values); else the plain forward and why not.
  virtual std::string build_forward_with_relu(Model& m, Steps& steps) = 0;
  // Where that was done: whether this node's backward masks the ReLU's gradient itself (batch
  // norm keeps the mask in its workspace), so the ReLU's backward only hands it over; else the
  // ReLU's own backward (from its output) still runs.
  virtual bool masks_relu_gradient() const = 0;

 protected:
  ~ReluHead() = default;
};

// A max pool behind a ReLU (the one reader of the ReLU's output).
class ReluMaskingPool {
 public:
  // Builds the backward with the ReLU's in it: the pooled gradient masked where the output is
  // not positive, then pooled back straight into `relu_input`'s gradient. "" where done; else
  // the plain backward (into the pool's own input) and why not.
  virtual std::string build_backward_through_relu(Model& m, Steps& steps, Tensor& relu_input) = 0;

 protected:
  ~ReluMaskingPool() = default;
};

// An FC whose backward a fused node changes.
class FcGradients {
 public:
  // Before build_forward: let SGD go into the weight-gradient GEMM (the fc backward+sgd node);
  // the strategy rule then takes the GEMMs where the source is plain.
  virtual void offer_sgd() = 0;
  // After build_forward: "" where the gradients are dnnl_sgemm products (the GEMM strategy),
  // which SGD and the loss's column sums can go into; else why not.
  virtual std::string gemm_declined() const = 0;
  // Before build_backward, where gemm_declined() is "": the bias gradient is `sums`, [out]
  // floats complete before this node's backward steps run.
  virtual void take_bias_gradient(const float* sums) = 0;

 protected:
  ~FcGradients() = default;
};

// The softmax cross-entropy under fused_step.
class LossGradientInForward {
 public:
  // Before build_forward: make the logits' gradient in forward, with its column sums.
  virtual void offer_gradient_in_forward() = 0;
  // After build_forward: "" where it does, else why not.
  virtual std::string gradient_in_forward_declined() const = 0;
  // After build_backward: the [classes] column sums of the logits' gradient, made in forward;
  // nullptr where none are.
  virtual const float* column_sums() const = 0;

 protected:
  ~LossGradientInForward() = default;
};

// An element-wise activation's steps, as ActivationLayer builds them (a fused ReLU builds the
// same where its producer did not take it). Forward: in place over x where may_overwrite
// allows; backward (the use_dst algorithms, from y): in place on the gradient where it can.
// `node` names the node in the steps.
void add_eltwise_forward(Model& m, Steps& steps, dnnl::algorithm alg, const std::string& node,
                         Tensor& x, Tensor& y);
void add_eltwise_backward(Model& m, Steps& steps, dnnl::algorithm alg, const std::string& node,
                          Tensor& x, Tensor& y);

// fc_layer.cpp
std::unique_ptr<Layer> make_fc_layer(const dlhost_graph* graph, const dlhost_node& node);
// layers_norm.cpp
std::unique_ptr<Layer> make_batch_norm_layer(const dlhost_graph* graph, const dlhost_node& node);
std::unique_ptr<Layer> make_dropout_layer(const dlhost_graph* graph, const dlhost_node& node,
                                          int32_t index);
std::unique_ptr<Layer> make_add_layer(const dlhost_graph* graph, const dlhost_node& node);
std::unique_ptr<Layer> make_lrn_layer(const dlhost_graph* graph, const dlhost_node& node);
std::unique_ptr<Layer> make_global_avg_pool_layer(const dlhost_graph* graph,
                                                  const dlhost_node& node);
// layers_seq.cpp
std::unique_ptr<Layer> make_embedding_layer(const dlhost_graph* graph, const dlhost_node& node);
std::unique_ptr<Layer> make_lstm_layer(const dlhost_graph* graph, const dlhost_node& node);
// layers_transformer.cpp (ABI 1.4)
std::unique_ptr<Layer> make_layer_norm_layer(const dlhost_graph* graph, const dlhost_node& node);
std::unique_ptr<Layer> make_gelu_layer(const dlhost_graph* graph, const dlhost_node& node);
std::unique_ptr<Layer> make_attention_layer(const dlhost_graph* graph, const dlhost_node& node,
                                            int32_t index);
std::unique_ptr<Layer> make_position_embedding_layer(const dlhost_graph* graph,
                                                     const dlhost_node& node);
std::unique_ptr<Layer> make_tied_fc_layer(const dlhost_graph* graph, const dlhost_node& node);

}  // namespace dlhost::cpu_onednn

#endif  // DLHOST_CPU_ONEDNN_LAYERS_H
