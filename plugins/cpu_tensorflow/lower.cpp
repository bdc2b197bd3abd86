// lower.cpp — see lower.h. Each host op becomes the TensorFlow ops a Keras layer emits on CPU:
// Conv2D (DepthwiseConv2dNative when every group is one channel) + BiasAdd, MaxPool/AvgPool,
// MatMul + BiasAdd, Relu/Sigmoid/Tanh, FusedBatchNormV3 in training mode, LRN, GatherV2, Mean,
// AddV2, ABI 1.4's Transformer ops composed as Keras and tf.nn compose them (layer norm, GELU,
// BatchMatMulV2 + Softmax attention, GatherV2 positions, MatMul on the embedding's table), and
// an LSTM unrolled over time into MatMul/Split/Sigmoid/Tanh (Keras's CPU LSTM runs the
// same cell in a while loop; TF_AddGradients has no gradient for loops or BlockLSTM). Images
// are NHWC: the input is transposed once at set_input, the parameters at read/write_param.
//
// The backward is TF_AddGradients from the loss, except at SparseSoftmaxCrossEntropyWithLogits,
// whose C++ gradient is not registered: its own `backprop` output (softmax - one_hot) divided by
// the number of positions seeds TF_AddGradients at the logits, which is what the Python gradient
// of that op computes.
#include "lower.h"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "dlhost/common.hpp"
#include "dlhost/graph_access.hpp"
#include "dlhost/op_visitor.hpp"

namespace dlhost::cpu_tensorflow {

using tf::Op;

// --- layouts ----------------------------------------------------------------------------------

namespace {

// dst = transpose(src viewed as `view`, perm): dst axis k walks src axis perm[k].
void transpose(const float* src, float* dst, const std::vector<int64_t>& view,
               const std::vector<int>& perm) {
  const size_t rank = view.size();
  std::vector<int64_t> stride(rank, 1), dims(rank), step(rank), idx(rank, 0);
  for (size_t k = rank - 1; k-- > 0;) stride[k] = stride[k + 1] * view[k + 1];
  for (size_t k = 0; k < rank; ++k) {
    dims[k] = view[size_t(perm[k])];
    step[k] = stride[size_t(perm[k])];
  }
  const int64_t n = tf::elements(view);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = src[offset];
    for (size_t k = rank; k-- > 0;) {  // odometer over dst's index
      offset += step[k];
      if (++idx[k] < dims[k]) break;
      offset -= step[k] * dims[k];
      idx[k] = 0;
    }
  }
}

std::vector<int> inverse(const std::vector<int>& perm) {
  std::vector<int> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[size_t(perm[k])] = int(k);
  return inv;
}

}  // namespace

void Layout::to_tf(const float* canonical, float* tf) const {
  if (identity()) {
    std::copy(canonical, canonical + tf::elements(view), tf);
    return;
  }
  transpose(canonical, tf, view, perm);
}

void Layout::to_canonical(const float* tf, float* canonical) const {
  if (identity()) {
    std::copy(tf, tf + tf::elements(view), canonical);
    return;
  }
  std::vector<int64_t> tf_view(view.size());
  for (size_t k = 0; k < view.size(); ++k) tf_view[k] = view[size_t(perm[k])];
  transpose(tf, canonical, tf_view, inverse(perm));
}

// --- constants --------------------------------------------------------------------------------

TF_Output scalar_const(TF_Graph* g, const std::string& name, float v) {
  tf::TensorPtr t = tf::float_tensor({});
  *static_cast<float*>(TF_TensorData(t.get())) = v;
  return Op(g, "Const", name).attr("dtype", TF_FLOAT).tensor("value", t.get()).out();
}

TF_Output ints_const(TF_Graph* g, const std::string& name, const std::vector<int32_t>& v) {
  tf::TensorPtr t = tf::int_tensor({int64_t(v.size())});
  std::copy(v.begin(), v.end(), static_cast<int32_t*>(TF_TensorData(t.get())));
  return Op(g, "Const", name).attr("dtype", TF_INT32).tensor("value", t.get()).out();
}

TF_Operation* make_variable(TF_Graph* g, const std::string& name, const std::vector<int64_t>& dims,
                            float value, std::vector<TF_Operation*>& initializers) {
  TF_Operation* handle = Op(g, "VarHandleOp", name)
                             .attr("dtype", TF_FLOAT)
                             .shape("shape", dims)
                             .attr("shared_name", name.c_str())
                             .finish();
  const std::vector<int32_t> shape(dims.begin(), dims.end());
  TF_Output fill = Op(g, "Fill", name + "/init_value")
                       .in(ints_const(g, name + "/init_shape", shape))
                       .in(scalar_const(g, name + "/init_scalar", value))
                       .out();
  initializers.push_back(Op(g, "AssignVariableOp", name + "/init")
                             .in({handle, 0})
                             .in(fill)
                             .attr("dtype", TF_FLOAT)
                             .finish());
  return handle;
}

