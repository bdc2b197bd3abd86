// layers_norm.cpp — the ABI 1.1 ops of convolutional networks: batch normalization (with its
// running statistics), local response normalization, dropout (the pinned dlhost_dropout_keep
// mask), element-wise add (residuals) and global average pooling. Each maps onto one oneDNN
// primitive forward and one backward; only the dropout mask and the running statistics are
// plain loops. Layers exist only while a model compiles, as in layers.cpp.
#include <string>
#include <utility>
#include <vector>

#include "dlhost/common.hpp"
#include "layers.h"
#include "model.h"

namespace dlhost::cpu_onednn {

namespace {

using dt = dnnl::memory::data_type;
using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;

// Training-mode batch normalization over N (and H, W) per channel. Scale and shift are [C]
// parameters in plain layout, which is also what oneDNN's use_scale / use_shift flags read.
//
// The fused bnorm+relu (the ReLU the output's only reader, as in every ResNet block but the
// residual's; a batch norm without one stays plain): oneDNN's
// fuse_norm_relu applies the ReLU in the normalization's pass and keeps a bit mask (the
// workspace) from which the backward masks the gradient itself. The ReLU node then takes the
// output's bytes as its own and its backward only hands the gradient over: one pass over the
// tensor less in forward and one in backward. Only where oneDNN keeps the same kernel.
class BatchNormLayer : public NodeLayer, public ReluHead {
 public:
  BatchNormLayer(const dlhost_graph* g, const dlhost_node& n)
      : NodeLayer(g, n),
        a_(node_attrs<dlhost_batch_norm_attrs>(n, DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    expect_params(2);
    if (!(a_.epsilon > 0.0f) || !(a_.momentum >= 0.0f && a_.momentum <= 1.0f))
      bad("epsilon must be > 0 and momentum in [0, 1]");
  }

  void build_forward(Model& m, Steps& steps) override { forward(m, steps, false); }
  std::string build_forward_with_relu(Model& m, Steps& steps) override {
    forward(m, steps, true);
    return fuse_relu_ ? "" : "oneDNN's kernel or layout differs with fuse_norm_relu";
  }
  bool masks_relu_gradient() const override { return true; }

  // With `relu`: fuse_norm_relu where oneDNN keeps the same kernel (fuse_relu_).
  void forward(Model& m, Steps& steps, bool relu) {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (x.dims.size() != 2 && x.dims.size() != 4) bad("input " + dims_str(x.dims));
    if (y.dims != x.dims) bad("output " + dims_str(y.dims) + " differs from input");
    const int64_t channels = x.dims[1];
    const Md vec = plain_md({channels}, dt::f32);
    pd_ = compat::normalization_forward_pd<dnnl::batch_normalization_forward>(
        m.engine(), m.attr(), x.md, x.md, a_.epsilon, flags());
    if (relu) {
      const auto fused = compat::normalization_forward_pd<dnnl::batch_normalization_forward>(
          m.engine(), m.attr(), x.md, x.md, a_.epsilon, flags(true));
      fuse_relu_ = fused && std::string(fused.impl_info_str()) == pd_.impl_info_str() &&
                   fused.dst_desc() == pd_.dst_desc();
      if (fuse_relu_) pd_ = fused;
    }
    m.alloc_param(params_[0], vec, vec);
    m.alloc_param(params_[1], vec, vec);
    m.alloc_tensor(y, pd_.dst_desc());
    mean_ = m.alloc(pd_.mean_desc());
    variance_ = m.alloc(pd_.variance_desc());
    const std::string what = name_ + ": batch normalization forward";
    Args args = {{DNNL_ARG_SRC, x.value},
                 {DNNL_ARG_SCALE, m.param(params_[0]).value},
                 {DNNL_ARG_SHIFT, m.param(params_[1]).value},
                 {DNNL_ARG_DST, y.value},
                 {DNNL_ARG_MEAN, mean_},
                 {DNNL_ARG_VARIANCE, variance_}};
    if (fuse_relu_) {
      workspace_ = m.alloc(pd_.workspace_desc());
      args.push_back({DNNL_ARG_WORKSPACE, workspace_});
    }
    m.add_primitive(steps, what, dnnl::batch_normalization_forward(pd_), pd_, args);
    m.note_implementation(fuse_relu_ ? "bnorm+relu fwd" : "bnorm fwd", pd_.impl_info_str());

    // PyTorch's running statistics: they start at mean 0, variance 1, and take the unbiased
    // batch variance. oneDNN has no such output, so a loop over the channels keeps them.
    const Model::RunningStats stats = m.add_running_stats(name_, channels);
    float* rm = stats.mean;
    float* rv = stats.variance;
    const float* mean = static_cast<const float*>(mean_.get_data_handle());
    const float* var = static_cast<const float*>(variance_.get_data_handle());
    const int64_t count = x.elements / channels;
    const float unbias =
        count > 1 ? static_cast<float>(count) / static_cast<float>(count - 1) : 1.0f;
    const float mom = a_.momentum;
    m.add_function(steps, name_ + ": running statistics",
                   [rm, rv, mean, var, channels, unbias, mom] {
                     for (int64_t c = 0; c < channels; ++c) {
                       rm[c] = (1.0f - mom) * rm[c] + mom * mean[c];
                       rv[c] = (1.0f - mom) * rv[c] + mom * unbias * var[c];
                     }
                   });
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    Tensor& y = m.tensor(output_);
    const std::string what = name_ + ": batch normalization backward";
    const auto pd = compat::normalization_backward_pd<dnnl::batch_normalization_backward>(
        m.engine(), m.attr(), pd_.dst_desc(), pd_.dst_desc(), pd_.src_desc(), a_.epsilon,
        flags(fuse_relu_), pd_);
    memory diff_dst = m.as_layout(m.diff_of(y), pd.diff_dst_desc(), steps, what);
    Steps post;
    // oneDNN computes the data gradient in any case; nobody reads it when nothing upstream
    // learns.
    memory diff_src = x.needs_grad ? m.diff_sink(x, pd.diff_src_desc(), post, what)
                                   : m.scratch(pd.diff_src_desc());
    Args args = {{DNNL_ARG_SRC, x.value},
                 {DNNL_ARG_MEAN, mean_},
                 {DNNL_ARG_VARIANCE, variance_},
                 {DNNL_ARG_DIFF_DST, diff_dst},
                 {DNNL_ARG_SCALE, m.param(params_[0]).value},
                 {DNNL_ARG_DIFF_SRC, diff_src},
                 {DNNL_ARG_DIFF_SCALE, m.param(params_[0]).grad},
                 {DNNL_ARG_DIFF_SHIFT, m.param(params_[1]).grad}};
    // oneDNN 2.6 checks for the shift here too, though backward never reads it; 3.x refuses it.
    if (compat::bnorm_backward_takes_shift)
      args.push_back({DNNL_ARG_SHIFT, m.param(params_[1]).value});
    if (fuse_relu_) args.push_back({DNNL_ARG_WORKSPACE, workspace_});
    m.add_primitive(steps, what, dnnl::batch_normalization_backward(pd), pd, args);
    steps.insert(steps.end(), post.begin(), post.end());
    m.add_ready(steps, params_[0]);
    m.add_ready(steps, params_[1]);
    m.note_implementation("bnorm bwd", pd.impl_info_str());
  }

 private:
  static dnnl::normalization_flags flags(bool relu = false) {
    const auto f = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    return relu ? f | dnnl::normalization_flags::fuse_norm_relu : f;
  }

  dlhost_batch_norm_attrs a_;
  bool fuse_relu_ = false;  // the output's only reader is a ReLU, applied here (class comment)
  dnnl::batch_normalization_forward::primitive_desc pd_;
  memory mean_, variance_;
  memory workspace_;  // fuse_relu_: the ReLU's bit mask, from forward to backward
};

// Inverted dropout: y = x * mask, the mask 1 / (1 - p) or 0 per element. The mask is made in
// plain row-major order, because dlhost_dropout_keep numbers the logical elements, then
// reordered into the input's (possibly blocked) layout; backward multiplies by the same mask.
class DropoutLayer : public NodeLayer {
 public:
  DropoutLayer(const dlhost_graph* g, const dlhost_node& n, int32_t index)
      : NodeLayer(g, n),
        index_(index),
        p_(node_attrs<dlhost_dropout_attrs>(n, DLHOST_DROPOUT_ATTRS_STRUCT_SIZE).probability) {
    expect_inputs(1);
    if (!(p_ >= 0.0f && p_ < 1.0f)) bad("probability must be in [0, 1)");
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (y.dims != x.dims) bad("output " + dims_str(y.dims) + " differs from input");
    const std::string what = name_ + ": dropout";
    memory plain = m.alloc(plain_md(x.dims, dt::f32));
    float* mask = static_cast<float*>(plain.get_data_handle());
    const uint64_t seed = m.seed();
    const uint64_t* step = m.forward_calls();
    const uint32_t node = static_cast<uint32_t>(index_);
    const float p = p_;
    const int64_t n = x.elements;
    m.add_function(steps, what + " mask", [mask, seed, step, node, p, n, plain] {
      fill_dropout_mask(mask, n, seed, node, *step, p);
    });
    mask_ = m.as_layout(plain, x.md, steps, what);
    m.alloc_tensor(y, x.md);
    add_multiply(m, steps, what, x.value, y.value);
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    if (!x.needs_grad) return;
    Tensor& y = m.tensor(output_);
    const std::string what = name_ + ": dropout backward";
    Steps post;
    memory diff_src = m.diff_sink(x, y.md, post, what);
    add_multiply(m, steps, what, m.diff_of(y), diff_src);
    steps.insert(steps.end(), post.begin(), post.end());
  }

