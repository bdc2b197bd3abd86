// layers.cpp — one class per graph op of ABI 1.0 (input, FC, convolution, pooling, activation,
// the two losses) and make_layer, which dispatches every op: checks the node against the graph's
// resolved shapes, creates its oneDNN primitives (forward, backward data, backward weights) once,
// and appends their steps. The two losses have no oneDNN primitive and are short loops over plain
// buffers. The ABI 1.1 ops live in layers_norm.cpp and layers_seq.cpp.
// Layers exist only while a model compiles; the steps they leave keep what they point to alive.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dlhost/dlhost.hpp"
#include "layers.h"
#include "model.h"
#include "pooling.h"

namespace dlhost::cpu_onednn {

namespace {

namespace sdk = dlhost::sdk;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;

class InputLayer : public NodeLayer {
 public:
  InputLayer(const dlhost_graph* g, const dlhost_node& n) : NodeLayer(g, n) {}
  void build_forward(Model& m, Steps&) override {
    Tensor& t = m.tensor(output_);
    if (t.dtype == DLHOST_DTYPE_F32) {
      m.alloc_tensor(t, plain_md(t.dims, dt::f32));
    } else if (t.dtype == DLHOST_DTYPE_I32) {
      m.alloc_tensor(t, plain_md(t.dims, dt::s32));
    } else {
      sdk::unimplemented("cpu_onednn: input " + name_ + ": dtype " + std::to_string(t.dtype) +
                         " not supported");
    }
  }
  void build_backward(Model&, Steps&) override {}
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
  Args forward_args(Model& m, const memory& dst) const {
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
    memory src = m.as_layout(src_, pd.src_desc(), steps, what);
    memory diff_dst = m.as_layout(output_diff(m), pd.diff_dst_desc(), steps, what);
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
    memory weights = weights_low_ && weights_low_.get_desc() == pd.weights_desc()
                         ? weights_low_
                         : m.as_layout(m.param(weight_).value, pd.weights_desc(), steps, what);
    memory diff_dst = m.as_layout(output_diff(m), pd.diff_dst_desc(), steps, what);
    Steps post;
    // A flattened source is a plain view of the input, so its gradient is too.
    memory diff_src =
        flat_ ? view(m.diff_sink(x, plain_md(x.dims, dt::f32), post, what), pd.diff_src_desc())
              : m.diff_sink(x, pd.diff_src_desc(), post, what);
    m.add_primitive(steps, what, Prim(pd), pd,
                    {{DNNL_ARG_DIFF_DST, diff_dst},
                     {DNNL_ARG_WEIGHTS, weights},
                     {DNNL_ARG_DIFF_SRC, diff_src}});
    steps.insert(steps.end(), post.begin(), post.end());
    m.note_implementation(std::string(kind) + " bwd_d", pd.impl_info_str());
  }

  // The output's gradient as the primitives see it.
  memory output_diff(Model& m) const {
    Tensor& y = m.tensor(output_);
    return flat_ ? view(m.diff_of(y), flat_dst_md_) : m.diff_of(y);
  }

  int32_t weight_ = -1, bias_ = -1;
  memory src_;  // the forward source in the layout the forward primitive read
  // Precision bf16: the forward's bf16 copy of the weights (from the fp32 master, every step).
  memory weights_low_;
  memory ones_;  // GEMM path: [rows] ones, the bias gradient's dnnl_sgemm operand
  // A per-time-step FC works on 2-D plain views of its [N, T, ...] input and [N, T, out] output.
  bool flat_ = false;
  Md flat_dst_md_;
};

// A 1.0 writer's attributes end before batch_dims, which then means 1; only the fields the
// writer's struct_size covers are read.
dlhost_fc_attrs fc_attrs(const dlhost_node& n) {
  const auto& in = node_attrs<dlhost_fc_attrs>(n, DLHOST_FC_ATTRS_STRUCT_SIZE_1_0);
  dlhost_fc_attrs a{};
  a.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE;
  a.out_features = in.out_features;
  a.has_bias = in.has_bias;
  a.batch_dims = DLHOST_HAS_FIELD(&in, dlhost_fc_attrs, batch_dims) ? in.batch_dims : 0;
  if (a.batch_dims == 0) a.batch_dims = 1;
  return a;
}

class FcLayer : public WeightedLayer {
 public:
  FcLayer(const dlhost_graph* g, const dlhost_node& n)
      : WeightedLayer(g, n, fc_attrs(n).has_bias != 0), a_(fc_attrs(n)) {
    expect_inputs(1);
    if (a_.batch_dims != 1 && a_.batch_dims != 2)
      sdk::unimplemented("cpu_onednn: op FC / attribute batch_dims=" +
                         std::to_string(a_.batch_dims) + " not supported (node " + name_ + ")");
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    const size_t lead = static_cast<size_t>(a_.batch_dims);
    if (x.dims.size() < lead + 1) bad("input of rank " + std::to_string(x.dims.size()));
    std::vector<int64_t> ydims(x.dims.begin(), x.dims.begin() + lead);
    ydims.push_back(a_.out_features);
    if (y.dims != ydims)
      bad("output " + dims_str(y.dims) + " does not match input " + dims_str(x.dims) + " and " +
          std::to_string(a_.out_features) + " features");
    const std::string what = name_ + ": inner product forward";
    Md src_md = x.md, dst_md = any_md(y.dims);
    memory src = x.value;
    // The weight keeps the input's spatial dims so that oneDNN can take a 4-D source directly;
    // in plain layout it is exactly the canonical [out, C*H*W].
    std::vector<int64_t> wdims = x.dims;
    wdims[0] = a_.out_features;
    if (lead == 2) {
      // Every time step is one more row of a [N*T, features] inner product.
      const int64_t rows = x.dims[0] * x.dims[1];
      const int64_t features = x.elements / rows;
      flat_ = true;
      src_md = plain_md({rows, features}, dt::f32);
      dst_md = plain_md({rows, a_.out_features}, dt::f32);
      flat_dst_md_ = dst_md;
      src = view(m.as_layout(x.value, plain_md(x.dims, dt::f32), steps, what), src_md);
      wdims = {a_.out_features, features};
    }
    wdims_ = wdims;
    const int64_t rows = x.dims[0] * (flat_ ? x.dims[1] : 1);
    const bool plain_source = flat_ || x.md == plain_md(x.dims, dt::f32);
    // In bf16 every FC is the GEMM path (matmuls on bf16 operands), a blocked source (after a
    // convolution) first reordered to plain; its gradient goes back through diff_sink.
    if (m.bf16()) {
      build_forward_gemm(
          m, steps, x, y,
          plain_source ? src : m.as_layout(x.value, plain_md(x.dims, dt::f32), steps, what));
      return;
    }
    if ((rows >= kGemmMinRows || (m.threads() > 1 && !blocked_scales()) || m.sgd_in_backward()) &&
        plain_source) {
      build_forward_gemm(m, steps, x, y, src);
      return;
    }
    pd_ = forward_pd(m, src_md, any_md(wdims), dst_md);
    agree_on_weights(m, src_md, dst_md);
    src_ = m.as_layout(src, pd_.src_desc(), steps, what);
    m.alloc_param(weight_, pd_.weights_desc(), plain_md(wdims, dt::f32));
    if (bias_ >= 0) m.alloc_param(bias_, pd_.bias_desc(), plain_md({a_.out_features}, dt::f32));
    memory dst;
    if (flat_) {
      m.alloc_tensor(y, plain_md(y.dims, dt::f32));
      dst = view(y.value, flat_dst_md_);
    } else {
      m.alloc_tensor(y, pd_.dst_desc());
      dst = y.value;
    }
    m.add_primitive(steps, what, dnnl::inner_product_forward(pd_), pd_, forward_args(m, dst));
    m.note_implementation("ip fwd", pd_.impl_info_str());
  }

  void build_backward(Model& m, Steps& steps) override {
    if (gemm_) {
      build_backward_gemm(m, steps);
      return;
    }
    // The weight gradient in the weights' own layout spares a per-step reorder of it (a 150 MB
    // one for AlexNet's fc6); `any` only where oneDNN has no fast kernel for that layout.
    auto wpd = weights_pd(m, pd_.weights_desc(), true);
    if (!fast(wpd)) wpd = weights_pd(m, any_md(wdims_), false);
    add_backward_weights<decltype(wpd), dnnl::inner_product_backward_weights>(m, steps, wpd, "ip");
    if (!m.tensor(inputs_[0]).needs_grad) return;
    // Asking for the forward's weight layout first spares a per-step reorder of the weights
    // (150 MB for a large FC); oneDNN picks another layout only when that one has no fast kernel.
    auto dpd = compat::make_bwd_pd<dnnl::inner_product_backward_data>(
        m.engine(), m.attr(), pd_, /*allow_empty=*/true, pd_.src_desc(), pd_.weights_desc(),
        pd_.dst_desc());
    if (!fast(dpd))
      dpd = compat::make_bwd_pd<dnnl::inner_product_backward_data>(
          m.engine(), m.attr(), pd_, false, pd_.src_desc(), any_md(wdims_), pd_.dst_desc());
    add_backward_data<decltype(dpd), dnnl::inner_product_backward_data>(m, steps, dpd, "ip");
  }