namespace {

float* data_of(const tf::TensorPtr& t) { return static_cast<float*>(TF_TensorData(t.get())); }

TF_Output int_scalar(TF_Graph* g, const std::string& name, int32_t v) {
  tf::TensorPtr t = tf::int_tensor({});
  *static_cast<int32_t*>(TF_TensorData(t.get())) = v;
  return Op(g, "Const", name).attr("dtype", TF_INT32).tensor("value", t.get()).out();
}

std::vector<int64_t> dims_of(const dlhost_tensor_desc& t) {
  return std::vector<int64_t>(t.dims, t.dims + t.rank);
}

// TensorFlow's shape of a tensor of the host's graph: rank-4 images channels-last.
std::vector<int64_t> tf_dims(const dlhost_tensor_desc& t) {
  std::vector<int64_t> d = dims_of(t);
  if (t.rank == 4) d = {d[0], d[2], d[3], d[1]};
  return d;
}

// NCHW -> NHWC of an image of `dims` (canonical), identity otherwise.
Layout image_layout(const std::vector<int64_t>& dims) {
  if (dims.size() == 4) return {dims, {0, 2, 3, 1}};
  return {dims, {}};
}

// Operation names: TensorFlow takes [A-Za-z0-9.][A-Za-z0-9_.\-/]*.
std::string clean(const std::string& s) {
  std::string out;
  for (char c : s)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out;
}

// "SAME" pads (out - 1) * s + window - in in total, the smaller half first; "VALID" none.
bool same_as_tf(int64_t in, int64_t out, int64_t window, int64_t s, int64_t pad) {
  const int64_t total = std::max<int64_t>((out - 1) * s + window - in, 0);
  return out == (in + s - 1) / s && total / 2 == pad && total - total / 2 == pad;
}

// Whether TensorFlow's SAME pads a pooling window as the ABI does: `before` in front and `after`
// behind (a ceil-mode window's overhang included), and gives `out` positions.
bool same_window(int64_t in, int64_t out, int64_t window, int64_t s, int64_t before,
                 int64_t after) {
  const int64_t total = std::max<int64_t>((out - 1) * s + window - in, 0);
  return out == (in + s - 1) / s && total / 2 == before && total - total / 2 == after;
}

// A node as the ops' methods get it: its operations' unique name prefix and its index (the
// dropout masks' node).
struct Node {
  const dlhost_node& n;
  std::string prefix;
  uint32_t index;
};

// One method per op (sdk::OpVisitor): the op's TensorFlow operations; its result the output.
class Lowerer final : public sdk::OpVisitor<TF_Output, Node> {
 public:
  Lowerer(TF_Graph* g, const dlhost_graph& graph)
      : g_(g), graph_(graph), values_(size_t(graph.num_tensors)) {}

  Lowered run() {
    make_params();
    for (int32_t k = 0; k < graph_.num_inputs; ++k) make_input(graph_.inputs[k]);
    for (int32_t k = 0; k < graph_.num_nodes; ++k) lower_node(k);
    if (root_.oper == nullptr)
      sdk::unimplemented("cpu_tensorflow: the loss tensor " + std::to_string(graph_.loss) +
                         " is not the output of a loss node");
    out_.loss = values_[size_t(graph_.loss)];
    add_gradients();
    return std::move(out_);
  }

 private:
  // Says once how a kind of op was lowered, for the model's implementation line.
  void note(const std::string& what) {
    if (std::find(out_.notes.begin(), out_.notes.end(), what) == out_.notes.end())
      out_.notes.push_back(what);
  }

  // Says once where the lowering takes another path than Keras's layers and is faster for it
  // (docs/frameworks.md): what, why, and its size as measured.
  void departure(const std::string& what) {
    if (std::find(out_.departures.begin(), out_.departures.end(), what) == out_.departures.end())
      out_.departures.push_back(what);
  }

  // --- parameters and inputs ---

  void make_params() {
    for (int32_t p = 0; p < graph_.num_params; ++p) {
      const dlhost_param_desc& d = *graph_.params[p];
      Variable v;
      v.name = "p" + std::to_string(p) + "_" + clean(d.name);
      v.dims.assign(d.dims, d.dims + d.rank);  // until the node's lowering says otherwise
      v.count = d.count;
      v.layout = {v.dims, {}};
      out_.params.push_back(v);
    }
  }

  // The variable of parameter `p` in TensorFlow's shape `dims`, reached from the canonical layout
  // by `layout`; made on first use. A second node listing it (a tied embedding table) reads the
  // same ReadVariableOp, so TF_AddGradients sums both nodes' gradients, as the ABI asks.
  TF_Output param(int32_t p, std::vector<int64_t> dims, Layout layout) {
    Variable& v = out_.params[size_t(p)];
    if (v.handle != nullptr) {
      if (v.dims != dims || v.layout.perm != layout.perm)
        sdk::unimplemented("cpu_tensorflow: parameter '" + v.name +
                           "' is shared by two nodes in different layouts");
      return v.read;
    }
    v.dims = std::move(dims);
    v.layout = std::move(layout);
    v.handle = make_variable(g_, v.name, v.dims, 0.0f, out_.initializers);
    v.read =
        Op(g_, "ReadVariableOp", v.name + "/read").in({v.handle, 0}).attr("dtype", TF_FLOAT).out();
    v.value = Op(g_, "Placeholder", v.name + "/value")
                  .attr("dtype", TF_FLOAT)
                  .shape("shape", v.dims)
                  .out();
    v.assign = Op(g_, "AssignVariableOp", v.name + "/assign")
                   .in({v.handle, 0})
                   .in(v.value)
                   .attr("dtype", TF_FLOAT)
                   .finish();
    return v.read;
  }
  TF_Output param(int32_t p) {
    const dlhost_param_desc& d = *graph_.params[p];
    std::vector<int64_t> dims(d.dims, d.dims + d.rank);
    return param(p, dims, {dims, {}});
  }

  // A variable the model keeps between steps that is no parameter (running statistics).
  TF_Operation* state(const std::string& name, const std::vector<int64_t>& dims, float value) {
    return make_variable(g_, name, dims, value, out_.initializers);
  }

