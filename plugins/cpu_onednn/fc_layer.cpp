// fc_layer.cpp — the FC (inner product) node of cpu_onednn and its strategies, one class each:
// BlockedInnerProduct (oneDNN's inner product in the layouts it picks), Gemm (a matmul forward,
// dnnl_sgemm gradients), GemmWithSgd (Gemm whose weight-gradient GEMM applies SGD: the fusion
// plan's "fc backward+sgd", where its fused layer offers it) and Bf16Matmul (precision bf16).
// FcLayer checks the node, gathers the facts and lets choose_fc_strategy (fusion_plan.h) choose;
// the strategy makes the primitives. Layers exist only while a model compiles, as in layers.cpp.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/common.hpp"
#include "fusion_plan.h"  // choose_fc_strategy
#include "layers.h"
#include "model.h"

namespace dlhost::cpu_onednn {

namespace {

namespace sdk = dlhost::sdk;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dnnl::memory;
using dnnl::prop_kind;

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

// An FC over a plain source of many rows (the per-step decoder of the language models, FCN-R's
// batch of 1024) is three plain GEMMs (Gemm): the forward a matmul primitive with the bias fused,
// the two gradients dnnl_sgemm calls. There oneDNN 2.6's inner-product backward kernels
// (brgemm_bwd_w/bwd_d on AVX-512) took 1.3-1.7x the time of dnnl_sgemm for the same product
// (the LSTM decoder's [4096 x 256] x [256 x 10000]: 2.2 s against 1.35 s under the same
// load), and plain weights are the canonical layout, so no reorder is ever needed. With few
// rows (FCN-5's batch of 64) at 1 thread the blocked inner product's forward is the faster
// one, and the whole FCN-5 step measured 1.08-1.12x slower on this path, so those keep it
// (kFcGemmMinRows). At 2 threads the blocked inner product at 64 rows does not scale: the quiet
// run of 2026-12-03 (bench/results/2026-12-03-quiet) had FCN-8's step at 430 ms against 270 ms
// for its GEMMs bare as dnnl_sgemm (FCN-5: 265 against 220), so with more than one thread every
// plain FC takes this path there: see blocked_scales. With fused SGD (offer_sgd)
// every plain FC takes it, as only dnnl_sgemm's beta lets the step go into the gradient's
// product (the inner product's backward has no post-ops): measured on the Intel Xeon with AMX,
// 1 thread, 3 alternating rounds (2026-12-06, issue 29), the whole step took 0.94x the blocked
// path's time for FCN-5, 0.97x for FCN-8, 0.95x for AlexNet at batch 16, 0.87x for the
// AutoEncoder, 1.00x for LeNet; at 2 threads (the best of 3 runs, a shared machine) 0.89-0.92x
// for FCN-5 and FCN-8, 0.92x for the AutoEncoder. The rule itself is choose_fc_strategy.
//
// Whether the blocked inner product over few rows scales to 2+ threads on this CPU. Measured
// quiet, whole steps at 2 threads: on AMD EPYC (oneDNN dispatching avx512_core_bf16; the run
// above, then bench/results/2026-12-03-quiet-after) it did not: the GEMM path took 0.71x its
// time for FCN-8. On an Intel Xeon with AMX (avx512_core_amx) it did: the blocked path took
// 0.88x the GEMM path's time for FCN-5 and FCN-8, 0.92x for the AutoEncoder, 0.99x for
// AlexNet at batch 16 (3 alternating rounds, 2026-12-04, issue 14's note). oneDNN's ISA is the
// one proxy at hand for that difference; machines not measured keep the GEMM path.
bool blocked_scales() { return dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx; }

// Row-major C [m, n] = op(A) x op(B), overwriting C.
void gemm(const std::string& name, char transa, char transb, int64_t m, int64_t n, int64_t k,
          const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  sgemm(name, transa, transb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

// The FC node: checks it, gathers the facts of choose_fc_strategy and hands the primitives to
// the strategy chosen. The strategies are nested classes so that they share the node's state
// (WeightedLayer's: parameters, the forward source, the flattened view) without a copy of it.
// A fused layer (fused_layers.cpp) may offer SGD in the backward and hand it the loss's column
// sums as the bias gradient (FcGradients, layers.h).
class FcLayer : public WeightedLayer, public FcGradients {
 public:
  FcLayer(const dlhost_graph* g, const dlhost_node& n)
      : WeightedLayer(g, n, fc_attrs(n).has_bias != 0), a_(fc_attrs(n)) {
    expect_inputs(1);
    if (a_.batch_dims != 1 && a_.batch_dims != 2)
      sdk::unimplemented("cpu_onednn: op FC / attribute batch_dims=" +
                         std::to_string(a_.batch_dims) + " not supported (node " + name_ + ")");
  }

  void build_forward(Model& m, Steps& steps) override;
  ~FcLayer() override;
  void build_backward(Model& m, Steps& steps) override;

  void offer_sgd() override { sgd_offered_ = true; }
  std::string gemm_declined() const override { return gemm_declined_; }
  void take_bias_gradient(const float* sums) override { bias_sums_ = sums; }

 private:
  class Strategy;
  class BlockedInnerProduct;
  class Gemm;
  class GemmWithSgd;
  class Bf16Matmul;

  dlhost_fc_attrs a_;
  std::vector<int64_t> wdims_;  // the weight's dims as the forward reads them
  std::unique_ptr<Strategy> strategy_;
  bool sgd_offered_ = false;
  std::string gemm_declined_;         // after build_forward: why the strategy is not Gemm
  const float* bias_sums_ = nullptr;  // take_bias_gradient's
};

class FcLayer::Strategy {
 public:
  explicit Strategy(FcLayer& fc) : fc_(fc) {}
  virtual ~Strategy() = default;
  // `src`: x's value as the product reads it (a plain [rows, features] view for a per-time-step
  // FC), described by `src_md`; `dst_md` the output's descriptor the blocked path asks for.
  virtual void build_forward(Model& m, Steps& steps, Tensor& x, Tensor& y, const memory& src,
                             const Md& src_md, const Md& dst_md) = 0;
  virtual void build_backward(Model& m, Steps& steps) = 0;

 protected:
  FcLayer& fc_;
};

// oneDNN's inner product, in the layouts it picks (blocked weights).
class FcLayer::BlockedInnerProduct final : public FcLayer::Strategy {
 public:
  using Strategy::Strategy;

  void build_forward(Model& m, Steps& steps, Tensor&, Tensor& y, const memory& src,
                     const Md& src_md, const Md& dst_md) override {
    const std::string what = fc_.name_ + ": inner product forward";
    pd_ = forward_pd(m, src_md, any_md(fc_.wdims_), dst_md);
    agree_on_weights(m, src_md, dst_md);
    fc_.src_ = m.as_layout(src, pd_.src_desc(), steps, what);
    m.alloc_param(fc_.weight_, pd_.weights_desc(), plain_md(fc_.wdims_, dt::f32));
    if (fc_.bias_ >= 0)
      m.alloc_param(fc_.bias_, pd_.bias_desc(), plain_md({fc_.a_.out_features}, dt::f32));
    memory dst;
    if (fc_.flat_) {
      m.alloc_tensor(y, plain_md(y.dims, dt::f32));
      dst = view(y.value, fc_.flat_dst_md_);
    } else {
      m.alloc_tensor(y, pd_.dst_desc());
      dst = y.value;
    }
    m.add_primitive(steps, what, dnnl::inner_product_forward(pd_), pd_, fc_.forward_args(m, dst));
    m.note_implementation("ip fwd", pd_.impl_info_str());
  }

  void build_backward(Model& m, Steps& steps) override {
    // The weight gradient in the weights' own layout spares a per-step reorder of it (a 150 MB
    // one for AlexNet's fc6); `any` only where oneDNN has no fast kernel for that layout.
    auto wpd = weights_pd(m, pd_.weights_desc(), true);
    if (!fast(wpd)) wpd = weights_pd(m, any_md(fc_.wdims_), false);
    fc_.add_backward_weights<decltype(wpd), dnnl::inner_product_backward_weights>(m, steps, wpd,
                                                                                  "ip");
    if (!m.tensor(fc_.inputs_[0]).needs_grad) return;
    // Asking for the forward's weight layout first spares a per-step reorder of the weights
    // (150 MB for a large FC); oneDNN picks another layout only when that one has no fast kernel.
    auto dpd = compat::make_bwd_pd<dnnl::inner_product_backward_data>(
        m.engine(), m.attr(), pd_, /*allow_empty=*/true, pd_.src_desc(), pd_.weights_desc(),
        pd_.dst_desc());
    if (!fast(dpd))
      dpd = compat::make_bwd_pd<dnnl::inner_product_backward_data>(
          m.engine(), m.attr(), pd_, false, pd_.src_desc(), any_md(fc_.wdims_), pd_.dst_desc());
    fc_.add_backward_data<decltype(dpd), dnnl::inner_product_backward_data>(m, steps, dpd, "ip");
  }

 private:
  dnnl::inner_product_forward::primitive_desc forward_pd(Model& m, const Md& src, const Md& weights,
                                                         const Md& dst, bool allow_empty = false) {
    using P = dnnl::inner_product_forward;
    return fc_.bias_ >= 0
               ? compat::make_pd<P>(m.engine(), m.attr(), allow_empty, prop_kind::forward_training,
                                    src, weights, any_md({fc_.a_.out_features}), dst)
               : compat::make_pd<P>(m.engine(), m.attr(), allow_empty, prop_kind::forward_training,
                                    src, weights, dst);
  }
  dnnl::inner_product_backward_weights::primitive_desc weights_pd(Model& m, const Md& weights,
                                                                  bool allow_empty) {
    using P = dnnl::inner_product_backward_weights;
    return fc_.bias_ >= 0
               ? compat::make_bwd_pd<P>(m.engine(), m.attr(), pd_, allow_empty, pd_.src_desc(),
                                        weights, any_md({fc_.a_.out_features}), pd_.dst_desc())
               : compat::make_bwd_pd<P>(m.engine(), m.attr(), pd_, allow_empty, pd_.src_desc(),
                                        weights, pd_.dst_desc());
  }
  // oneDNN picks the forward's and the weight gradient's layouts independently (AlexNet's fc6:
  // BcdA8b4096a and aBcd8b), and a gradient in another layout than its weights costs a reorder
  // every step. When they differ, the forward is asked for the gradient's layout; it keeps its
  // own choice where that has no fast forward kernel.
  void agree_on_weights(Model& m, const Md& src_md, const Md& dst_md) {
    if (fast(weights_pd(m, pd_.weights_desc(), true))) return;
    const Md wanted = weights_pd(m, any_md(fc_.wdims_), false).diff_weights_desc();
    auto candidate = forward_pd(m, src_md, wanted, dst_md, true);
    if (fast(candidate) && candidate.src_desc() == pd_.src_desc()) pd_ = candidate;
  }

  dnnl::inner_product_forward::primitive_desc pd_;
};

// Three plain GEMMs (the comment above FcLayer): Y = X W^T (+ b) as a matmul primitive with the
// bias fused, dW = dY^T X and db = dY^T x ones, dX = dY W as dnnl_sgemm calls.
class FcLayer::Gemm : public FcLayer::Strategy {
 public:
  using Strategy::Strategy;

  void build_forward(Model& m, Steps& steps, Tensor& x, Tensor& y, const memory& src, const Md&,
                     const Md&) override {
    setup(m, x, y, src);
    const int64_t out = fc_.a_.out_features;
    const Md src_md = plain_md({rows_, features_}, dt::f32);
    const Md dst_md = plain_md({rows_, out}, dt::f32);
    // The parameter is [out, features] row-major; matmul reads it as its transpose [features,
    // out] (tag ba) without moving a byte.
    const Md weights_md = Md({features_, out}, dt::f32, tag::ba);
    const Md bias_md = plain_md({1, out}, dt::f32);
    const auto pd = fc_.bias_ >= 0
                        ? compat::make_pd<dnnl::matmul>(m.engine(), m.attr(), false, src_md,
                                                        weights_md, bias_md, dst_md)
                        : compat::make_pd<dnnl::matmul>(m.engine(), m.attr(), false, src_md,
                                                        weights_md, dst_md);
    Args args = {{DNNL_ARG_SRC, fc_.src_},
                 {DNNL_ARG_WEIGHTS, view(m.param(fc_.weight_).value, weights_md)},
                 {DNNL_ARG_DST, view(y.value, dst_md)}};
    if (fc_.bias_ >= 0) args.push_back({DNNL_ARG_BIAS, view(m.param(fc_.bias_).value, bias_md)});
    m.add_primitive(steps, fc_.name_ + ": matmul forward", dnnl::matmul(pd), pd, args);
    m.note_implementation("matmul fwd", pd.impl_info_str());
  }

  void build_backward(Model& m, Steps& steps) override {
    const std::string what = fc_.name_ + ": gemm backward";
    const float* dy = output_gradient(m);
    add_weight_gradient(m, steps, what, dy, /*sgd=*/false);
    m.add_ready(steps, fc_.weight_);
    if (fc_.bias_ >= 0) m.add_ready(steps, fc_.bias_);
    add_data_gradient(m, steps, what, dy);
  }

 protected:
  // The parameters and the output in plain layout; the source as a [rows, features] view.
  void setup(Model& m, Tensor& x, Tensor& y, const memory& src) {
    rows_ = x.dims[0] * (fc_.flat_ ? x.dims[1] : 1);
    features_ = x.elements / rows_;
    const int64_t out = fc_.a_.out_features;
    // [out, features] row-major, whatever the rank of the canonical dims.
    m.alloc_param(fc_.weight_, plain_md(fc_.wdims_, dt::f32), plain_md(fc_.wdims_, dt::f32));
    if (fc_.bias_ >= 0)
      m.alloc_param(fc_.bias_, plain_md({out}, dt::f32), plain_md({out}, dt::f32));
    m.alloc_tensor(y, plain_md(y.dims, dt::f32));
    fc_.src_ = view(src, plain_md({rows_, features_}, dt::f32));
  }

  const float* output_gradient(Model& m) const {
    return static_cast<const float*>(m.diff_of(m.tensor(fc_.output_)).get_data_handle());
  }

  // dW [out, features] = dY^T [out, rows] x X [rows, features]; db = the column sums of dY,
  // dY^T x ones [rows], as one more dnnl_sgemm: the language models' decoder (dY [4096 x
  // 10000]) took 2.5x its time with a loop of column blocks (1 thread, 25 against 10 ms). The
  // order of the sums is then sgemm's: fixed for a thread count, as the GEMMs' own are.
  // With `sgd` (GemmWithSgd) C = alpha dY^T X + beta C goes into the parameter itself, never
  // into its gradient: with momentum 0, W <- (1 - lr wd) W - lr dY^T X (update()'s
  // w -= lr (g + wd w), one pass over W instead of two); with momentum mu, v <- mu v + dY^T X,
  // and update() adds wd w and steps W. This spares the update's read of a gradient as large
  // as the weights (FCN-5: 472 MB of its 85.8 ms update at 1 thread).
  // Where a fused layer handed this bias the softmax loss's column sums (take_bias_gradient),
  // db is those sums, made by the loss in forward, instead of a pass over dY.
  void add_weight_gradient(Model& m, Steps& steps, const std::string& what, const float* dy,
                           bool sgd) {
    const int64_t rows = rows_, features = features_, out = fc_.a_.out_features;
    const float* x = static_cast<const float*>(fc_.src_.get_data_handle());
    float alpha = 1.0f, beta = 0.0f;
    float* dw = static_cast<float*>(m.param(fc_.weight_).grad.get_data_handle());
    float* db =
        fc_.bias_ >= 0 ? static_cast<float*>(m.param(fc_.bias_).grad.get_data_handle()) : nullptr;
    if (sgd) {
      const dlhost_optimizer_desc& o = m.optimizer();
      const bool momentum = o.momentum != 0.0f;
      alpha = momentum ? 1.0f : -o.learning_rate;
      beta = momentum ? o.momentum : 1.0f - o.learning_rate * o.weight_decay;
      auto target = [&](int32_t id) {
        Param& p = m.param(id);
        return static_cast<float*>((momentum ? p.velocity : p.value).get_data_handle());
      };
      dw = target(fc_.weight_);
      if (db != nullptr) db = target(fc_.bias_);
    }
    const float* ones = nullptr;
    if (db != nullptr) {
      fc_.ones_ = m.alloc(plain_md({rows}, dt::f32));
      float* o = static_cast<float*>(fc_.ones_.get_data_handle());
      std::fill(o, o + rows, 1.0f);
      ones = o;
    }
    const float* dy_sums = fc_.bias_sums_;
    m.add_function(steps, what + (sgd ? " weights, sgd" : " weights"), [=, name = fc_.name_] {
      sgemm(name, 'T', 'N', out, features, rows, alpha, dy, out, x, features, beta, dw, features);
      if (db == nullptr) return;
      if (dy_sums == nullptr) {
        sgemm(name, 'T', 'N', out, 1, rows, alpha, dy, out, ones, 1, beta, db, 1);
      } else if (sgd) {
        for (int64_t j = 0; j < out; ++j) db[j] = beta * db[j] + alpha * dy_sums[j];
      } else {
        std::copy(dy_sums, dy_sums + out, db);
      }
    });
    m.note_implementation(sgd ? "gemm bwd + sgd" : "gemm bwd", "dnnl_sgemm");
  }

  // dX [rows, features] = dY [rows, out] x W [out, features], when something upstream learns.
  void add_data_gradient(Model& m, Steps& steps, const std::string& what, const float* dy) {
    Tensor& in = m.tensor(fc_.inputs_[0]);
    if (!in.needs_grad) return;
    const int64_t rows = rows_, features = features_, out = fc_.a_.out_features;
    Steps post;
    const float* w = static_cast<const float*>(m.param(fc_.weight_).value.get_data_handle());
    float* dx = static_cast<float*>(
        m.diff_sink(in, plain_md(in.dims, dt::f32), post, what + " data").get_data_handle());
    m.add_function(steps, what + " data", [=, name = fc_.name_] {
      gemm(name, 'N', 'N', rows, features, out, dy, out, w, features, dx, features);
    });
    steps.insert(steps.end(), post.begin(), post.end());
  }

  int64_t rows_ = 0, features_ = 0;
};

// Gemm whose weight-gradient GEMM applies SGD (offer_sgd; Gemm's comment): the data gradient
// reads W, so it goes first, before the step changes W. No gradient is announced:
// under fused_step the host reads none.
class FcLayer::GemmWithSgd final : public FcLayer::Gemm {
 public:
  using Gemm::Gemm;
  void build_backward(Model& m, Steps& steps) override {
    const std::string what = fc_.name_ + ": gemm backward";
    const float* dy = output_gradient(m);
    add_data_gradient(m, steps, what, dy);
    add_weight_gradient(m, steps, what, dy, /*sgd=*/true);
  }
};

// Precision bf16: every FC. Y = X W^T (+ b) on bf16 copies of X and W (the master weights stay
// fp32; W's copy is made every step, as the update changes W), fp32 out; both copies are kept
// for backward. dW = dY^T X and dX = dY W as matmuls on bf16 copies (dY's made there), fp32 out;
// db = dY^T x ones stays an fp32 dnnl_sgemm (a column sum).
class FcLayer::Bf16Matmul final : public FcLayer::Gemm {
 public:
  using Gemm::Gemm;

  void build_forward(Model& m, Steps& steps, Tensor& x, Tensor& y, const memory& src, const Md&,
                     const Md&) override {
    setup(m, x, y, src);
    const std::string what = fc_.name_ + ": matmul forward";
    const int64_t out = fc_.a_.out_features;
    src_low_ = m.product_operand(fc_.src_, steps, what);
    fc_.weights_low_ = m.product_operand(
        view(m.param(fc_.weight_).value, plain_md({out, features_}, dt::f32)), steps, what);
    Args args = {
        {DNNL_ARG_SRC, src_low_},
        {DNNL_ARG_WEIGHTS, view(fc_.weights_low_, Md({features_, out}, dt::bf16, tag::ba))},
        {DNNL_ARG_DST, view(y.value, plain_md({rows_, out}, dt::f32))}};
    if (fc_.bias_ >= 0)
      args.push_back({DNNL_ARG_BIAS, view(m.param(fc_.bias_).value, plain_md({1, out}, dt::f32))});
    add_matmul(m, steps, what, m.attr(), args, "matmul fwd bf16");
  }

  void build_backward(Model& m, Steps& steps) override {
    const std::string what = fc_.name_ + ": gemm backward";
    const int64_t rows = rows_, out = fc_.a_.out_features;
    const memory dy = view(m.diff_of(m.tensor(fc_.output_)), plain_md({rows, out}, dt::f32));
    const memory dy_low = m.product_operand(dy, steps, what);
    add_matmul(
        m, steps, what + " weights", m.attr(),
        {{DNNL_ARG_SRC, view(dy_low, Md({out, rows}, dt::bf16, tag::ba))},
         {DNNL_ARG_WEIGHTS, src_low_},
         {DNNL_ARG_DST, view(m.param(fc_.weight_).grad, plain_md({out, features_}, dt::f32))}},
        "matmul bwd_w bf16");
    if (fc_.bias_ >= 0) {
      const float* d = static_cast<const float*>(dy.get_data_handle());
      float* db = static_cast<float*>(m.param(fc_.bias_).grad.get_data_handle());
      fc_.ones_ = m.alloc(plain_md({rows}, dt::f32));
      float* ones = static_cast<float*>(fc_.ones_.get_data_handle());
      std::fill(ones, ones + rows, 1.0f);
      m.add_function(steps, what + " bias", [=, name = fc_.name_] {
        gemm(name, 'T', 'N', out, 1, rows, d, out, ones, 1, db, 1);
      });
    }
    m.add_ready(steps, fc_.weight_);
    if (fc_.bias_ >= 0) m.add_ready(steps, fc_.bias_);
    Tensor& in = m.tensor(fc_.inputs_[0]);
    if (in.needs_grad)
      add_bf16_data_gradient(m, steps, in, dy_low, fc_.weights_low_, what + " data",
                             "matmul bwd_d bf16");
  }

 private:
  memory src_low_;  // the forward's bf16 copy of X (W's: fc_.weights_low_)
};

FcLayer::~FcLayer() = default;

void FcLayer::build_backward(Model& m, Steps& steps) { strategy_->build_backward(m, steps); }

void FcLayer::build_forward(Model& m, Steps& steps) {
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
  FcFacts facts;
  facts.bf16 = m.bf16();
  facts.plain_source = flat_ || x.md == plain_md(x.dims, dt::f32);
  facts.rows = x.dims[0] * (flat_ ? x.dims[1] : 1);
  facts.threads = m.threads();
  facts.blocked_scales = blocked_scales();
  facts.sgd_in_backward = sgd_offered_;
  const FcStrategyKind kind = choose_fc_strategy(facts);
  m.plan().record_fc_strategy(index_, kind);
  if (kind == FcStrategyKind::kBf16Matmul) {
    // A blocked source (after a convolution) is first reordered to plain; its gradient goes
    // back through diff_sink.
    if (!facts.plain_source) src = m.as_layout(x.value, plain_md(x.dims, dt::f32), steps, what);
    strategy_ = std::make_unique<Bf16Matmul>(*this);
  } else if (kind == FcStrategyKind::kGemm && sgd_offered_) {
    strategy_ = std::make_unique<GemmWithSgd>(*this);
  } else if (kind == FcStrategyKind::kGemm) {
    strategy_ = std::make_unique<Gemm>(*this);
  } else {
    strategy_ = std::make_unique<BlockedInnerProduct>(*this);
  }
  if (kind != FcStrategyKind::kGemm)
    gemm_declined_ = std::string("the ") + fc_strategy_name(kind) +
                     (facts.plain_source ? "" : " (the source is not plain)") +
                     " makes its own gradients";
  strategy_->build_forward(m, steps, x, y, src, src_md, dst_md);
}

}  // namespace

std::unique_ptr<Layer> make_fc_layer(const dlhost_graph* graph, const dlhost_node& node) {
  return std::make_unique<FcLayer>(graph, node);
}

}  // namespace dlhost::cpu_onednn