 private:
  dnnl::inner_product_forward::primitive_desc forward_pd(Model& m, const Md& src, const Md& weights,
                                                         const Md& dst, bool allow_empty = false) {
    using P = dnnl::inner_product_forward;
    return bias_ >= 0
               ? compat::make_pd<P>(m.engine(), m.attr(), allow_empty, prop_kind::forward_training,
                                    src, weights, any_md({a_.out_features}), dst)
               : compat::make_pd<P>(m.engine(), m.attr(), allow_empty, prop_kind::forward_training,
                                    src, weights, dst);
  }
  dnnl::inner_product_backward_weights::primitive_desc weights_pd(Model& m, const Md& weights,
                                                                  bool allow_empty) {
    using P = dnnl::inner_product_backward_weights;
    return bias_ >= 0
               ? compat::make_bwd_pd<P>(m.engine(), m.attr(), pd_, allow_empty, pd_.src_desc(),
                                        weights, any_md({a_.out_features}), pd_.dst_desc())
               : compat::make_bwd_pd<P>(m.engine(), m.attr(), pd_, allow_empty, pd_.src_desc(),
                                        weights, pd_.dst_desc());
  }
  // oneDNN picks the forward's and the weight gradient's layouts independently (AlexNet's fc6:
  // BcdA8b4096a and aBcd8b), and a gradient in another layout than its weights costs a reorder
  // every step. When they differ, the forward is asked for the gradient's layout; it keeps its
  // own choice where that has no fast forward kernel.
  void agree_on_weights(Model& m, const Md& src_md, const Md& dst_md) {
    if (fast(weights_pd(m, pd_.weights_desc(), true))) return;
    const Md wanted = weights_pd(m, any_md(wdims_), false).diff_weights_desc();
    auto candidate = forward_pd(m, src_md, wanted, dst_md, true);
    if (fast(candidate) && candidate.src_desc() == pd_.src_desc()) pd_ = candidate;
  }

  // An FC over a plain source of many rows (the per-step decoder of the language models, FCN-R's
  // batch of 1024) is three plain GEMMs: the forward a matmul primitive with the bias fused,
  // the two gradients dnnl_sgemm calls. There oneDNN 2.6's inner-product backward kernels
  // (brgemm_bwd_w/bwd_d on AVX-512) took 1.3-1.7x the time of dnnl_sgemm for the same product
  // (the LSTM decoder's [4096 x 256] x [256 x 10000]: 2.2 s against 1.35 s under the same
  // load), and plain weights are the canonical layout, so no reorder is ever needed. With few
  // rows (FCN-5's batch of 64) at 1 thread the blocked inner product's forward is the faster
  // one, and the whole FCN-5 step measured 1.08-1.12x slower on this path, so those keep it.
  // At 2 threads the blocked inner product at 64 rows does not scale: the quiet run of
  // 2026-12-03 (bench/results/2026-12-03-quiet) had FCN-8's step at 430 ms against 270 ms for
  // its GEMMs bare as dnnl_sgemm (FCN-5: 265 against 220), so with more than one thread every
  // plain FC takes this path there: see blocked_scales. With fused SGD (Model::sgd_in_backward)
  // every plain FC takes it, as only dnnl_sgemm's beta lets the step go into the gradient's
  // product (the inner product's backward has no post-ops): measured on the Intel Xeon with AMX,
  // 1 thread, 3 alternating rounds (2026-12-06, issue 29), the whole step took 0.94x the blocked
  // path's time for FCN-5, 0.97x for FCN-8, 0.95x for AlexNet at batch 16, 0.87x for the
  // AutoEncoder, 1.00x for LeNet; at 2 threads (the best of 3 runs, a shared machine) 0.89-0.92x
  // for FCN-5 and FCN-8, 0.92x for the AutoEncoder.
  static constexpr int64_t kGemmMinRows = 256;
  // Whether the blocked inner product over few rows scales to 2+ threads on this CPU. Measured
  // quiet, whole steps at 2 threads: on AMD EPYC (oneDNN dispatching avx512_core_bf16; the run
  // above, then bench/results/2026-12-03-quiet-after) it did not: the GEMM path took 0.71x its
  // time for FCN-8. On an Intel Xeon with AMX (avx512_core_amx) it did: the blocked path took
  // 0.88x the GEMM path's time for FCN-5 and FCN-8, 0.92x for the AutoEncoder, 0.99x for
  // AlexNet at batch 16 (3 alternating rounds, 2026-12-04, issue 14's note). oneDNN's ISA is the
  // one proxy at hand for that difference; machines not measured keep the GEMM path.
  static bool blocked_scales() {
    return dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
  }
  void build_forward_gemm(Model& m, Steps& steps, Tensor& x, Tensor& y, const memory& src) {
    gemm_ = true;
    rows_ = x.dims[0] * (flat_ ? x.dims[1] : 1);
    features_ = x.elements / rows_;
    const int64_t out = a_.out_features;
    const Md src_md = plain_md({rows_, features_}, dt::f32);
    const Md dst_md = plain_md({rows_, out}, dt::f32);
    // The parameter is [out, features] row-major; matmul reads it as its transpose [features,
    // out] (tag ba) without moving a byte.
    const Md weights_md = Md({features_, out}, dt::f32, tag::ba);
    const Md bias_md = plain_md({1, out}, dt::f32);
    const auto pd = bias_ >= 0 ? compat::make_pd<dnnl::matmul>(m.engine(), m.attr(), false, src_md,
                                                               weights_md, bias_md, dst_md)
                               : compat::make_pd<dnnl::matmul>(m.engine(), m.attr(), false, src_md,
                                                               weights_md, dst_md);
    // [out, features] row-major, whatever the rank of the canonical dims.
    m.alloc_param(weight_, plain_md(wdims_, dt::f32), plain_md(wdims_, dt::f32));
    if (bias_ >= 0) m.alloc_param(bias_, plain_md({out}, dt::f32), plain_md({out}, dt::f32));
    m.alloc_tensor(y, plain_md(y.dims, dt::f32));
    src_ = view(src, src_md);
    if (m.bf16()) {
      build_forward_bf16(m, steps, y);
      return;
    }
    Args args = {{DNNL_ARG_SRC, src_},
                 {DNNL_ARG_WEIGHTS, view(m.param(weight_).value, weights_md)},
                 {DNNL_ARG_DST, view(y.value, dst_md)}};
    if (bias_ >= 0) args.push_back({DNNL_ARG_BIAS, view(m.param(bias_).value, bias_md)});
    m.add_primitive(steps, name_ + ": matmul forward", dnnl::matmul(pd), pd, args);
    m.note_implementation("matmul fwd", pd.impl_info_str());
  }

  // Precision bf16: Y = X W^T (+ b) on bf16 copies of X and W (the master weights stay fp32;
  // W's copy is made every step, as the update changes W), fp32 out. Both copies are kept for
  // backward.
  void build_forward_bf16(Model& m, Steps& steps, Tensor& y) {
    const std::string what = name_ + ": matmul forward";
    const int64_t out = a_.out_features;
    src_low_ = m.product_operand(src_, steps, what);
    weights_low_ = m.product_operand(
        view(m.param(weight_).value, plain_md({out, features_}, dt::f32)), steps, what);
    Args args = {{DNNL_ARG_SRC, src_low_},
                 {DNNL_ARG_WEIGHTS, view(weights_low_, Md({features_, out}, dt::bf16, tag::ba))},
                 {DNNL_ARG_DST, view(y.value, plain_md({rows_, out}, dt::f32))}};
    if (bias_ >= 0)
      args.push_back({DNNL_ARG_BIAS, view(m.param(bias_).value, plain_md({1, out}, dt::f32))});
    add_matmul(m, steps, what, m.attr(), args, "matmul fwd bf16");
  }