  void make_input(int32_t id) {
    const dlhost_tensor_desc& d = *graph_.tensors[id];
    InputFeed f;
    f.tensor = id;
    f.what = "input '" + std::string(d.name) + "'";
    if (d.dtype == DLHOST_DTYPE_F32) {
      f.dtype = TF_FLOAT;
    } else if (d.dtype == DLHOST_DTYPE_I32) {
      f.dtype = TF_INT32;
    } else {
      sdk::unimplemented("cpu_tensorflow: " + f.what + " is not F32 or I32");
    }
    f.dims = d.dtype == DLHOST_DTYPE_F32 ? tf_dims(d) : dims_of(d);
    f.layout = d.dtype == DLHOST_DTYPE_F32 ? image_layout(dims_of(d)) : Layout{dims_of(d), {}};
    f.count = tf::elements(f.dims);
    f.placeholder = Op(g_, "Placeholder", "input" + std::to_string(id) + "_" + clean(d.name))
                        .attr("dtype", f.dtype)
                        .shape("shape", f.dims)
                        .out();
    values_[size_t(id)] = f.placeholder;
    out_.inputs.push_back(f);
  }

  // --- nodes ---

  const dlhost_tensor_desc& tensor(int32_t id) const { return *graph_.tensors[id]; }
  TF_Output in(const Node& v, int k) const { return values_[size_t(v.n.inputs[k])]; }
  const dlhost_tensor_desc& in_desc(const Node& v, int k) const { return tensor(v.n.inputs[k]); }
  const dlhost_tensor_desc& out_desc(const Node& v) const { return tensor(v.n.output); }

  TF_Output reshape(const std::string& name, TF_Output x, const std::vector<int32_t>& shape) {
    return Op(g_, "Reshape", name).in(x).in(ints_const(g_, name + "/shape", shape)).out();
  }
  TF_Output bias_add(const Node& v, TF_Output x, int k) {
    if (v.n.num_params <= k) return x;
    return Op(g_, "BiasAdd", v.prefix + "/BiasAdd").in(x).in(param(v.n.params[k])).out();
  }
  TF_Output unary(const char* type, const std::string& name, TF_Output x) {
    return Op(g_, type, name).in(x).out();
  }
  TF_Output binary(const char* type, const std::string& name, TF_Output x, TF_Output y) {
    return Op(g_, type, name).in(x).in(y).out();
  }

  void lower_node(int32_t k) {
    const dlhost_node& n = *graph_.nodes[k];
    if (n.op == DLHOST_OP_INPUT) return;
    values_[size_t(n.output)] =
        visit(n, Node{n, "n" + std::to_string(k) + "_" + clean(n.name), uint32_t(k)});
  }

  // MatMul over [rows, features] with the weight kept as Keras keeps a Dense kernel, [in, out];
  // after an image the features are flattened channels-last, so the kernel's rows are the
  // canonical columns reordered (c, h, w) -> (h, w, c).
  TF_Output fc(const Node& v, const dlhost_fc_attrs& a) override {
    const int32_t keep = DLHOST_HAS_FIELD(&a, dlhost_fc_attrs, batch_dims) ? a.batch_dims : 1;
    const dlhost_tensor_desc& x = in_desc(v, 0);
    const int64_t out = a.out_features;
    int64_t rows = 1, features = 1;
    for (int32_t d = 0; d < x.rank; ++d) (d < keep ? rows : features) *= x.dims[d];
    Layout layout{{out, features}, {1, 0}};
    if (x.rank == 4 && keep == 1)
      layout = {{out, x.dims[1], x.dims[2], x.dims[3]}, {2, 3, 1, 0}};
    else if (x.rank == 4)
      sdk::unsupported_op(v.n, "batch_dims 2 over an image");
    TF_Output w = param(v.n.params[0], {features, out}, layout);
    TF_Output flat =
        x.rank == 2 ? in(v, 0)
                    : reshape(v.prefix + "/flatten", in(v, 0), {int32_t(rows), int32_t(features)});
    TF_Output y = bias_add(v, Op(g_, "MatMul", v.prefix + "/MatMul").in(flat).in(w).out(), 1);
    if (keep == 1) return y;
    std::vector<int32_t> shape(out_desc(v).dims, out_desc(v).dims + out_desc(v).rank);
    return reshape(v.prefix + "/unflatten", y, shape);
  }

  // PadV2 of an NHWC image: top, bottom, left, right, filled with `value`.
  TF_Output pad(const std::string& prefix, TF_Output x, int64_t top, int64_t bottom, int64_t left,
                int64_t right, float value) {
    const std::vector<int32_t> pads{
        0, 0, int32_t(top), int32_t(bottom), int32_t(left), int32_t(right), 0, 0};
    return Op(g_, "PadV2", prefix + "/Pad")
        .in(x)
        .in(reshape(prefix + "/pads", ints_const(g_, prefix + "/pad_list", pads), {4, 2}))
        .in(scalar_const(g_, prefix + "/pad_value", value))
        .out();
  }