 private:
  void add_multiply(Model& m, Steps& steps, const std::string& what, const memory& src,
                    const memory& dst) const {
    const Md md = src.get_desc();
    const auto pd = compat::make_pd<dnnl::binary>(m.engine(), m.attr(), false,
                                                  algorithm::binary_mul, md, md, md);
    m.add_primitive(steps, what, dnnl::binary(pd), pd,
                    {{DNNL_ARG_SRC_0, src}, {DNNL_ARG_SRC_1, mask_}, {DNNL_ARG_DST, dst}});
  }

  int32_t index_;
  float p_;
  memory mask_;  // in the input's layout
};

// Element-wise sum of two tensors of one shape. The output takes the first input's layout;
// backward hands the output gradient to both inputs, adding it where a gradient already
// arrived (x feeds both a residual branch and the add).
class AddLayer : public NodeLayer {
 public:
  AddLayer(const dlhost_graph* g, const dlhost_node& n) : NodeLayer(g, n) { expect_inputs(2); }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& a = activation(m, inputs_[0]);
    Tensor& b = activation(m, inputs_[1]);
    Tensor& y = m.tensor(output_);
    if (a.dims != b.dims || y.dims != a.dims)
      bad("inputs " + dims_str(a.dims) + " and " + dims_str(b.dims) + ", output " +
          dims_str(y.dims));
    const std::string what = name_ + ": add";
    memory first = a.value, second = m.as_layout(b.value, a.md, steps, what);
    // The sum overwrites an input where may_overwrite allows (the residual's last batch norm,
    // as PyTorch's `out += identity`): backward reads neither input. oneDNN's binary works in
    // place on its first source.
    if (may_overwrite(a)) {
      m.write_over(a, y, name_);
    } else if (may_overwrite(b) && b.md == a.md) {
      std::swap(first, second);
      m.write_over(b, y, name_);
    } else {
      m.alloc_tensor(y, a.md);
    }
    const auto pd = compat::make_pd<dnnl::binary>(m.engine(), m.attr(), false,
                                                  algorithm::binary_add, a.md, a.md, a.md);
    m.add_primitive(steps, what, dnnl::binary(pd), pd,
                    {{DNNL_ARG_SRC_0, first}, {DNNL_ARG_SRC_1, second}, {DNNL_ARG_DST, y.value}});
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& y = m.tensor(output_);
    const memory dy = m.diff_of(y);
    // Both inputs' gradients are y's. The first input without a gradient yet takes y's buffer
    // as its own, no copy (a residual block's last batch norm: ResNet-56 b128, 1 thread, one
    // ~1 ms copy per block); the other input's copy or sum is queued here, so it reads y's
    // gradient before any later step writes the handed-over buffer.
    int32_t heir = -1;
    if (inputs_[0] != inputs_[1])
      for (int32_t id : inputs_)
        if (m.pass_diff(y, m.tensor(id))) {
          heir = id;
          break;
        }
    for (int32_t id : inputs_) {
      Tensor& t = m.tensor(id);
      if (!t.needs_grad || id == heir) continue;
      const std::string what = name_ + ": add backward to " + t.name;
      if (t.diff_written && t.md == y.md) {
        const auto pd = compat::make_pd<dnnl::binary>(m.engine(), m.attr(), false,
                                                      algorithm::binary_add, y.md, y.md, y.md);
        m.add_primitive(steps, what, dnnl::binary(pd), pd,
                        {{DNNL_ARG_SRC_0, t.diff}, {DNNL_ARG_SRC_1, dy}, {DNNL_ARG_DST, t.diff}});
        continue;
      }
      Steps post;
      memory sink = m.diff_sink(t, y.md, post, what);
      dnnl::reorder::primitive_desc pd(m.engine(), y.md, m.engine(), y.md, m.attr());
      m.add_primitive(steps, what, dnnl::reorder(pd), pd,
                      {{DNNL_ARG_FROM, dy}, {DNNL_ARG_TO, sink}});
      steps.insert(steps.end(), post.begin(), post.end());
    }
  }
};

// Across-channel LRN. oneDNN's formula divides alpha by the window size exactly as
// dlhost_graph.h does, so alpha passes through unchanged.
class LrnLayer : public NodeLayer {
 public:
  LrnLayer(const dlhost_graph* g, const dlhost_node& n)
      : NodeLayer(g, n), a_(node_attrs<dlhost_lrn_attrs>(n, DLHOST_LRN_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    if (a_.size <= 0 || a_.size % 2 == 0 || !(a_.k > 0.0f) || !(a_.beta > 0.0f) ||
        !(a_.alpha >= 0.0f))
      bad("size must be odd and > 0, k and beta > 0, alpha >= 0");
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (x.dims.size() != 4) bad("input " + dims_str(x.dims) + " is not NCHW");
    if (y.dims != x.dims) bad("output " + dims_str(y.dims) + " differs from input");
    pd_ = compat::lrn_forward_pd(m.engine(), m.attr(), algorithm::lrn_across_channels, x.md, x.md,
                                 a_.size, a_.alpha, a_.beta, a_.k);
    m.alloc_tensor(y, pd_.dst_desc());
    if (pd_.workspace_desc().get_size() > 0) workspace_ = m.alloc(pd_.workspace_desc());
    Args args = {{DNNL_ARG_SRC, x.value}, {DNNL_ARG_DST, y.value}};
    if (workspace_) args.push_back({DNNL_ARG_WORKSPACE, workspace_});
    m.add_primitive(steps, name_ + ": lrn forward", dnnl::lrn_forward(pd_), pd_, args);
    m.note_implementation("lrn fwd", pd_.impl_info_str());
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    if (!x.needs_grad) return;
    Tensor& y = m.tensor(output_);
    const std::string what = name_ + ": lrn backward";
    const auto pd = compat::lrn_backward_pd(m.engine(), m.attr(), algorithm::lrn_across_channels,
                                            pd_.dst_desc(), pd_.dst_desc(), pd_.src_desc(), a_.size,
                                            a_.alpha, a_.beta, a_.k, pd_);
    memory diff_dst = m.as_layout(m.diff_of(y), pd.diff_dst_desc(), steps, what);
    Steps post;
    memory diff_src = m.diff_sink(x, pd.diff_src_desc(), post, what);
    Args args = {
        {DNNL_ARG_SRC, x.value}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}};
    if (workspace_) args.push_back({DNNL_ARG_WORKSPACE, workspace_});
    m.add_primitive(steps, what, dnnl::lrn_backward(pd), pd, args);
    steps.insert(steps.end(), post.begin(), post.end());
  }