  // Precision bf16: dW = dY^T X and dX = dY W as matmuls on bf16 copies (dY's made here, X's and
  // W's kept from forward), fp32 out; db = dY^T x ones stays an fp32 dnnl_sgemm (a column sum).
  void build_backward_bf16(Model& m, Steps& steps) {
    const std::string what = name_ + ": gemm backward";
    const int64_t rows = rows_, out = a_.out_features;
    const memory dy = view(m.diff_of(m.tensor(output_)), plain_md({rows, out}, dt::f32));
    const memory dy_low = m.product_operand(dy, steps, what);
    add_matmul(m, steps, what + " weights", m.attr(),
               {{DNNL_ARG_SRC, view(dy_low, Md({out, rows}, dt::bf16, tag::ba))},
                {DNNL_ARG_WEIGHTS, src_low_},
                {DNNL_ARG_DST, view(m.param(weight_).grad, plain_md({out, features_}, dt::f32))}},
               "matmul bwd_w bf16");
    if (bias_ >= 0) {
      const float* d = static_cast<const float*>(dy.get_data_handle());
      float* db = static_cast<float*>(m.param(bias_).grad.get_data_handle());
      ones_ = m.alloc(plain_md({rows}, dt::f32));
      float* ones = static_cast<float*>(ones_.get_data_handle());
      std::fill(ones, ones + rows, 1.0f);
      m.add_function(steps, what + " bias", [=, name = name_] {
        gemm(name, 'T', 'N', out, 1, rows, d, out, ones, 1, db, 1);
      });
    }
    m.add_ready(steps, weight_);
    if (bias_ >= 0) m.add_ready(steps, bias_);
    Tensor& in = m.tensor(inputs_[0]);
    if (in.needs_grad)
      add_bf16_data_gradient(m, steps, in, dy_low, weights_low_, what + " data",
                             "matmul bwd_d bf16");
  }

  void build_backward_gemm(Model& m, Steps& steps) {
    if (m.bf16()) {
      build_backward_bf16(m, steps);
      return;
    }
    const std::string what = name_ + ": gemm backward";
    const int64_t rows = rows_, features = features_, out = a_.out_features;
    const float* x = static_cast<const float*>(src_.get_data_handle());
    const float* dy = static_cast<const float*>(m.diff_of(m.tensor(output_)).get_data_handle());
    // Fused SGD: the data gradient reads W, so it goes first, before the step changes W.
    const bool fused = m.sgd_in_backward();
    if (fused) add_data_gradient_gemm(m, steps, what, dy);
    // dW [out, features] = dY^T [out, rows] x X [rows, features]; db = the column sums of dY,
    // dY^T x ones [rows], as one more dnnl_sgemm: the language models' decoder (dY [4096 x
    // 10000]) took 2.5x its time with a loop of column blocks (1 thread, 25 against 10 ms). The
    // order of the sums is then sgemm's: fixed for a thread count, as the GEMMs' own are.
    // Fused SGD writes C = alpha dY^T X + beta C into the parameter itself, never into its
    // gradient: with momentum 0, W <- (1 - lr wd) W - lr dY^T X (update()'s
    // w -= lr (g + wd w), one pass over W instead of two); with momentum mu, v <- mu v + dY^T X,
    // and update() adds wd w and steps W. This spares the update's read of a gradient as large
    // as the weights (FCN-5: 472 MB of its 85.8 ms update at 1 thread).
    float alpha = 1.0f, beta = 0.0f;
    float* dw = static_cast<float*>(m.param(weight_).grad.get_data_handle());
    float* db = bias_ >= 0 ? static_cast<float*>(m.param(bias_).grad.get_data_handle()) : nullptr;
    if (fused) {
      const dlhost_optimizer_desc& o = m.optimizer();
      const bool momentum = o.momentum != 0.0f;
      alpha = momentum ? 1.0f : -o.learning_rate;
      beta = momentum ? o.momentum : 1.0f - o.learning_rate * o.weight_decay;
      auto target = [&](int32_t id) {
        Param& p = m.param(id);
        p.update_in_backward = true;
        return static_cast<float*>((momentum ? p.velocity : p.value).get_data_handle());
      };
      dw = target(weight_);
      if (db != nullptr) db = target(bias_);
    }
    const float* ones = nullptr;
    if (db != nullptr) {
      ones_ = m.alloc(plain_md({rows}, dt::f32));
      float* o = static_cast<float*>(ones_.get_data_handle());
      std::fill(o, o + rows, 1.0f);
      ones = o;
    }
    // A loss that made dY in forward also made its column sums (SoftmaxCrossEntropyLayer).
    const float* dy_sums = m.tensor(output_).diff_column_sums;
    m.add_function(steps, what + (fused ? " weights, sgd" : " weights"), [=, name = name_] {
      sgemm(name, 'T', 'N', out, features, rows, alpha, dy, out, x, features, beta, dw, features);
      if (db == nullptr) return;
      if (dy_sums == nullptr) {
        sgemm(name, 'T', 'N', out, 1, rows, alpha, dy, out, ones, 1, beta, db, 1);
      } else if (fused) {
        for (int64_t j = 0; j < out; ++j) db[j] = beta * db[j] + alpha * dy_sums[j];
      } else {
        std::copy(dy_sums, dy_sums + out, db);
      }
    });
    m.note_implementation(fused ? "gemm bwd + sgd" : "gemm bwd", "dnnl_sgemm");
    if (fused) return;  // no gradient to announce: the host reads none (fused_step)
    m.add_ready(steps, weight_);
    if (bias_ >= 0) m.add_ready(steps, bias_);
    add_data_gradient_gemm(m, steps, what, dy);
  }

  // dX [rows, features] = dY [rows, out] x W [out, features], when something upstream learns.
  void add_data_gradient_gemm(Model& m, Steps& steps, const std::string& what, const float* dy) {
    Tensor& in = m.tensor(inputs_[0]);
    if (!in.needs_grad) return;
    const int64_t rows = rows_, features = features_, out = a_.out_features;
    Steps post;
    const float* w = static_cast<const float*>(m.param(weight_).value.get_data_handle());
    float* dx = static_cast<float*>(
        m.diff_sink(in, plain_md(in.dims, dt::f32), post, what + " data").get_data_handle());
    m.add_function(steps, what + " data", [=, name = name_] {
      gemm(name, 'N', 'N', rows, features, out, dy, out, w, features, dx, features);
    });
    steps.insert(steps.end(), post.begin(), post.end());
  }