  // Conv2D with the filter HWIO (Keras's kernel layout), or DepthwiseConv2dNative with
  // [kh, kw, C, multiplier] when every group is one input channel. Padding SAME or VALID where
  // TensorFlow's rule gives the ABI's symmetric padding, else EXPLICIT.
  TF_Output conv2d(const Node& v, const dlhost_conv2d_attrs& a) override {
    const dlhost_tensor_desc& x = in_desc(v, 0);
    const dlhost_tensor_desc& y = out_desc(v);
    const int64_t c = x.dims[1], o = a.out_channels, kh = a.kernel_h, kw = a.kernel_w;
    const bool depthwise = a.groups > 1 && a.groups == c;
    if ((a.stride_h > 1 || a.stride_w > 1) && (a.dilation_h > 1 || a.dilation_w > 1))
      sdk::unsupported_op(
          v.n,
          "dilation with a stride above 1 (TensorFlow's CPU convolutions, and Keras's "
          "Conv2D, take one or the other; the oneDNN filter gradient fails)");
    TF_Output w;
    if (depthwise)
      w = param(v.n.params[0], {kh, kw, c, o / c}, {{c, o / c, kh, kw}, {2, 3, 0, 1}});
    else
      w = param(v.n.params[0], {kh, kw, c / a.groups, o},
                {{o, c / a.groups, kh, kw}, {2, 3, 1, 0}});
    const int64_t ekh = (kh - 1) * a.dilation_h + 1, ekw = (kw - 1) * a.dilation_w + 1;
    // Anything else is padded by a Pad op first, as Keras's ZeroPadding2D does: Conv2D's own
    // EXPLICIT padding loses its paddings in the C++ gradient (Conv2DBackpropFilter fails).
    TF_Output src = in(v, 0);
    const char* padding = "VALID";
    if (a.pad_h != 0 || a.pad_w != 0) {
      if (same_as_tf(x.dims[2], y.dims[2], ekh, a.stride_h, a.pad_h) &&
          same_as_tf(x.dims[3], y.dims[3], ekw, a.stride_w, a.pad_w))
        padding = "SAME";
      else
        src = pad(v.prefix, src, a.pad_h, a.pad_h, a.pad_w, a.pad_w, 0.0f);
    }
    Op op(g_, depthwise ? "DepthwiseConv2dNative" : "Conv2D", v.prefix + "/Conv2D");
    op.in(src).in(w);
    op.attr_ints("strides", {1, a.stride_h, a.stride_w, 1});
    op.attr_ints("dilations", {1, a.dilation_h, a.dilation_w, 1});
    op.attr("padding", padding);
    return bias_add(v, op.out(), 1);
  }

  // MaxPool/AvgPool VALID, after an explicit Pad when the ABI pads or a ceil-mode window hangs
  // over the end (max: the lowest float, so padding never wins; average: zeros, then each output
  // multiplied by window / count, the count the ABI divides by at that position).
  TF_Output pool2d(const Node& v, const dlhost_pool2d_attrs& a) override {
    if (a.kind != DLHOST_POOL_MAX && a.kind != DLHOST_POOL_AVG)
      sdk::unsupported_op(v.n, "pooling kind " + std::to_string(a.kind));
    const dlhost_tensor_desc& x = in_desc(v, 0);
    const dlhost_tensor_desc& y = out_desc(v);
    const int64_t ih = x.dims[2], iw = x.dims[3], oh = y.dims[2], ow = y.dims[3];
    // What the last window needs past the end, beyond the input.
    const int64_t end_h = std::max<int64_t>((oh - 1) * a.stride_h + a.kernel_h - ih - a.pad_h, 0);
    const int64_t end_w = std::max<int64_t>((ow - 1) * a.stride_w + a.kernel_w - iw - a.pad_w, 0);
    const bool padded = a.pad_h > 0 || a.pad_w > 0 || end_h > 0 || end_w > 0;
    const bool max = a.kind == DLHOST_POOL_MAX;
    // TensorFlow's SAME where it pads exactly as the ABI's window does (a ceil-mode window one
    // past the end, as AlexNet-R's 3/2 pools of 32 and 16): Keras's MaxPool2D and
    // AveragePooling2D(padding="same"), without the Pad op and its gradient, and for the average
    // without the rescale, since SAME divides by the elements inside the input, which is the
    // ABI's count when the ABI pads nothing itself or counts no padding. 12% of AlexNet-R's
    // step in Keras terms (bench/probe/tf_ceil_pool.py).
    const bool same = padded && same_window(ih, oh, a.kernel_h, a.stride_h, a.pad_h, end_h) &&
                      same_window(iw, ow, a.kernel_w, a.stride_w, a.pad_w, end_w) &&
                      (max || !a.count_include_pad || (a.pad_h == 0 && a.pad_w == 0));
    TF_Output src = in(v, 0);
    if (padded && !same)
      src = pad(v.prefix, src, a.pad_h, end_h, a.pad_w, end_w, max ? -FLT_MAX : 0.0f);
    if (same) note("pooling: padding SAME where it is the ABI's window");
    TF_Output pooled =
        Op(g_, max ? "MaxPool" : "AvgPool", v.prefix + (max ? "/MaxPool" : "/AvgPool"))
            .in(src)
            .attr_ints("ksize", {1, a.kernel_h, a.kernel_w, 1})
            .attr_ints("strides", {1, a.stride_h, a.stride_w, 1})
            .attr("padding", same ? "SAME" : "VALID")
            .out();
    if (max || !padded || same) return pooled;
    return binary("Mul", v.prefix + "/rescale", pooled, avg_pool_scale(v, a, ih, iw, oh, ow));
  }

  // [1, OH, OW, 1]: kernel area / the count the ABI divides by (clipped to the padded input with
  // count_include_pad, to the input without), a constant of the shapes.
  TF_Output avg_pool_scale(const Node& v, const dlhost_pool2d_attrs& a, int64_t ih, int64_t iw,
                           int64_t oh, int64_t ow) {
    const auto count = [&](int64_t o, int64_t s, int64_t k, int64_t p, int64_t in) {
      const int64_t start = o * s - p;
      if (a.count_include_pad) return std::min(start + k, in + p) - start;
      return std::min(start + k, in) - std::max<int64_t>(start, 0);
    };
    tf::TensorPtr t = tf::float_tensor({1, oh, ow, 1});
    float* scale = static_cast<float*>(TF_TensorData(t.get()));
    for (int64_t h = 0; h < oh; ++h)
      for (int64_t w = 0; w < ow; ++w)
        scale[h * ow + w] =
            float(a.kernel_h * a.kernel_w) / float(count(h, a.stride_h, a.kernel_h, a.pad_h, ih) *
                                                   count(w, a.stride_w, a.kernel_w, a.pad_w, iw));
    return Op(g_, "Const", v.prefix + "/scale")
        .attr("dtype", TF_FLOAT)
        .tensor("value", t.get())
        .out();
  }

