// layers.cpp — one class per graph op of ABI 1.0 (input, convolution, pooling, activation, the
// two losses; FC lives in fc_layer.cpp) and make_layer, which dispatches every op: checks the node
// against the graph's resolved shapes, creates its oneDNN primitives (forward, backward data,
// backward weights) once, and appends their steps. The two losses have no oneDNN primitive and are
// short loops over plain buffers. The ABI 1.1 ops live in layers_norm.cpp and layers_seq.cpp.
// Layers exist only while a model compiles; the steps they leave keep what they point to alive.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dlhost/common.hpp"
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

class ConvLayer : public WeightedLayer, public ReluHead {
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
  }

  void build_forward(Model& m, Steps& steps) override { forward(m, steps, false); }

  // The fused conv+relu: the ReLU as a post-op of the convolution spares the activation's pass
  // over the output (AlexNet-R's conv2 at batch 1024: 2.8 ms a step, 1 thread). The output then
  // holds the ReLU's values, which the ReLU's node takes over as its own, as its in-place form
  // does; its backward (it reads only those) stays. Only where oneDNN keeps the same kernel and
  // layouts with the post-op.
  std::string build_forward_with_relu(Model& m, Steps& steps) override {
    return forward(m, steps, true);
  }
  bool masks_relu_gradient() const override { return false; }

  // The forward, with the ReLU post-op tried where `relu`: "" where it is kept, else why not.
  std::string forward(Model& m, Steps& steps, bool relu) {
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
    std::string why_not;
    if (relu) {  // build_forward_with_relu
      auto fused = choose_forward_pd(m, x, y, true);
      const bool same = fused && std::string(fused.impl_info_str()) == pd_.impl_info_str() &&
                        fused.src_desc() == pd_.src_desc() && fused.dst_desc() == pd_.dst_desc();
      if (same)
        pd_ = fused;
      else
        why_not = "oneDNN's kernel or layouts differ with the ReLU post-op";
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
    m.add_primitive(steps, what, dnnl::convolution_forward(pd_), pd_, forward_args(m, y.value));
    m.note_implementation("conv fwd", pd_.impl_info_str());
    return why_not;
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
  dt pt_ = dt::f32;  // what the products read: bf16 in precision bf16
  std::vector<int64_t> wdims_, xdims_, ydims_;
  memory::dims strides_, dilates_, pad_;
  dnnl::convolution_forward::primitive_desc pd_;
};

class PoolLayer : public NodeLayer, public ReluMaskingPool {
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

  void build_backward(Model& m, Steps& steps) override { backward(m, steps, nullptr); }

  // The fused relu+maxpool backward: a window's gradient goes to its maximum, which the ReLU
  // passes exactly when the window's output is positive. So the ReLU's backward is a mask of the
  // pooled gradient by (output > 0), in place, followed by the pool's backward straight into the
  // ReLU input's gradient: the same values, from a pass over the pooled tensor instead of the
  // ReLU's (AlexNet-R's relu2 -> pool2 at batch 1024: a quarter of the bytes, ~7 ms a step at 1
  // thread). Needs the output's bytes kept.
  std::string build_backward_through_relu(Model& m, Steps& steps, Tensor& relu_input) override {
    return backward(m, steps, &relu_input);
  }

 private:
  // The backward, through the ReLU of input `relu_input` where one is given and relu_mask_gap
  // finds nothing missing: "" then, else why not.
  std::string backward(Model& m, Steps& steps, Tensor* relu_input) {
    Tensor& x = m.tensor(inputs_[0]);
    if (!x.needs_grad) return "no gradient flows there";
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
    const std::string why_not =
        relu_input != nullptr ? relu_mask_gap(m, y, diff_dst) : "no ReLU before it";
    Tensor* relu_in = why_not.empty() ? relu_input : nullptr;
    if (relu_in != nullptr) {
      const algorithm relu = algorithm::eltwise_relu_use_dst_for_bwd;
      const auto hint =
          compat::eltwise_forward_pd(m.engine(), m.attr(), relu, y.md, y.md, 0.0f, 0.0f);
      const auto mask = compat::eltwise_backward_pd(m.engine(), m.attr(), relu, y.md, y.md, y.md,
                                                    0.0f, 0.0f, hint);
      m.add_primitive(
          steps, what + ": ReLU mask", dnnl::eltwise_backward(mask), mask,
          {{DNNL_ARG_DST, y.value}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_dst}});
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
    return why_not;
  }

  // What the backward through the ReLU (build_backward_through_relu) needs and lacks here, or
  // "": oneDNN's max pool with its workspace, the gradient in the output's layout, and y's
  // bytes still y's at backward time (not lent to gradients, not overwritten in place by a
  // successor such as a sigmoid, whose output has another sign). As lending works now,
  // value_kept already fails for an overwritten y (the successor's bytes are lent after its
  // backward, before this one); the overwritten_by check keeps the mask right without resting
  // on that order.
  std::string relu_mask_gap(const Model& m, const Tensor& y, const memory& diff_dst) const {
    if (alg_ != algorithm::pooling_max || !workspace_) return "the pool keeps no oneDNN workspace";
    if (!(y.md == diff_dst.get_desc())) return "the gradient is in another layout";
    if (!y.overwritten_by.empty() || !m.value_kept(y))
      return "the pool's output bytes are not kept for backward";
    return "";
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
    add_eltwise_forward(m, steps, alg_, name_, x, y);
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    if (!x.needs_grad) return;
    add_eltwise_backward(m, steps, alg_, name_, x, m.tensor(output_));
  }

 private:
  algorithm alg_ = algorithm::eltwise_relu_use_dst_for_bwd;
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
class SoftmaxCrossEntropyLayer : public NodeLayer, public LossGradientInForward {
 public:
  SoftmaxCrossEntropyLayer(const dlhost_graph* g, const dlhost_node& n) : NodeLayer(g, n) {
    expect_inputs(2);
  }

  // The fused node "xent gradient in forward" (and "xent column sums -> fc bias"): see the
  // class comment.
  void offer_gradient_in_forward() override { gradient_in_forward_offered_ = true; }
  std::string gradient_in_forward_declined() const override { return why_not_fused_; }
  const float* column_sums() const override {
    return sums_handed_ ? static_cast<const float*>(sums_.get_data_handle()) : nullptr;
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
    fused_ = gradient_in_forward(x);
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
      sums_handed_ = true;  // column_sums(): the producer's bias gradient may be these sums
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
  // The gradient in forward, where offered (under fused_step) and it can be done: only where
  // the logits need a gradient, have no other reader and are in the plain layout the gradient
  // is written in. Else why_not_fused_ says why not.
  bool gradient_in_forward(const Tensor& x) {
    if (!gradient_in_forward_offered_) return false;
    why_not_fused_ = !x.needs_grad       ? "the logits need no gradient"
                     : x.consumers != 1  ? "the logits have another reader"
                     : !(x.md == plain_) ? "the logits are not in plain layout"
                                         : "";
    return why_not_fused_.empty();
  }

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
  bool gradient_in_forward_offered_ = false;
  std::string why_not_fused_ = "not offered";
  bool sums_handed_ = false;  // build_backward made grad_ the logits' gradient
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

void add_eltwise_forward(Model& m, Steps& steps, algorithm alg, const std::string& node, Tensor& x,
                         Tensor& y) {
  const auto pd = compat::eltwise_forward_pd(m.engine(), m.attr(), alg, x.md, x.md, 0.0f, 0.0f);
  // In place (PyTorch's ReLU(inplace=True)) where may_overwrite allows: backward needs only
  // the output. A ResNet-50 at batch 16 keeps ~0.6 GB less.
  if (may_overwrite(x) && pd.dst_desc() == x.md) {
    m.write_over(x, y, node);
  } else {
    m.alloc_tensor(y, pd.dst_desc());
  }
  m.add_primitive(steps, node + ": eltwise forward", dnnl::eltwise_forward(pd), pd,
                  {{DNNL_ARG_SRC, x.value}, {DNNL_ARG_DST, y.value}});
}

void add_eltwise_backward(Model& m, Steps& steps, algorithm alg, const std::string& node, Tensor& x,
                          Tensor& y) {
  const std::string what = node + ": eltwise backward";
  // The forward's descriptor as the hint: y has x's layout (the forward wrote it so).
  const auto hint = compat::eltwise_forward_pd(m.engine(), m.attr(), alg, y.md, y.md, 0.0f, 0.0f);
  const auto pd =
      compat::eltwise_backward_pd(m.engine(), m.attr(), alg, y.md, y.md, y.md, 0.0f, 0.0f, hint);
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

std::unique_ptr<Layer> make_layer(const dlhost_graph* graph, int32_t index) {
  const dlhost_node& node = *graph->nodes[index];
  switch (node.op) {
    case DLHOST_OP_INPUT:
      return std::make_unique<InputLayer>(graph, node);
    case DLHOST_OP_FC:
      return make_fc_layer(graph, node);
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