  // Row-major C [m, n] = op(A) x op(B), overwriting C.
  static void gemm(const std::string& name, char transa, char transb, int64_t m, int64_t n,
                   int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                   int64_t ldc) {
    sgemm(name, transa, transb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  }

  dlhost_fc_attrs a_;
  std::vector<int64_t> wdims_;
  dnnl::inner_product_forward::primitive_desc pd_;
  bool gemm_ = false;
  int64_t rows_ = 0, features_ = 0;
  memory src_low_;  // precision bf16: the forward's bf16 copy of X (W's: weights_low_)
};

class ConvLayer : public WeightedLayer {
 public:
  ConvLayer(const dlhost_graph* g, const dlhost_node& n)
      : WeightedLayer(
            g, n,
            node_attrs<dlhost_conv2d_attrs>(n, DLHOST_CONV2D_ATTRS_STRUCT_SIZE).has_bias != 0),
        a_(node_attrs<dlhost_conv2d_attrs>(n, DLHOST_CONV2D_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    if (a_.groups != 1)
      sdk::unimplemented("cpu_onednn: op CONV2D / attribute groups=" + std::to_string(a_.groups) +
                         " not supported (node " + name_ + ")");
    if (a_.kernel_h < 1 || a_.kernel_w < 1 || a_.stride_h < 1 || a_.stride_w < 1 ||
        a_.dilation_h < 1 || a_.dilation_w < 1 || a_.pad_h < 0 || a_.pad_w < 0)
      bad("kernel, stride and dilation must be >= 1 and padding >= 0");
    fuse_relu_ = only_reader_is_relu(g, output_);
  }

  void build_forward(Model& m, Steps& steps) override {
    pt_ = m.product_type();
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (x.dims.size() != 4) bad("input " + dims_str(x.dims) + " is not NCHW");
    const int64_t extent_h = (a_.kernel_h - 1) * a_.dilation_h + 1;
    const int64_t extent_w = (a_.kernel_w - 1) * a_.dilation_w + 1;
    const std::vector<int64_t> expected = {x.dims[0], a_.out_channels,
                                           (x.dims[2] + 2 * a_.pad_h - extent_h) / a_.stride_h + 1,
                                           (x.dims[3] + 2 * a_.pad_w - extent_w) / a_.stride_w + 1};
    if (y.dims != expected)
      bad("output " + dims_str(y.dims) + " but the attributes give " + dims_str(expected));
    wdims_ = {a_.out_channels, x.dims[1], a_.kernel_h, a_.kernel_w};
    if (x.dims[1] >= kWinogradMinChannels && a_.out_channels >= kWinogradMinChannels)
      alg_ = algorithm::convolution_auto;
    strides_ = {a_.stride_h, a_.stride_w};
    dilates_ = {a_.dilation_h - 1, a_.dilation_w - 1};  // oneDNN counts the holes
    pad_ = {a_.pad_h, a_.pad_w};
    xdims_ = x.dims;
    ydims_ = y.dims;
    pd_ = choose_forward_pd(m, x, y, false);
    // conv -> ReLU (its only reader): the ReLU as a post-op of the convolution spares the
    // activation's pass over the output (AlexNet-R's conv2 at batch 1024: 2.8 ms a step, 1
    // thread). The output then holds the ReLU's values, which the activation node takes over as
    // its own, as its in-place form does; its backward (it reads only those) stays. Only where
    // oneDNN keeps the same kernel and layouts with the post-op.
    if (fuse_relu_) {
      auto fused = choose_forward_pd(m, x, y, true);
      fuse_relu_ = fused && std::string(fused.impl_info_str()) == pd_.impl_info_str() &&
                   fused.src_desc() == pd_.src_desc() && fused.dst_desc() == pd_.dst_desc();
      if (fuse_relu_) pd_ = fused;
    }
    const std::string what = name_ + ": convolution forward";
    src_ = m.as_layout(x.value, pd_.src_desc(), steps, what);  // bf16: a bf16 copy
    if (m.bf16()) {
      // The fp32 master weights in the canonical layout; the forward reads a bf16 copy in its
      // own layout, made every step (the update changed the master).
      m.alloc_param(weight_, plain_md(wdims_, dt::f32), plain_md(wdims_, dt::f32));
      weights_low_ =
          m.as_layout(m.param(weight_).value, pd_.weights_desc(), steps, what + " (to bf16)");
    } else {
      m.alloc_param(weight_, pd_.weights_desc(), plain_md(wdims_, dt::f32));
    }
    if (bias_ >= 0) m.alloc_param(bias_, pd_.bias_desc(), plain_md({a_.out_channels}, dt::f32));
    m.alloc_tensor(y, pd_.dst_desc());
    y.holds_relu = fuse_relu_;
    m.add_primitive(steps, what, dnnl::convolution_forward(pd_), pd_, forward_args(m, y.value));
    m.note_implementation("conv fwd", pd_.impl_info_str());
  }

  void build_backward(Model& m, Steps& steps) override {
    const algorithm alg = alg_;
    // Each backward primitive is first asked for the forward's layouts, which spares per-step
    // reorders; then for the forward's activation layouts with weights left to oneDNN (the
    // forward's brgemm weight layout has no backward kernel in oneDNN 2.6; a weight reorder is
    // small); when oneDNN has only its reference kernel for those, it chooses everything (`any`).
    // Level 0: all as forward, 1: activations as forward, 2: all `any`.
    // Precision bf16: src, weights and dY are bf16 (dY converted, in a layout of oneDNN's
    // choice), dX and dW fp32.
    const bool low = m.bf16();
    auto src_md = [&](int level) { return level < 2 ? pd_.src_desc() : Md(xdims_, pt_, tag::any); };
    auto diff_src_md = [&](int level) { return low ? any_md(xdims_) : src_md(level); };
    auto dst_md = [&](int level) {
      if (low) return Md(ydims_, dt::bf16, tag::any);
      return level < 2 ? pd_.dst_desc() : any_md(ydims_);
    };
    auto wei_md = [&](int level) {
      return level < 1 ? pd_.weights_desc() : Md(wdims_, pt_, tag::any);
    };
    auto diff_wei_md = [&](int level) { return low ? any_md(wdims_) : wei_md(level); };
    auto weights_pd = [&](int level) {
      using P = dnnl::convolution_backward_weights;
      return bias_ >= 0
                 ? compat::make_bwd_pd<P>(m.engine(), m.attr(), pd_, level < 2, alg, src_md(level),
                                          diff_wei_md(level), any_md({a_.out_channels}),
                                          dst_md(level), strides_, dilates_, pad_, pad_)
                 : compat::make_bwd_pd<P>(m.engine(), m.attr(), pd_, level < 2, alg, src_md(level),
                                          diff_wei_md(level), dst_md(level), strides_, dilates_,
                                          pad_, pad_);
    };
    auto wpd = weights_pd(0);
    for (int level = 1; level <= 2 && !fast(wpd); ++level) wpd = weights_pd(level);
    add_backward_weights<decltype(wpd), dnnl::convolution_backward_weights>(m, steps, wpd, "conv");
    if (!m.tensor(inputs_[0]).needs_grad) return;
    auto data_pd = [&](int level) {
      return compat::make_bwd_pd<dnnl::convolution_backward_data>(
          m.engine(), m.attr(), pd_, level < 2, alg, diff_src_md(level), wei_md(level),
          dst_md(level), strides_, dilates_, pad_, pad_);
    };
    auto dpd = data_pd(0);
    for (int level = 1; level <= 2 && !fast(dpd); ++level) dpd = data_pd(level);
    add_backward_data<decltype(dpd), dnnl::convolution_backward_data>(m, steps, dpd, "conv");
  }

 private:
  // Whether a channel-blocked layout pads these channels by a quarter or more. Fewer than 8
  // input channels (an image's 1 or 3) have their own kernels that read them unpadded.
  static bool wastes_blocks(int64_t channels) {
    const int64_t block = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? 16 : 8;
    const int64_t padded = (channels + block - 1) / block * block;
    return channels >= 8 && 4 * (padded - channels) >= padded;
  }
  // Every layout left to oneDNN: it picks blocked formats for the ISA it dispatches.
  dnnl::convolution_forward::primitive_desc choose_forward_pd(Model& m, const Tensor& x,
                                                              const Tensor& y, bool relu) {
    auto pd = forward_pd(m, Md(x.dims, pt_, tag::any), any_md(y.dims), relu);
    // A blocked layout pads the channels to its block (16 on AVX-512): LeNet's conv2, 20 -> 50
    // channels, computes 32 -> 64, twice its FLOPs. Channels-last has no padding, and there
    // oneDNN 2.6 has a brgemm forward kernel (brgconv, AVX-512 only); its backward kernels are
    // the jit direct ones, which read channels-last too. LeNet b64, 1 thread: 0.86x the CPU
    // time per step. Where the channels fill their blocks, the blocked kernels measured as fast
    // or faster (AlexNet-R), so they stay.
    if (pd && (wastes_blocks(x.dims[1]) || wastes_blocks(a_.out_channels))) {
      auto nhwc = forward_pd(m, Md(x.dims, pt_, tag::acdb), Md(y.dims, dt::f32, tag::acdb), relu);
      if (nhwc && std::string(nhwc.impl_info_str()).rfind("brg", 0) == 0) pd = nhwc;
    }
    return pd;
  }
  // With `relu`, the ReLU post-op; then an empty descriptor where oneDNN has no kernel for it.
  dnnl::convolution_forward::primitive_desc forward_pd(Model& m, const Md& src, const Md& dst,
                                                       bool relu) {
    const algorithm alg = alg_;
    // A fresh attribute for the ReLU: primitive_attr copies share one handle, and m.attr() is
    // everyone's.
    dnnl::primitive_attr attr = m.attr();
    if (relu) {
      attr = dnnl::primitive_attr();
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::post_ops ops;
      compat::append_eltwise(ops, algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    using P = dnnl::convolution_forward;
    return bias_ >= 0
               ? compat::make_pd<P>(m.engine(), attr, relu, prop_kind::forward_training, alg, src,
                                    Md(wdims_, pt_, tag::any), any_md({a_.out_channels}), dst,
                                    strides_, dilates_, pad_, pad_)
               : compat::make_pd<P>(m.engine(), attr, relu, prop_kind::forward_training, alg, src,
                                    Md(wdims_, pt_, tag::any), dst, strides_, dilates_, pad_, pad_);
  }

  dlhost_conv2d_attrs a_;
  // For wide layers (>= kWinogradMinChannels in and out) convolution_auto lets oneDNN pick
  // Winograd (jit_wino_4x3, AVX-512) for the 3x3 stride-1 shapes where its heuristic expects it
  // to beat the direct kernels; the backward passes follow the forward's choice. AlexNet b16
  // (conv3-5: 256-384 channels), 1 thread: 0.86x the CPU time per step. ResNet-56's 16-64
  // channels measured no gain (and noisy), so narrower layers stay direct. Winograd rounds
  // differently: AlexNet's first loss moved from 6.930698 to 6.930696.
  static constexpr int64_t kWinogradMinChannels = 256;
  algorithm alg_ = algorithm::convolution_direct;
  dt pt_ = dt::f32;         // what the products read: bf16 in precision bf16
  bool fuse_relu_ = false;  // the output's only reader is a ReLU, applied here as a post-op
  std::vector<int64_t> wdims_, xdims_, ydims_;
  memory::dims strides_, dilates_, pad_;
  dnnl::convolution_forward::primitive_desc pd_;
};

class PoolLayer : public NodeLayer {
 public:
  PoolLayer(const dlhost_graph* g, const dlhost_node& n)
      : NodeLayer(g, n), a_(node_attrs<dlhost_pool2d_attrs>(n, DLHOST_POOL2D_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    if (a_.kind != DLHOST_POOL_MAX && a_.kind != DLHOST_POOL_AVG)
      sdk::unimplemented("cpu_onednn: op POOL2D / attribute kind=" + std::to_string(a_.kind) +
                         " not supported (node " + name_ + ")");
    if (a_.kernel_h < 1 || a_.kernel_w < 1 || a_.stride_h < 1 || a_.stride_w < 1 || a_.pad_h < 0 ||
        a_.pad_w < 0)
      bad("kernel and stride must be >= 1 and padding >= 0");
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (x.dims.size() != 4) bad("input " + dims_str(x.dims) + " is not NCHW");
    const std::vector<int64_t> expected = {x.dims[0], x.dims[1],
                                           out_size(x.dims[2], a_.kernel_h, a_.stride_h, a_.pad_h),
                                           out_size(x.dims[3], a_.kernel_w, a_.stride_w, a_.pad_w)};
    if (y.dims != expected)
      bad("output " + dims_str(y.dims) + " but the attributes give " + dims_str(expected));
    strides_ = {a_.stride_h, a_.stride_w};
    kernel_ = {a_.kernel_h, a_.kernel_w};
    pad_l_ = {a_.pad_h, a_.pad_w};
    // Ceil mode: the last window may reach past the symmetric padding; extra right padding
    // makes oneDNN produce exactly the graph's output size.
    pad_r_ = {
        std::max(a_.pad_h, (y.dims[2] - 1) * a_.stride_h + a_.kernel_h - x.dims[2] - a_.pad_h),
        std::max(a_.pad_w, (y.dims[3] - 1) * a_.stride_w + a_.kernel_w - x.dims[3] - a_.pad_w)};
    // Without symmetric padding, Caffe's include-padding divisor (the window clipped to the
    // input plus padding) is the count of the window's input elements, which is what oneDNN's
    // exclude-padding average divides by, ceil-mode overhang included: no rescaling step is
    // needed. That step, a broadcast multiply over a blocked tensor, runs oneDNN 2.6's ref:any
    // binary kernel (AlexNet-R's pool3 at batch 1024: ~16% of the step, forward and backward).
    const bool include_pad = a_.count_include_pad != 0 && (a_.pad_h > 0 || a_.pad_w > 0);
    alg_ = a_.kind == DLHOST_POOL_MAX ? algorithm::pooling_max
           : include_pad              ? algorithm::pooling_avg_include_padding
                                      : algorithm::pooling_avg_exclude_padding;
    pd_ = compat::pooling_forward_pd(m.engine(), m.attr(), alg_, pooling_src_md(x), any_md(y.dims),
                                     strides_, kernel_, pad_l_, pad_r_);
    const std::string what = name_ + ": pooling forward";
    memory src = m.as_layout(x.value, pd_.src_desc(), steps, what);
    m.alloc_tensor(y, pd_.dst_desc());
    if (alg_ != algorithm::pooling_avg_include_padding && own_pool(x, y)) {
      const float* s = static_cast<const float*>(src.get_data_handle());
      float* d = static_cast<float*>(y.value.get_data_handle());
      if (alg_ == algorithm::pooling_avg_exclude_padding) {
        m.add_function(steps, name_ + ": average pooling forward",
                       [shape = own_, s, d] { avg_pool_forward(shape, s, d); });
        m.note_implementation("avg pool", "cpu_onednn:own");
        return;
      }
      workspace_ = m.alloc(Md(y.dims, dt::u8, own_layout_));
      uint8_t* k = static_cast<uint8_t*>(workspace_.get_data_handle());
      m.add_function(steps, name_ + ": max pooling forward",
                     [shape = own_, s, d, k] { max_pool_forward(shape, s, d, k); });
      m.note_implementation("max pool", "cpu_onednn:own");
      return;
    }
    if (pd_.workspace_desc().get_size() > 0) workspace_ = m.alloc(pd_.workspace_desc());
    Args args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, y.value}};
    if (workspace_) args.push_back({DNNL_ARG_WORKSPACE, workspace_});
    m.add_primitive(steps, what, dnnl::pooling_forward(pd_), pd_, args);
    if (alg_ == algorithm::pooling_avg_include_padding) build_divisor_fix(m, x, y, steps);
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    if (!x.needs_grad) return;
    Tensor& y = m.tensor(output_);
    const bool own = own_.batch != 0;
    const bool avg = alg_ != algorithm::pooling_max;
    const std::string what = name_ + (!own  ? ": pooling backward"
                                      : avg ? ": average pooling backward"
                                            : ": max pooling backward");
    dnnl::pooling_backward::primitive_desc pd;
    if (!own)
      pd = compat::pooling_backward_pd(m.engine(), m.attr(), alg_, pd_.src_desc(), pd_.dst_desc(),
                                       strides_, kernel_, pad_l_, pad_r_, pd_);
    memory diff_dst = m.as_layout(m.diff_of(y), own ? y.md : pd.diff_dst_desc(), steps, what);
    if (fix_) {
      memory scaled = m.scratch(pd.diff_dst_desc());
      add_scale(m, diff_dst, scaled, steps);
      diff_dst = scaled;
    }
    // ReLU -> max pool (the pool its only reader): a window's gradient goes to its maximum,
    // which the ReLU passes exactly when the window's output is positive. So the ReLU's
    // backward is a mask of the pooled gradient by (output > 0), in place, followed by the
    // pool's backward straight into the ReLU input's gradient: the same values, from a pass
    // over the pooled tensor instead of the ReLU's (AlexNet-R's relu2 -> pool2 at batch 1024:
    // a quarter of the bytes, ~7 ms a step at 1 thread). Needs the output's bytes kept.
    Tensor* relu_in = nullptr;
    if (alg_ == algorithm::pooling_max && workspace_ && y.md == diff_dst.get_desc())
      relu_in = fused_relu_input(m, x, y);
    if (relu_in != nullptr) {
      const algorithm relu = algorithm::eltwise_relu_use_dst_for_bwd;
      const auto hint =
          compat::eltwise_forward_pd(m.engine(), m.attr(), relu, y.md, y.md, 0.0f, 0.0f);
      const auto mask = compat::eltwise_backward_pd(m.engine(), m.attr(), relu, y.md, y.md, y.md,
                                                    0.0f, 0.0f, hint);
      m.add_primitive(
          steps, what + ": ReLU mask", dnnl::eltwise_backward(mask), mask,
          {{DNNL_ARG_DST, y.value}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_dst}});
      x.relu_diff_done = true;
    }
    Steps post;
    memory diff_src = m.diff_sink(relu_in != nullptr ? *relu_in : x,
                                  own ? pd_.src_desc() : pd.diff_src_desc(), post, what);
    if (own) {
      const float* g = static_cast<const float*>(diff_dst.get_data_handle());
      float* d = static_cast<float*>(diff_src.get_data_handle());
      if (avg) {
        m.add_function(steps, what, [shape = own_, g, d] { avg_pool_backward(shape, g, d); });
      } else {
        const uint8_t* k = static_cast<const uint8_t*>(workspace_.get_data_handle());
        m.add_function(steps, what, [shape = own_, g, k, d] { max_pool_backward(shape, g, k, d); });
      }
    } else {
      Args args = {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}};
      if (workspace_) args.push_back({DNNL_ARG_WORKSPACE, workspace_});
      m.add_primitive(steps, what, dnnl::pooling_backward(pd), pd, args);
    }
    steps.insert(steps.end(), post.begin(), post.end());
  }