  TF_Output activation(const Node& v, const dlhost_activation_attrs& a) override {
    switch (a.kind) {
      case DLHOST_ACTIVATION_RELU:
        return unary("Relu", v.prefix + "/Relu", in(v, 0));
      case DLHOST_ACTIVATION_SIGMOID:
        return unary("Sigmoid", v.prefix + "/Sigmoid", in(v, 0));
      case DLHOST_ACTIVATION_TANH:
        return unary("Tanh", v.prefix + "/Tanh", in(v, 0));
    }
    sdk::unsupported_op(v.n, "activation kind " + std::to_string(a.kind));
  }

  // The loss node must be the graph's loss: the gradients start there.
  void loss_root(const Node& v, TF_Output root, TF_Output seed) {
    if (v.n.output != graph_.loss) sdk::unsupported_op(v.n, "a loss that is not the graph's loss");
    root_ = root;
    seed_ = seed;
  }

  TF_Output softmax_cross_entropy(const Node& v) override {
    const dlhost_tensor_desc& x = in_desc(v, 0);
    if (x.rank == 4) sdk::unsupported_op(v.n, "logits of rank 4");
    const int64_t classes = x.dims[x.rank - 1];
    const int64_t positions = tf::elements(dims_of(x)) / classes;
    TF_Output logits = x.rank == 2 ? in(v, 0)
                                   : reshape(v.prefix + "/logits", in(v, 0),
                                             {int32_t(positions), int32_t(classes)});
    TF_Output labels = reshape(v.prefix + "/labels", in(v, 1), {int32_t(positions)});
    TF_Operation* ce = Op(g_, "SparseSoftmaxCrossEntropyWithLogits", v.prefix + "/xent")
                           .in(logits)
                           .in(labels)
                           .finish();
    TF_Output loss = Op(g_, "Mean", v.prefix + "/Mean")
                         .in({ce, 0})
                         .in(ints_const(g_, v.prefix + "/axes", {0}))
                         .out();
    loss_root(v, logits,
              binary("Mul", v.prefix + "/dlogits", {ce, 1},
                     scalar_const(g_, v.prefix + "/inv_positions", 1.0f / float(positions))));
    return loss;
  }

  TF_Output mse_loss(const Node& v) override {
    std::vector<int32_t> axes(size_t(in_desc(v, 0).rank));
    std::iota(axes.begin(), axes.end(), 0);
    TF_Output loss =
        Op(g_, "Mean", v.prefix + "/Mean")
            .in(binary("SquaredDifference", v.prefix + "/SquaredDifference", in(v, 0), in(v, 1)))
            .in(ints_const(g_, v.prefix + "/axes", axes))
            .out();
    loss_root(v, loss, TF_Output{nullptr, 0});
    return loss;
  }

  // FusedBatchNormV3 in training mode: exponential_avg_factor = the ABI's momentum makes its
  // outputs 1 and 2 the updated running mean and (Bessel-corrected) variance, assigned back to
  // the model's state each forward. A rank-2 input runs as [N, 1, 1, C].
  TF_Output batch_norm(const Node& v, const dlhost_batch_norm_attrs& a) override {
    const dlhost_tensor_desc& x = in_desc(v, 0);
    if (x.rank != 2 && x.rank != 4)
      sdk::unsupported_op(v.n, "an input of rank " + std::to_string(x.rank));
    const int64_t c = x.dims[1];
    TF_Output src = x.rank == 4 ? in(v, 0)
                                : reshape(v.prefix + "/as_image", in(v, 0),
                                          {int32_t(x.dims[0]), 1, 1, int32_t(c)});
    TF_Operation* mean = state(v.prefix + "/running_mean", {c}, 0.0f);
    TF_Operation* var = state(v.prefix + "/running_var", {c}, 1.0f);
    const auto read = [&](TF_Operation* h, const char* what) {
      return Op(g_, "ReadVariableOp", v.prefix + what).in({h, 0}).attr("dtype", TF_FLOAT).out();
    };
    departure(
        "batch norm: FusedBatchNormV3, which Keras 3's BatchNormalization does not use (it runs "
        "moments and the normalization unfused): forward + backward over ResNet-56's 55 batch "
        "norms at b128, 1 thread, 2.0 s a step fused against 5.4 s unfused; the ResNet-56 step "
        "943 against Keras's 1090 CPU ms (0.87). Measured 2026-12-06 on a 2-core Xeon with "
        "AVX-512 under load (bench/probe/tf_batchnorm.py; bench/results/2026-12-06-fairness, "
        "docs/frameworks.md)");
    TF_Operation* bn = Op(g_, "FusedBatchNormV3", v.prefix + "/FusedBatchNormV3")
                           .in(src)
                           .in(param(v.n.params[0]))
                           .in(param(v.n.params[1]))
                           .in(read(mean, "/running_mean/read"))
                           .in(read(var, "/running_var/read"))
                           .attr("T", TF_FLOAT)
                           .attr("U", TF_FLOAT)
                           .attr("epsilon", a.epsilon)
                           .attr("exponential_avg_factor", a.momentum)
                           .attr("data_format", "NHWC")
                           .attr("is_training", true)
                           .finish();
    for (auto [h, k] : {std::pair{mean, 1}, std::pair{var, 2}})
      out_.state_updates.push_back(
          Op(g_, "AssignVariableOp", v.prefix + (k == 1 ? "/update_mean" : "/update_var"))
              .in({h, 0})
              .in({bn, k})
              .attr("dtype", TF_FLOAT)
              .finish());
    if (x.rank == 4) return {bn, 0};
    return reshape(v.prefix + "/as_rows", {bn, 0}, {int32_t(x.dims[0]), int32_t(c)});
  }