 private:
  dlhost_lrn_attrs a_;
  dnnl::lrn_forward::primitive_desc pd_;
  memory workspace_;
};

// [N, C, H, W] -> [N, C]: average pooling with one H x W window. oneDNN writes [N, C, 1, 1],
// which in plain layout is the [N, C] tensor's bytes.
class GlobalAvgPoolLayer : public NodeLayer {
 public:
  GlobalAvgPoolLayer(const dlhost_graph* g, const dlhost_node& n) : NodeLayer(g, n) {
    expect_inputs(1);
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (x.dims.size() != 4) bad("input " + dims_str(x.dims) + " is not NCHW");
    if (y.dims != std::vector<int64_t>{x.dims[0], x.dims[1]})
      bad("output " + dims_str(y.dims) + " for input " + dims_str(x.dims));
    kernel_ = {x.dims[2], x.dims[3]};
    pooled_md_ = plain_md({x.dims[0], x.dims[1], 1, 1}, dt::f32);
    pd_ = compat::pooling_forward_pd(m.engine(), m.attr(), algorithm::pooling_avg_exclude_padding,
                                     x.md, any_md({x.dims[0], x.dims[1], 1, 1}), {1, 1}, kernel_,
                                     {0, 0}, {0, 0});
    m.alloc_tensor(y, plain_md(y.dims, dt::f32));
    const std::string what = name_ + ": global average pooling";
    Steps post;
    memory dst = m.output_as(view(y.value, pooled_md_), pd_.dst_desc(), post, what);
    m.add_primitive(steps, what, dnnl::pooling_forward(pd_), pd_,
                    {{DNNL_ARG_SRC, x.value}, {DNNL_ARG_DST, dst}});
    steps.insert(steps.end(), post.begin(), post.end());
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    if (!x.needs_grad) return;
    Tensor& y = m.tensor(output_);
    const std::string what = name_ + ": global average pooling backward";
    const auto pd = compat::pooling_backward_pd(
        m.engine(), m.attr(), algorithm::pooling_avg_exclude_padding, pd_.src_desc(),
        pd_.dst_desc(), {1, 1}, kernel_, {0, 0}, {0, 0}, pd_);
    memory diff_dst = m.as_layout(view(m.diff_of(y), pooled_md_), pd.diff_dst_desc(), steps, what);
    Steps post;
    memory diff_src = m.diff_sink(x, pd.diff_src_desc(), post, what);
    m.add_primitive(steps, what, dnnl::pooling_backward(pd), pd,
                    {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
    steps.insert(steps.end(), post.begin(), post.end());
  }

 private:
  memory::dims kernel_;
  Md pooled_md_;
  dnnl::pooling_forward::primitive_desc pd_;
};

}  // namespace

std::unique_ptr<Layer> make_batch_norm_layer(const dlhost_graph* graph, const dlhost_node& node) {
  return std::make_unique<BatchNormLayer>(graph, node);
}
std::unique_ptr<Layer> make_dropout_layer(const dlhost_graph* graph, const dlhost_node& node,
                                          int32_t index) {
  return std::make_unique<DropoutLayer>(graph, node, index);
}
std::unique_ptr<Layer> make_add_layer(const dlhost_graph* graph, const dlhost_node& node) {
  return std::make_unique<AddLayer>(graph, node);
}
std::unique_ptr<Layer> make_lrn_layer(const dlhost_graph* graph, const dlhost_node& node) {
  return std::make_unique<LrnLayer>(graph, node);
}
std::unique_ptr<Layer> make_global_avg_pool_layer(const dlhost_graph* graph,
                                                  const dlhost_node& node) {
  return std::make_unique<GlobalAvgPoolLayer>(graph, node);
}

}  // namespace dlhost::cpu_onednn