 private:
  // The ReLU whose backward this max pool may do itself (see build_backward): x = ReLU(input),
  // read by the pool alone, and y's bytes still y's at backward time (not lent to gradients,
  // not overwritten in place by a successor such as a sigmoid, whose output has another sign).
  // As lending works now, value_kept already fails for an overwritten y (the successor's bytes
  // are lent after its backward, before this one); the first check keeps the mask right
  // without resting on that order.
  static Tensor* fused_relu_input(Model& m, const Tensor& x, const Tensor& y) {
    if (x.relu_of < 0 || x.consumers != 1 || !y.overwritten_by.empty() || !m.value_kept(y))
      return nullptr;
    return &m.tensor(x.relu_of);
  }

  // Takes pooling.h's kernels where they apply: max or exclude-padding average, source and
  // output both channel-blocked or both channels-last (the layouts oneDNN's convolutions and
  // pooling_src_md give). Sets own_ and own_layout_.
  bool own_pool(const Tensor& x, const Tensor& y) {
    PoolShape s;
    for (tag t : {tag::aBcd16b, tag::aBcd8b, tag::acdb})
      if (pd_.src_desc() == Md(x.dims, dt::f32, t) && y.md == Md(y.dims, dt::f32, t)) {
        own_layout_ = t;
        s.channels_last = t == tag::acdb;
        s.block = t == tag::aBcd16b ? 16 : t == tag::aBcd8b ? 8 : 0;
        break;
      }
    s.batch = x.dims[0];
    s.channels = x.dims[1];
    s.channel_blocks = s.block == 0 ? 1 : (x.dims[1] + s.block - 1) / s.block;
    s.in_h = x.dims[2];
    s.in_w = x.dims[3];
    s.out_h = y.dims[2];
    s.out_w = y.dims[3];
    s.kernel_h = a_.kernel_h;
    s.kernel_w = a_.kernel_w;
    s.stride_h = a_.stride_h;
    s.stride_w = a_.stride_w;
    s.pad_top = a_.pad_h;
    s.pad_left = a_.pad_w;
    if (!pool_supported(s)) return false;
    own_ = s;
    return true;
  }