  TF_Output dropout(const Node& v, const dlhost_dropout_attrs& a) override {
    const dlhost_tensor_desc& y = out_desc(v);
    DropoutFeed f;
    f.node = v.index;
    f.probability = a.probability;
    f.dims = tf_dims(y);
    f.layout = image_layout(dims_of(y));
    f.placeholder = Op(g_, "Placeholder", v.prefix + "/mask")
                        .attr("dtype", TF_FLOAT)
                        .shape("shape", f.dims)
                        .out();
    out_.dropouts.push_back(f);
    return binary("Mul", v.prefix + "/Mul", in(v, 0), f.placeholder);
  }

  TF_Output add(const Node& v) override {
    return binary("AddV2", v.prefix + "/Add", in(v, 0), in(v, 1));
  }

  // y = x * (k + alpha / size * S)^-beta, S the sum of x^2 over `size` channels centred on c,
  // composed of ops with correct C++ gradients: TensorFlow's LRN op would do the forward, but
  // its registered C++ gradient builds LRNGrad with the default depth_radius, bias, alpha and
  // beta instead of the op's (wrong for any other LRN). S is an AvgPool along the channels
  // (as [N*H*W, C, 1, 1], SAME) times the number of channels each window covers.
  TF_Output lrn(const Node& v, const dlhost_lrn_attrs& a) override {
    const dlhost_tensor_desc& x = in_desc(v, 0);
    if (x.rank != 4)
      sdk::unsupported_op(v.n, "LRN over a rank-" + std::to_string(x.rank) + " input");
    if (a.size % 2 == 0) sdk::unsupported_op(v.n, "an even window (the ABI's window is centred)");
    const int32_t n = int32_t(x.dims[0]), c = int32_t(x.dims[1]), h = int32_t(x.dims[2]),
                  w = int32_t(x.dims[3]), r = int32_t(a.size / 2);
    TF_Output by_channel =
        reshape(v.prefix + "/by_channel", unary("Square", v.prefix + "/square", in(v, 0)),
                {n * h * w, c, 1, 1});
    TF_Output mean = Op(g_, "AvgPool", v.prefix + "/window_mean")
                         .in(by_channel)
                         .attr_ints("ksize", {1, a.size, 1, 1})
                         .attr_ints("strides", {1, 1, 1, 1})
                         .attr("padding", "SAME")
                         .out();
    tf::TensorPtr count = tf::float_tensor({1, c, 1, 1});
    for (int32_t k = 0; k < c; ++k)
      data_of(count)[k] =
          float(std::min(k + r, c - 1) - std::max(k - r, 0) + 1) * a.alpha / float(a.size);
    TF_Output scaled = binary("Mul", v.prefix + "/scaled_sum", mean,
                              Op(g_, "Const", v.prefix + "/count")
                                  .attr("dtype", TF_FLOAT)
                                  .tensor("value", count.get())
                                  .out());
    TF_Output base =
        binary("AddV2", v.prefix + "/base", reshape(v.prefix + "/as_image", scaled, {n, h, w, c}),
               scalar_const(g_, v.prefix + "/k", a.k));
    return binary("Mul", v.prefix + "/LRN", in(v, 0),
                  binary("Pow", v.prefix + "/pow", base,
                         scalar_const(g_, v.prefix + "/minus_beta", -a.beta)));
  }

  TF_Output embedding(const Node& v, const dlhost_embedding_attrs&) override {
    return Op(g_, "GatherV2", v.prefix + "/Gather")
        .in(param(v.n.params[0]))
        .in(in(v, 0))
        .in(int_scalar(g_, v.prefix + "/axis", 0))
        .out();
  }

  // Per layer: the input projection of every step in one MatMul ([N*T, C] x [C, 4H], Keras's
  // kernel layout, + bias), then per step z = x_t + h MatMul [H, 4H], split into i, f, g, o.
  TF_Output lstm(const Node& v, const dlhost_lstm_attrs& a) override {
    const dlhost_tensor_desc& x = in_desc(v, 0);
    const int32_t n = int32_t(x.dims[0]), t = int32_t(x.dims[1]), h4 = int32_t(4 * a.hidden);
    TF_Output seq = in(v, 0);
    int64_t c = x.dims[2];
    for (int64_t l = 0; l < a.layers; ++l) {
      const std::string p = v.prefix + "/layer" + std::to_string(l);
      const int k = int(3 * l);
      TF_Output w = param(v.n.params[k], {c, h4}, {{h4, c}, {1, 0}});
      TF_Output wh = param(v.n.params[k + 1], {a.hidden, h4}, {{h4, a.hidden}, {1, 0}});
      TF_Output b = param(v.n.params[k + 2]);
      TF_Output proj = Op(g_, "BiasAdd", p + "/x_bias")
                           .in(Op(g_, "MatMul", p + "/x_proj")
                                   .in(reshape(p + "/rows", seq, {n * t, int32_t(c)}))
                                   .in(w)
                                   .out())
                           .in(b)
                           .out();
      TF_Operation* steps = Op(g_, "Unpack", p + "/steps")
                                .in(reshape(p + "/by_step", proj, {n, t, h4}))
                                .attr("num", int64_t(t))
                                .attr("axis", int64_t(1))
                                .finish();
      TF_Output hs{}, cs{};
      std::vector<TF_Output> outputs;
      for (int32_t s = 0; s < t; ++s) {
        const std::string q = p + "/t" + std::to_string(s);
        TF_Output z = {steps, s};
        if (s > 0)
          z = binary("AddV2", q + "/z", z, Op(g_, "MatMul", q + "/h_proj").in(hs).in(wh).out());
        TF_Operation* gates = Op(g_, "Split", q + "/gates")
                                  .in(int_scalar(g_, q + "/axis", 1))
                                  .in(z)
                                  .attr("num_split", int64_t(4))
                                  .finish();
        TF_Output i = unary("Sigmoid", q + "/i", {gates, 0});
        TF_Output g = unary("Tanh", q + "/g", {gates, 2});
        TF_Output o = unary("Sigmoid", q + "/o", {gates, 3});
        TF_Output ig = binary("Mul", q + "/ig", i, g);
        cs = s == 0
                 ? ig
                 : binary("AddV2", q + "/c",
                          binary("Mul", q + "/fc", unary("Sigmoid", q + "/f", {gates, 1}), cs), ig);
        hs = binary("Mul", q + "/h", o, unary("Tanh", q + "/tanh_c", cs));
        outputs.push_back(hs);
      }
      seq = Op(g_, "Pack", p + "/sequence").ins(outputs).attr("axis", int64_t(1)).out();
      c = a.hidden;
    }
    return seq;
  }