  // oneDNN pools a plain NCHW source with its slow simple_nchw kernel (AlexNet's pool1 behind
  // the GEMM-based conv1: ~20x the jit kernel's time); a channel-blocked copy costs one reorder
  // each way and gets the jit kernel.
  static Md pooling_src_md(const Tensor& x) {
    if (!(x.md == plain_md(x.dims, dt::f32)) || x.dims[1] < 8) return x.md;
    const bool wide = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
    return Md(x.dims, dt::f32, wide ? tag::aBcd16b : tag::aBcd8b);
  }

  int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p) const {
    const int64_t span = in + 2 * p - k;
    if (span < 0) bad("window larger than the padded input");
    if (a_.ceil_mode == 0) return span / s + 1;
    int64_t out = (span + s - 1) / s + 1;
    if ((out - 1) * s >= in + p) --out;  // the last window must start inside input or left pad
    return out;
  }

  // oneDNN's include-padding average divides by the whole window, but a ceil-mode window that
  // reaches past the symmetric padding is clipped there first (Caffe, PyTorch). Those outputs
  // (and their gradients) are rescaled by window / clipped-window with a broadcast multiply.
  void build_divisor_fix(Model& m, const Tensor& x, const Tensor& y, Steps& steps) {
    const int64_t oh = y.dims[2], ow = y.dims[3];
    std::vector<float> factor(oh * ow, 1.0f);
    for (int64_t i = 0; i < oh; ++i) {
      const int64_t h0 = i * a_.stride_h - a_.pad_h;
      const int64_t hs = std::min(h0 + a_.kernel_h, x.dims[2] + a_.pad_h) - h0;
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t w0 = j * a_.stride_w - a_.pad_w;
        const int64_t ws = std::min(w0 + a_.kernel_w, x.dims[3] + a_.pad_w) - w0;
        const float f = static_cast<float>(a_.kernel_h * a_.kernel_w) / static_cast<float>(hs * ws);
        if (f != 1.0f) fix_ = true;
        factor[i * ow + j] = f;
      }
    }
    if (!fix_) return;
    scale_ = m.alloc(plain_md({1, 1, oh, ow}, dt::f32));
    std::copy(factor.begin(), factor.end(), static_cast<float*>(scale_.get_data_handle()));
    add_scale(m, y.value, y.value, steps);
  }
  void add_scale(Model& m, const memory& src, const memory& dst, Steps& steps) const {
    const auto pd =
        compat::make_pd<dnnl::binary>(m.engine(), m.attr(), false, algorithm::binary_mul,
                                      src.get_desc(), scale_.get_desc(), dst.get_desc());
    m.add_primitive(steps, name_ + ": ceil-mode divisor", dnnl::binary(pd), pd,
                    {{DNNL_ARG_SRC_0, src}, {DNNL_ARG_SRC_1, scale_}, {DNNL_ARG_DST, dst}});
  }