  TF_Output global_avg_pool(const Node& v) override {
    return Op(g_, "Mean", v.prefix + "/Mean")
        .in(in(v, 0))
        .in(ints_const(g_, v.prefix + "/axes", {1, 2}))
        .out();
  }

  // --- the Transformer's ops (ABI 1.4), composed as Keras's layers and tf.nn compose them ---

  // Over the last axis: (x - mean) * rsqrt(var + eps) * scale + shift, the biased variance of
  // the centred values (tf.nn.moments). Keras's LayerNormalization runs FusedBatchNormV3 over a
  // reshaped input only for epsilon >= 1.001e-5; BERT's is 1e-12, so the composition it falls
  // back to is used for both.
  TF_Output layer_norm(const Node& v, const dlhost_layer_norm_attrs& a) override {
    const dlhost_tensor_desc& x = in_desc(v, 0);
    if (x.rank == 4) sdk::unsupported_op(v.n, "a rank-4 input (held channels-last here)");
    TF_Output axis = ints_const(g_, v.prefix + "/axis", {x.rank - 1});
    const auto mean = [&](const std::string& name, TF_Output t) {
      return Op(g_, "Mean", v.prefix + name).in(t).in(axis).attr("keep_dims", true).out();
    };
    TF_Output centred = binary("Sub", v.prefix + "/centred", in(v, 0), mean("/mean", in(v, 0)));
    TF_Output variance = mean("/variance", unary("Square", v.prefix + "/square", centred));
    TF_Output inv_std = unary("Rsqrt", v.prefix + "/inv_std",
                              binary("AddV2", v.prefix + "/var_eps", variance,
                                     scalar_const(g_, v.prefix + "/epsilon", a.epsilon)));
    TF_Output normed = binary("Mul", v.prefix + "/normed", centred, inv_std);
    return binary("AddV2", v.prefix + "/shift",
                  binary("Mul", v.prefix + "/scale", normed, param(v.n.params[0])),
                  param(v.n.params[1]));
  }

  // tf.nn.gelu's two forms: x/2 (1 + erf(x / sqrt 2)) (approximate=False) or
  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate=True); TensorFlow has no GELU
  // kernel of its own (its oneDNN remapper fuses this pattern after a MatMul).
  TF_Output gelu(const Node& v, const dlhost_gelu_attrs& a) override {
    const int32_t kind = a.approximation;
    if (kind != DLHOST_GELU_ERF && kind != DLHOST_GELU_TANH)
      sdk::unsupported_op(v.n, "approximation " + std::to_string(kind));
    const std::string& p = v.prefix;
    TF_Output x = in(v, 0);
    TF_Output inner;
    if (kind == DLHOST_GELU_ERF) {
      inner =
          unary("Erf", p + "/erf",
                binary("Mul", p + "/x_scaled", x, scalar_const(g_, p + "/rsqrt2", 0.70710678f)));
    } else {
      TF_Output cube = binary("Mul", p + "/cube", x, unary("Square", p + "/square", x));
      TF_Output poly = binary(
          "AddV2", p + "/poly", x,
          binary("Mul", p + "/cube_scaled", cube, scalar_const(g_, p + "/coefficient", 0.044715f)));
      inner = unary("Tanh", p + "/tanh",
                    binary("Mul", p + "/poly_scaled", poly,
                           scalar_const(g_, p + "/sqrt_2_over_pi", 0.7978845608f)));
    }
    TF_Output half_x = binary("Mul", p + "/half_x", x, scalar_const(g_, p + "/half", 0.5f));
    return binary("Mul", p + "/gelu", half_x,
                  binary("AddV2", p + "/one_plus", inner, scalar_const(g_, p + "/one", 1.0f)));
  }