  dlhost_pool2d_attrs a_;
  memory::dims strides_, kernel_, pad_l_, pad_r_;
  algorithm alg_ = algorithm::pooling_max;
  dnnl::pooling_forward::primitive_desc pd_;
  memory workspace_, scale_;
  bool fix_ = false;
  PoolShape own_;  // batch != 0: pooling.h's kernels run this pool, in own_layout_
  tag own_layout_ = tag::undef;
};

class ActivationLayer : public NodeLayer {
 public:
  ActivationLayer(const dlhost_graph* g, const dlhost_node& n) : NodeLayer(g, n) {
    expect_inputs(1);
    const auto& a = node_attrs<dlhost_activation_attrs>(n, DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE);
    // The use_dst variants let backward read the output, so the input need not be kept.
    switch (a.kind) {
      case DLHOST_ACTIVATION_RELU:
        alg_ = algorithm::eltwise_relu_use_dst_for_bwd;
        break;
      case DLHOST_ACTIVATION_SIGMOID:
        alg_ = algorithm::eltwise_logistic_use_dst_for_bwd;
        break;
      case DLHOST_ACTIVATION_TANH:
        alg_ = algorithm::eltwise_tanh_use_dst_for_bwd;
        break;
      default:
        sdk::unimplemented("cpu_onednn: op ACTIVATION / attribute kind=" + std::to_string(a.kind) +
                           " not supported (node " + name_ + ")");
    }
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (y.dims != x.dims) bad("output " + dims_str(y.dims) + " differs from input");
    pd_ = compat::eltwise_forward_pd(m.engine(), m.attr(), alg_, x.md, x.md, 0.0f, 0.0f);
    const bool relu = alg_ == algorithm::eltwise_relu_use_dst_for_bwd;
    if (relu) y.relu_of = inputs_[0];
    // The producer (a convolution) already applied this ReLU as a post-op; x is read by no one
    // else, so its bytes are this node's output.
    if (relu && x.holds_relu && x.consumers == 1 && pd_.dst_desc() == x.md) {
      m.write_over(x, y, name_);
      return;
    }
    // In place (PyTorch's ReLU(inplace=True)) where may_overwrite allows: backward needs only
    // the output. A ResNet-50 at batch 16 keeps ~0.6 GB less.
    if (may_overwrite(x) && pd_.dst_desc() == x.md) {
      m.write_over(x, y, name_);
    } else {
      m.alloc_tensor(y, pd_.dst_desc());
    }
    m.add_primitive(steps, name_ + ": eltwise forward", dnnl::eltwise_forward(pd_), pd_,
                    {{DNNL_ARG_SRC, x.value}, {DNNL_ARG_DST, y.value}});
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    if (!x.needs_grad) return;
    Tensor& y = m.tensor(output_);
    if (y.relu_diff_done) return;  // a max pool behind wrote x's gradient (PoolLayer)
    const std::string what = name_ + ": eltwise backward";
    if (x.relu_backward_by_producer) {
      // A batch norm fused this ReLU (fuse_norm_relu) and masks the gradient itself, from its
      // workspace: y's gradient is x's as it is, handed over or copied.
      m.hand_over_diff(y, x, steps, what + ": gradient to the batch norm");
      return;
    }
    const auto pd =
        compat::eltwise_backward_pd(m.engine(), m.attr(), alg_, y.md, y.md, y.md, 0.0f, 0.0f, pd_);
    memory diff_dst = m.as_layout(m.diff_of(y), pd.diff_dst_desc(), steps, what);
    Steps post;
    // In place on the gradient where x has none yet: a separate buffer is one more tensor-sized
    // stream through memory (AlexNet-R b1024, 1 thread: relu1's backward 10.1 -> 4.6 ms,
    // relu3's 4.0 -> 2.0 ms).
    const bool in_place = diff_dst.get_data_handle() == y.diff.get_data_handle() &&
                          pd.diff_src_desc() == x.md && m.pass_diff(y, x);
    memory diff_src = in_place ? x.diff : m.diff_sink(x, pd.diff_src_desc(), post, what);
    m.add_primitive(
        steps, what, dnnl::eltwise_backward(pd), pd,
        {{DNNL_ARG_DST, y.value}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
    steps.insert(steps.end(), post.begin(), post.end());
  }

 private:
  algorithm alg_ = algorithm::eltwise_relu_use_dst_for_bwd;
  dnnl::eltwise_forward::primitive_desc pd_;
};

// Log-softmax (oneDNN) then the negative log-likelihood of the labels. Working from
// log-probabilities keeps the loss finite when a probability underflows.
//
// Memory traffic: a language model's logits are [4096 positions, 10000 classes] = 164 MB. The
// forward runs the log-softmax on blocks of rows into a small buffer that stays in cache (the
// full log-probabilities were a 164 MB buffer written once and read once more), keeping per row
// only the label's log-probability (for the loss) and the row's log-sum-exp
// lse = x[label] - lp[label]. The backward is then one pass over the logits (which are still
// there: their bytes are lent to gradients only after their producer's backward):
// exp(x - lse - ln n) = softmax / n straight into the gradient. The forward reads the logits
// once and writes nothing big, and the model is 164 MB smaller.
//
// Under the host's fused_step (nothing reads the gradients before update) the gradient is made
// in forward instead: oneDNN's softmax per block of rows straight into the gradient, then, while
// the block is in cache, the labels' log-probabilities, (p - one_hot) / n and the gradient's
// column sums (the logits' producer's bias gradient, which would otherwise read the 164 MB
// gradient once more). The logits are read once per step instead of twice and each exponential
// is made once instead of twice. The gradient is a buffer of the layer's own (adopt_diff): the
// pool's bytes are handed out while backward is built and may still hold forward values when
// this forward runs.
class SoftmaxCrossEntropyLayer : public NodeLayer {
 public:
  SoftmaxCrossEntropyLayer(const dlhost_graph* g, const dlhost_node& n) : NodeLayer(g, n) {
    expect_inputs(2);
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& labels = m.tensor(inputs_[1]);
    // [N, ..., classes]: every position before the class axis is one prediction (one per time
    // step for a language model), and the loss is the mean over all of them.
    if (x.dims.size() < 2) bad("logits " + dims_str(x.dims) + " have no class axis");
    const std::vector<int64_t> positions(x.dims.begin(), x.dims.end() - 1);
    if (labels.dtype != DLHOST_DTYPE_I32 || labels.dims != positions || !labels.value)
      bad("labels " + labels.name + " must be I32 class ids of shape " + dims_str(positions));
    classes_ = x.dims.back();
    positions_ = x.elements / classes_;
    if (labels.label_classes != 0 && labels.label_classes != classes_)
      bad("labels " + labels.name + " used with two class counts");
    labels.label_classes = classes_;
    plain_ = plain_md(x.dims, dt::f32);
    const std::string what = name_ + ": log-softmax forward";
    // Plain logits, kept for the backward: the value itself (lent to gradients only once the
    // logits' producer has built its backward, which runs after this loss's) or a forward
    // scratch of its own.
    src_ = m.as_layout(x.value, plain_, steps, what);
    const int64_t n = positions_, c = classes_;
    // Rows per block: ~kBlockBytes of log-probabilities per thread (a share of a core's L2),
    // at least one row per thread so that oneDNN splits a block over all of them. lstm_ptb at
    // one thread: 28 ms per step at 128 KB to 8 MB per block alike, 37 ms for the whole
    // [4096, 10000] at once (ONEDNN_VERBOSE): the in-cache passes are bound by compute.
    const int64_t per_thread = std::max<int64_t>(1, kBlockBytes / (c * 4));
    const int64_t block = std::min(n, per_thread * std::max(1, m.threads()));
    picked_ = m.alloc(plain_md({n}, dt::f32));
    const float* xs = static_cast<const float*>(src_.get_data_handle());
    const int32_t* lab = static_cast<const int32_t*>(labels.value.get_data_handle());
    float* picked = static_cast<float*>(picked_.get_data_handle());
    // The gradient in forward (see the class comment): only where the logits have no other
    // reader and their layout is the plain one the gradient is written in.
    fused_ = m.fused_step() && x.needs_grad && x.consumers == 1 && x.md == plain_;
    if (fused_) {
      build_forward_with_gradient(m, steps, xs, lab, picked, block);
    } else {
      // The log-probabilities' block buffer and the shift the backward adds: the split step's.
      block_lp_ = m.alloc(plain_md({block, c}, dt::f32));
      shift_ = m.alloc(plain_md({n, 1}, dt::f32));
      const float* lp = static_cast<const float*>(block_lp_.get_data_handle());
      float* shift = static_cast<float*>(shift_.get_data_handle());
      const double ln_n = std::log(static_cast<double>(n));
      compat::logsoftmax_forward::primitive_desc pd;
      compat::logsoftmax_forward prim;
      for_each_block(block, [&](int64_t r0, int64_t rows, const Md& md, bool new_shape) {
        if (new_shape) {
          pd = compat::logsoftmax_forward_pd(m.engine(), m.attr(), md, md, 1, false);
          prim = compat::logsoftmax_forward(pd);
        }
        m.add_primitive(steps, what, prim, pd,
                        {{DNNL_ARG_SRC, memory(md, m.engine(), const_cast<float*>(xs + r0 * c))},
                         {DNNL_ARG_DST, memory(md, m.engine(), block_lp_.get_data_handle())}});
        m.add_function(steps, name_ + ": pick labels", [=] {
          for (int64_t i = 0; i < rows; ++i) {
            const int64_t row = r0 + i, j = lab[row];
            const float l = lp[i * c + j];
            picked[row] = l;
            // -(lse + ln n) with lse = x - lp: what the backward adds to the logits.
            shift[row] = static_cast<float>(static_cast<double>(l) -
                                            static_cast<double>(xs[row * c + j]) - ln_n);
          }
        });
      });
    }
    float* loss = is_graph_loss_ ? m.loss_slot() : &own_loss_;
    m.add_function(steps, name_ + ": cross-entropy", [picked, loss, n] {
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum -= picked[i];
      *loss = static_cast<float>(sum / static_cast<double>(n));
    });
  }

  // fused_step: per block of rows, oneDNN's softmax straight into the gradient's rows (the one
  // pass over the logits and the one exponential per logit), then, while the block is in
  // cache, the labels' log-probabilities (for the loss), (p - one_hot) / n and the column sums.
  void build_forward_with_gradient(Model& m, Steps& steps, const float* xs, const int32_t* lab,
                                   float* picked, int64_t block) {
    const int64_t n = positions_, c = classes_;
    grad_ = m.alloc(plain_);
    sums_ = m.alloc(plain_md({c}, dt::f32));
    float* grad = static_cast<float*>(grad_.get_data_handle());
    float* sums = static_cast<float*>(sums_.get_data_handle());
    const std::string what = name_ + ": cross-entropy and its gradient in forward";
    m.note_implementation("cross-entropy", "gradient in forward");
    dnnl::softmax_forward::primitive_desc pd;
    dnnl::softmax_forward prim;
    for_each_block(block, [&](int64_t r0, int64_t rows, const Md& md, bool new_shape) {
      if (new_shape) {
        pd = compat::softmax_forward_pd(m.engine(), m.attr(), md, md, 1);
        prim = dnnl::softmax_forward(pd);
      }
      m.add_primitive(steps, what + ": softmax", prim, pd,
                      {{DNNL_ARG_SRC, memory(md, m.engine(), const_cast<float*>(xs + r0 * c))},
                       {DNNL_ARG_DST, memory(md, m.engine(), grad + r0 * c)}});
      m.add_function(steps, what + ": labels, / n, column sums", [=] {
        float* g = grad + r0 * c;
        for (int64_t i = 0; i < rows; ++i) {
          float& p = g[i * c + lab[r0 + i]];
          picked[r0 + i] = p >= std::numeric_limits<float>::min()
                               ? std::log(p)
                               : log_probability(xs + (r0 + i) * c, c, lab[r0 + i]);
          p -= 1.0f;
        }
        const float inv_n = 1.0f / static_cast<float>(n);
        // Each column's sum runs over the rows in order, whatever the thread count.
        constexpr int64_t kColumns = 512;
#pragma omp parallel for schedule(static)
        for (int64_t j0 = 0; j0 < c; j0 += kColumns) {
          const int64_t j1 = std::min(c, j0 + kColumns);
          if (r0 == 0) std::fill(sums + j0, sums + j1, 0.0f);
          for (int64_t i = 0; i < rows; ++i) {
            float* gi = g + i * c;
#pragma omp simd
            for (int64_t j = j0; j < j1; ++j) {
              gi[j] *= inv_n;
              sums[j] += gi[j];
            }
          }
        }
      });
    });
  }

  // Calls fn(first row, rows, their [rows, classes] descriptor, whether that shape is new) for
  // each block of rows: all of `block` rows, then a last partial one. A primitive is made per
  // shape and run with memories that point at each block.
  template <typename Fn>
  void for_each_block(int64_t block, Fn fn) const {
    for (int64_t r0 = 0; r0 < positions_; r0 += block) {
      const int64_t rows = std::min(block, positions_ - r0);
      fn(r0, rows, plain_md({rows, classes_}, dt::f32), r0 == 0 || rows != block);
    }
  }

  // log softmax(x)[label] of one row of logits, in double: for a probability that underflows
  // (p below FLT_MIN), where log(p) would not be finite.
  static float log_probability(const float* x, int64_t c, int32_t label) {
    double top = x[0];
    for (int64_t j = 1; j < c; ++j) top = std::max(top, static_cast<double>(x[j]));
    double sum = 0.0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(x[j]) - top);
    return static_cast<float>(static_cast<double>(x[label]) - top - std::log(sum));
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    if (!x.needs_grad) return;
    if (fused_) {  // made in forward
      if (!m.adopt_diff(x, grad_))
        sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: node " + name_ +
                                            ": the logits' gradient, made in forward, has "
                                            "another writer");
      x.diff_column_sums = static_cast<const float*>(sums_.get_data_handle());
      return;
    }
    const std::string what = name_ + ": cross-entropy backward";
    Steps post;
    memory grad = m.diff_sink(x, plain_, post, what);
    // d loss / d logits = (softmax - one_hot) / n. softmax / n = exp(x - lse - ln n): oneDNN's
    // jit binary add of the per-row shift with an exp post-op, one read of the logits and one
    // write of the gradient (a scalar std::exp loop took ~8% of an LSTM step, 41M logits).
    // The labels' n corrections follow as a loop.
    const int64_t n = positions_, c = classes_;
    const Md rows = plain_md({n, c}, dt::f32);
    dnnl::post_ops exp_op;
    compat::append_eltwise(exp_op, algorithm::eltwise_exp, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_post_ops(exp_op);
    const auto pd = compat::make_pd<dnnl::binary>(m.engine(), attr, false, algorithm::binary_add,
                                                  rows, shift_.get_desc(), rows);
    m.add_primitive(steps, what + ": softmax / n", dnnl::binary(pd), pd,
                    {{DNNL_ARG_SRC_0, view(src_, rows)},
                     {DNNL_ARG_SRC_1, shift_},
                     {DNNL_ARG_DST, view(grad, rows)}});
    float* g = static_cast<float*>(grad.get_data_handle());
    const int32_t* lab = static_cast<const int32_t*>(m.tensor(inputs_[1]).value.get_data_handle());
    m.add_function(steps, what + ": labels", [g, lab, n, c] {
      const float inv_n = 1.0f / static_cast<float>(n);
      for (int64_t i = 0; i < n; ++i) g[i * c + lab[i]] -= inv_n;
    });
    steps.insert(steps.end(), post.begin(), post.end());
  }

 private:
  static constexpr int64_t kBlockBytes = 1 << 20;
  int64_t positions_ = 0, classes_ = 0;
  Md plain_;
  memory src_;          // the plain logits, read again by the backward
  memory block_lp_;     // [block rows, classes]: one block's log-probabilities
  memory shift_;        // [positions, 1]: -(lse + ln n) per row
  memory picked_;       // [positions]: the labels' log-probabilities
  bool fused_ = false;  // fused_step: the gradient is made in forward (class comment)
  memory grad_;         // fused_: the logits' gradient
  memory sums_;         // fused_: its column sums, [classes]
  float own_loss_ = 0.0f;
};

class MseLayer : public NodeLayer {
 public:
  MseLayer(const dlhost_graph* g, const dlhost_node& n) : NodeLayer(g, n) { expect_inputs(2); }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& t = activation(m, inputs_[1]);
    // Shapes may differ (an autoencoder's [N, 784] against its [N, 1, 28, 28] input): the
    // elements pair up in plain row-major order.
    if (x.elements != t.elements)
      bad("prediction " + dims_str(x.dims) + " and target " + dims_str(t.dims) + " differ in size");
    pred_md_ = plain_md(x.dims, dt::f32);
    target_md_ = plain_md(t.dims, dt::f32);
    const std::string what = name_ + ": mse";
    pred_ = m.as_layout(x.value, pred_md_, steps, what);
    target_ = m.as_layout(t.value, target_md_, steps, what);
    const float* p = static_cast<const float*>(pred_.get_data_handle());
    const float* q = static_cast<const float*>(target_.get_data_handle());
    float* loss = is_graph_loss_ ? m.loss_slot() : &own_loss_;
    const int64_t n = x.elements;
    m.add_function(steps, what, [p, q, loss, n] {
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(p[i]) - q[i];
        sum += d * d;
      }
      *loss = static_cast<float>(sum / static_cast<double>(n));
    });
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    Tensor& t = m.tensor(inputs_[1]);
    if (!x.needs_grad && !t.needs_grad) return;
    const std::string what = name_ + ": mse backward";
    Steps post;
    // The target gets a gradient too when it is computed (not a data input).
    float* gx = x.needs_grad
                    ? static_cast<float*>(m.diff_sink(x, pred_md_, post, what).get_data_handle())
                    : nullptr;
    float* gt = t.needs_grad
                    ? static_cast<float*>(m.diff_sink(t, target_md_, post, what).get_data_handle())
                    : nullptr;
    const float* p = static_cast<const float*>(pred_.get_data_handle());
    const float* q = static_cast<const float*>(target_.get_data_handle());
    const int64_t n = x.elements;
    m.add_function(steps, what, [gx, gt, p, q, n] {
      const float k = 2.0f / static_cast<float>(n);
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) {
        const float d = k * (p[i] - q[i]);
        if (gx != nullptr) gx[i] = d;
        if (gt != nullptr) gt[i] = -d;
      }
    });
    steps.insert(steps.end(), post.begin(), post.end());
  }

 private:
  Md pred_md_, target_md_;
  memory pred_, target_;
  float own_loss_ = 0.0f;
};

}  // namespace

// Whether the only node reading tensor `t` is a ReLU activation.
bool only_reader_is_relu(const dlhost_graph* g, int32_t t) {
  const dlhost_node* reader = nullptr;
  for (int32_t n = 0; n < g->num_nodes; ++n) {
    const dlhost_node& node = *g->nodes[n];
    for (int32_t i = 0; i < node.num_inputs; ++i) {
      if (node.inputs[i] != t) continue;
      if (reader != nullptr) return false;
      reader = &node;
    }
  }
  if (reader == nullptr || reader->op != DLHOST_OP_ACTIVATION || reader->attrs == nullptr)
    return false;
  const auto* a = static_cast<const dlhost_activation_attrs*>(reader->attrs);
  return a->struct_size >= DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE && a->kind == DLHOST_ACTIVATION_RELU;
}

std::unique_ptr<Layer> make_layer(const dlhost_graph* graph, int32_t index) {
  const dlhost_node& node = *graph->nodes[index];
  switch (node.op) {
    case DLHOST_OP_INPUT:
      return std::make_unique<InputLayer>(graph, node);
    case DLHOST_OP_FC:
      return std::make_unique<FcLayer>(graph, node);
    case DLHOST_OP_CONV2D:
      return std::make_unique<ConvLayer>(graph, node);
    case DLHOST_OP_POOL2D:
      return std::make_unique<PoolLayer>(graph, node);
    case DLHOST_OP_ACTIVATION:
      return std::make_unique<ActivationLayer>(graph, node);
    case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
      return std::make_unique<SoftmaxCrossEntropyLayer>(graph, node);
    case DLHOST_OP_MSE_LOSS:
      return std::make_unique<MseLayer>(graph, node);
    case DLHOST_OP_BATCH_NORM:
      return make_batch_norm_layer(graph, node);
    case DLHOST_OP_DROPOUT:
      return make_dropout_layer(graph, node, index);
    case DLHOST_OP_ADD:
      return make_add_layer(graph, node);
    case DLHOST_OP_LRN:
      return make_lrn_layer(graph, node);
    case DLHOST_OP_EMBEDDING:
      return make_embedding_layer(graph, node);
    case DLHOST_OP_LSTM:
      return make_lstm_layer(graph, node);
    case DLHOST_OP_GLOBAL_AVG_POOL:
      return make_global_avg_pool_layer(graph, node);
    case DLHOST_OP_LAYER_NORM:
      return make_layer_norm_layer(graph, node);
    case DLHOST_OP_GELU:
      return make_gelu_layer(graph, node);
    case DLHOST_OP_ATTENTION:
      return make_attention_layer(graph, node, index);
    case DLHOST_OP_POSITION_EMBEDDING:
      return make_position_embedding_layer(graph, node);
    case DLHOST_OP_TIED_FC:
      return make_tied_fc_layer(graph, node);
    default:
      sdk::unimplemented("cpu_onednn: op " + std::to_string(node.op) + " not supported (node " +
                         std::string(node.name != nullptr ? node.name : "?") + ")");
  }
}

}  // namespace dlhost::cpu_onednn