  // Multi-head SDPA as Keras's MultiHeadAttention computes it: heads split by Reshape +
  // Transpose to [N, H, T, d], q scaled by 1/sqrt(d), BatchMatMulV2 (k adjoint), the causal mask
  // added (-inf above the diagonal), Softmax over the last axis, the ABI's pinned dropout mask
  // (a placeholder [N, H, T, T], indexed as the ABI indexes it), BatchMatMulV2 with v, heads
  // merged back.
  TF_Output attention(const Node& v, const dlhost_attention_attrs& a) override {
    const dlhost_tensor_desc& q = in_desc(v, 0);
    if (q.rank != 3)
      sdk::unsupported_op(v.n, "inputs of rank " + std::to_string(q.rank) + " (not [N, T, C])");
    const int32_t n = int32_t(q.dims[0]), t = int32_t(q.dims[1]), c = int32_t(q.dims[2]),
                  h = int32_t(a.heads), d = c / h;
    const std::string& p = v.prefix;
    TF_Output to_heads = ints_const(g_, p + "/to_heads", {0, 2, 1, 3});
    const auto heads = [&](int k, const std::string& what) {
      return Op(g_, "Transpose", p + "/" + what + "_heads")
          .in(reshape(p + "/" + what + "_split", in(v, k), {n, t, h, d}))
          .in(to_heads)
          .out();
    };
    TF_Output qh = binary("Mul", p + "/q_scaled", heads(0, "q"),
                          scalar_const(g_, p + "/scale", 1.0f / std::sqrt(float(d))));
    TF_Output scores = Op(g_, "BatchMatMulV2", p + "/scores")
                           .in(qh)
                           .in(heads(1, "k"))
                           .attr("adj_x", false)
                           .attr("adj_y", true)
                           .out();
    if (a.causal != 0) {
      tf::TensorPtr mask = tf::float_tensor({t, t});
      for (int32_t i = 0; i < t; ++i)
        for (int32_t j = 0; j < t; ++j)
          data_of(mask)[i * t + j] = j > i ? -std::numeric_limits<float>::infinity() : 0.0f;
      scores = binary("AddV2", p + "/causal", scores,
                      Op(g_, "Const", p + "/causal_mask")
                          .attr("dtype", TF_FLOAT)
                          .tensor("value", mask.get())
                          .out());
    }
    TF_Output probs = unary("Softmax", p + "/softmax", scores);
    if (a.dropout > 0) {
      DropoutFeed f;
      f.node = v.index;
      f.probability = a.dropout;
      f.dims = {n, h, t, t};
      f.layout = {f.dims, {}};
      f.placeholder =
          Op(g_, "Placeholder", p + "/mask").attr("dtype", TF_FLOAT).shape("shape", f.dims).out();
      out_.dropouts.push_back(f);
      probs = binary("Mul", p + "/dropped", probs, f.placeholder);
    }
    TF_Output context = Op(g_, "BatchMatMulV2", p + "/context")
                            .in(probs)
                            .in(heads(2, "v"))
                            .attr("adj_x", false)
                            .attr("adj_y", false)
                            .out();
    return reshape(p + "/merge",
                   Op(g_, "Transpose", p + "/from_heads").in(context).in(to_heads).out(),
                   {n, t, c});
  }

  // x + table[0:T]: the first T rows gathered (GatherV2 over a constant range, whose gradient
  // scatters into those rows only) and added with broadcasting over N.
  TF_Output position_embedding(const Node& v, const dlhost_position_embedding_attrs& a) override {
    const dlhost_tensor_desc& x = in_desc(v, 0);
    if (x.rank != 3) sdk::unsupported_op(v.n, "an input of rank " + std::to_string(x.rank));
    if (x.dims[1] > a.max_positions)
      sdk::invalid("cpu_tensorflow: " + sdk::node_label(v.n) + " embeds " +
                   std::to_string(x.dims[1]) + " positions, over its max_positions " +
                   std::to_string(a.max_positions));
    std::vector<int32_t> positions(size_t(x.dims[1]));
    std::iota(positions.begin(), positions.end(), 0);
    TF_Output rows = Op(g_, "GatherV2", v.prefix + "/rows")
                         .in(param(v.n.params[0]))
                         .in(ints_const(g_, v.prefix + "/positions", positions))
                         .in(int_scalar(g_, v.prefix + "/axis", 0))
                         .out();
    return binary("AddV2", v.prefix + "/add", in(v, 0), rows);
  }

  // x E^T (+ b): MatMul with transpose_b over the embedding's own variable (param() returns the
  // same read), as Keras models tie an output layer to an Embedding's weights.
  TF_Output tied_fc(const Node& v, const dlhost_tied_fc_attrs& a) override {
    if ((a.has_bias != 0) != (v.n.num_params > 1))
      sdk::invalid("cpu_tensorflow: " + sdk::node_label(v.n) +
                   " has_bias=" + std::to_string(a.has_bias) + " but " +
                   std::to_string(v.n.num_params) + " parameters");
    const dlhost_tensor_desc& x = in_desc(v, 0);
    const dlhost_tensor_desc& y = out_desc(v);
    const int64_t dim = x.dims[x.rank - 1];
    const int64_t rows = tf::elements(dims_of(x)) / dim;
    TF_Output flat = x.rank == 2
                         ? in(v, 0)
                         : reshape(v.prefix + "/rows", in(v, 0), {int32_t(rows), int32_t(dim)});
    TF_Output logits = bias_add(v,
                                Op(g_, "MatMul", v.prefix + "/MatMul")
                                    .in(flat)
                                    .in(param(v.n.params[0]))
                                    .attr("transpose_a", false)
                                    .attr("transpose_b", true)
                                    .out(),
                                1);
    if (x.rank == 2) return logits;
    return reshape(v.prefix + "/unflatten", logits, std::vector<int32_t>(y.dims, y.dims + y.rank));
  }

  // --- backward ---

  void add_gradients() {
    std::vector<TF_Output> xs;
    for (const Variable& v : out_.params) {
      if (v.handle == nullptr)
        sdk::unimplemented("cpu_tensorflow: parameter '" + v.name + "' is used by no node");
      xs.push_back(v.read);
    }
    out_.grads.resize(xs.size());
    tf::StatusPtr status(TF_NewStatus());
    TF_Output seed = seed_;
    TF_AddGradientsWithPrefix(g_, "gradients", &root_, 1, xs.data(), int(xs.size()),
                              seed.oper != nullptr ? &seed : nullptr, status.get(),
                              out_.grads.data());
    tf::check(status.get(), "TF_AddGradients");
  }

  TF_Graph* g_;
  const dlhost_graph& graph_;
  std::vector<TF_Output> values_;  // by tensor id
  TF_Output root_{nullptr, 0}, seed_{nullptr, 0};
  Lowered out_;
};

}  // namespace

Lowered lower_graph(TF_Graph* g, const dlhost_graph& graph) { return Lowerer(g, graph).run(); }

}  // namespace dlhost::cpu_tensorflow
