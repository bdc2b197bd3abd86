// graph.cpp — shape inference, parameter creation and FLOP counting for the host-owned graph IR,
// and the C builder table that network plugins call.
//
// FLOPs are forward FLOPs per mini-batch: a multiply-add counts 2, a bias add, an activation or
// a pooling window element counts 1 per element, as the usual conv-net tables count them.
#include "core/graph.h"

#include <numeric>
#include <sstream>
#include <unordered_set>

#include "core/graph_checks.h"
#include "core/host_api.h"
#include "core/plugin_registry.h"

namespace dlhost {

using namespace graph_detail;  // NOLINT(google-build-using-namespace): this file's own helpers

int64_t Graph::param_count() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.desc.count;
  return n;
}

double Graph::forward_flops() const {
  double f = 0;
  for (const auto& n : nodes_) f += n.node.forward_flops;
  return f;
}

double Graph::forward_flops_per_sample() const {
  return forward_flops() / static_cast<double>(batch_);
}

int32_t Graph::data_input() const {
  for (int32_t id : inputs_)
    if (tensors_[id].desc.dtype == DLHOST_DTYPE_F32) return id;
  return inputs_.empty() ? -1 : inputs_.front();
}

std::string Graph::input_shape() const {
  const int32_t chosen = data_input();
  if (chosen < 0) return "";
  const auto& t = tensors_[chosen].desc;
  std::ostringstream os;
  for (int32_t i = 1; i < t.rank; ++i) os << (i > 1 ? "x" : "") << t.dims[i];
  if (t.dtype == DLHOST_DTYPE_I32) os << " ids";
  return os.str();
}

int64_t Graph::tokens_per_sample() const {
  const int32_t chosen = data_input();
  if (chosen < 0 || tensors_[chosen].desc.dtype != DLHOST_DTYPE_I32) return 0;
  const auto& t = tensors_[chosen].desc;
  int64_t tokens = 1;
  for (int32_t i = 1; i < t.rank; ++i) tokens *= t.dims[i];
  return tokens;
}

void Graph::finish() {
  tensor_ptrs_.clear();
  node_ptrs_.clear();
  param_ptrs_.clear();
  for (auto& t : tensors_) {
    t.desc.name = t.name.c_str();
    tensor_ptrs_.push_back(&t.desc);
  }
  for (auto& n : nodes_) {
    n.node.name = n.name.c_str();
    n.node.inputs = n.inputs.data();
    n.node.num_inputs = static_cast<int32_t>(n.inputs.size());
    n.node.params = n.params.data();
    n.node.num_params = static_cast<int32_t>(n.params.size());
    node_ptrs_.push_back(&n.node);
  }
  for (auto& p : params_) {
    p.desc.name = p.name.c_str();
    param_ptrs_.push_back(&p.desc);
  }
  view_ = {};
  view_.struct_size = DLHOST_GRAPH_STRUCT_SIZE;
  view_.network = network_.c_str();
  view_.batch = batch_;
  view_.num_tensors = static_cast<int32_t>(tensor_ptrs_.size());
  view_.tensors = tensor_ptrs_.data();
  view_.num_nodes = static_cast<int32_t>(node_ptrs_.size());
  view_.nodes = node_ptrs_.data();
  view_.num_params = static_cast<int32_t>(param_ptrs_.size());
  view_.params = param_ptrs_.data();
  view_.num_inputs = static_cast<int32_t>(inputs_.size());
  view_.inputs = inputs_.data();
  view_.loss = loss_;
}

GraphBuilder::GraphBuilder(std::string network, int64_t batch) : graph_(new Graph) {
  if (batch <= 0)
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                "mini-batch must be > 0, got " + std::to_string(batch));
  graph_->network_ = std::move(network);
  graph_->batch_ = batch;
}

const dlhost_tensor_desc& GraphBuilder::checked_tensor(const std::string& layer, int32_t id) const {
  if (!graph_) throw Error(DLHOST_CODE_FAILED_PRECONDITION, "graph builder already finished");
  if (id < 0 || id >= static_cast<int32_t>(graph_->tensors_.size()))
    bad(layer, "input tensor id " + std::to_string(id) + " does not exist");
  return graph_->tensors_[id].desc;
}

int32_t GraphBuilder::add_tensor(const std::string& name, dlhost_dtype dtype,
                                 std::vector<int64_t> dims) {
  if (dims.size() > DLHOST_MAX_RANK) bad(name, "rank above " + std::to_string(DLHOST_MAX_RANK));
  auto& t = graph_->tensors_.emplace_back();
  t.name = name;
  t.desc.struct_size = DLHOST_TENSOR_DESC_STRUCT_SIZE;
  t.desc.id = static_cast<int32_t>(graph_->tensors_.size() - 1);
  t.desc.dtype = dtype;
  t.desc.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) t.desc.dims[i] = dims[i];
  t.desc.producer = static_cast<int32_t>(graph_->nodes_.size() - 1);
  return t.desc.id;
}

Graph::NodeStorage& GraphBuilder::add_node(dlhost_op op, const std::string& name,
                                           std::vector<int32_t> inputs) {
  if (!graph_) throw Error(DLHOST_CODE_FAILED_PRECONDITION, "graph builder already finished");
  if (name.empty()) throw Error(DLHOST_CODE_INVALID_ARGUMENT, "a layer needs a name");
  for (const auto& n : graph_->nodes_)
    if (n.name == name) bad(name, "name already used by another layer");
  for (int32_t id : inputs) checked_tensor(name, id);
  auto& n = graph_->nodes_.emplace_back();
  n.name = name;
  n.inputs = std::move(inputs);
  n.node.struct_size = DLHOST_NODE_STRUCT_SIZE;
  n.node.op = op;
  return n;
}

int32_t GraphBuilder::add_param(Graph::NodeStorage& node, dlhost_param_role role,
                                std::vector<int64_t> dims, dlhost_param_init init, int64_t fan_in,
                                int64_t fan_out, const std::string& suffix) {
  auto& p = graph_->params_.emplace_back();
  if (!suffix.empty()) {
    p.name = node.name + "." + suffix;
  } else {
    static const char* const kRoleNames[] = {"",      "weight",      "bias", "scale",
                                             "shift", "weight_iter", "table"};
    p.name = node.name + "." + kRoleNames[role];
  }
  p.desc.struct_size = DLHOST_PARAM_DESC_STRUCT_SIZE;
  p.desc.id = static_cast<int32_t>(graph_->params_.size() - 1);
  p.desc.node = static_cast<int32_t>(graph_->nodes_.size() - 1);
  p.desc.role = role;
  p.desc.init = init;
  p.desc.rank = static_cast<int32_t>(dims.size());
  p.desc.count = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    p.desc.dims[i] = dims[i];
    p.desc.count *= dims[i];
  }
  p.desc.fan_in = fan_in;
  p.desc.fan_out = fan_out;
  node.params.push_back(p.desc.id);
  return p.desc.id;
}

int32_t GraphBuilder::input(const std::string& name, dlhost_dtype dtype,
                            const std::vector<int64_t>& per_sample) {
  if (dtype != DLHOST_DTYPE_F32 && dtype != DLHOST_DTYPE_I32)
    bad(name, "inputs are F32 (data) or I32 (class labels, token ids)");
  for (int64_t d : per_sample)
    if (d <= 0) bad(name, "every dimension must be > 0");
  if (per_sample.size() + 1 > DLHOST_MAX_RANK) bad(name, "too many dimensions");
  auto& n = add_node(DLHOST_OP_INPUT, name, {});
  std::vector<int64_t> dims{graph_->batch_};
  dims.insert(dims.end(), per_sample.begin(), per_sample.end());
  n.node.output = add_tensor(name, dtype, dims);
  graph_->inputs_.push_back(n.node.output);
  return n.node.output;
}

int32_t GraphBuilder::fc(const std::string& name, int32_t x, const dlhost_fc_attrs& attrs) {
  const auto& in = checked_tensor(name, x);
  int32_t batch_dims = attrs.batch_dims == 0 ? 1 : attrs.batch_dims;
  if (batch_dims < 1 || batch_dims > 2) bad(name, "batch_dims must be 1 or 2");
  if (in.dtype != DLHOST_DTYPE_F32 || in.rank < batch_dims + 1)
    bad(name, "needs an F32 input of rank >= " + std::to_string(batch_dims + 1) + ", got " +
                  shape_string(in));
  if (attrs.out_features <= 0) bad(name, "out_features must be > 0");
  int64_t batch = 1;
  for (int32_t i = 0; i < batch_dims; ++i) batch *= in.dims[i];
  int64_t features = elements(in) / batch;
  std::vector<int64_t> out_dims(in.dims, in.dims + batch_dims);
  out_dims.push_back(attrs.out_features);
  auto& n = add_node(DLHOST_OP_FC, name, {x});
  n.fc = attrs;
  n.fc.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE;
  n.fc.batch_dims = batch_dims;
  n.node.attrs = &n.fc;
  add_param(n, DLHOST_PARAM_WEIGHT, {attrs.out_features, features}, DLHOST_INIT_XAVIER_UNIFORM,
            features, attrs.out_features);
  if (attrs.has_bias)
    add_param(n, DLHOST_PARAM_BIAS, {attrs.out_features}, DLHOST_INIT_ZERO, features,
              attrs.out_features);
  n.node.forward_flops = 2.0 * batch * features * attrs.out_features +
                         (attrs.has_bias ? 1.0 * batch * attrs.out_features : 0.0);
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, out_dims);
  return n.node.output;
}

int32_t GraphBuilder::conv2d(const std::string& name, int32_t x, const dlhost_conv2d_attrs& a) {
  const auto& in = checked_tensor(name, x);
  if (in.dtype != DLHOST_DTYPE_F32 || in.rank != 4)
    bad(name, "needs an F32 NCHW input, got " + shape_string(in));
  if (a.out_channels <= 0 || a.kernel_h <= 0 || a.kernel_w <= 0 || a.stride_h <= 0 ||
      a.stride_w <= 0 || a.pad_h < 0 || a.pad_w < 0 || a.dilation_h <= 0 || a.dilation_w <= 0 ||
      a.groups <= 0)
    bad(name, "out_channels, kernel, stride, dilation and groups must be > 0 and padding >= 0");
  int64_t c = in.dims[1], h = in.dims[2], w = in.dims[3];
  if (c % a.groups != 0 || a.out_channels % a.groups != 0)
    bad(name, "groups " + std::to_string(a.groups) + " must divide input channels " +
                  std::to_string(c) + " and output channels " + std::to_string(a.out_channels));
  int64_t ekh = a.dilation_h * (a.kernel_h - 1) + 1, ekw = a.dilation_w * (a.kernel_w - 1) + 1;
  if (h + 2 * a.pad_h < ekh || w + 2 * a.pad_w < ekw)
    bad(name, "kernel " + std::to_string(ekh) + "x" + std::to_string(ekw) +
                  " (dilated) larger than the padded input " + std::to_string(h + 2 * a.pad_h) +
                  "x" + std::to_string(w + 2 * a.pad_w) + " (input " + shape_string(in) + ")");
  int64_t oh = (h + 2 * a.pad_h - ekh) / a.stride_h + 1;
  int64_t ow = (w + 2 * a.pad_w - ekw) / a.stride_w + 1;
  auto& n = add_node(DLHOST_OP_CONV2D, name, {x});
  n.conv = a;
  n.conv.struct_size = DLHOST_CONV2D_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.conv;
  int64_t cin = c / a.groups;
  int64_t k = a.kernel_h * a.kernel_w;
  add_param(n, DLHOST_PARAM_WEIGHT, {a.out_channels, cin, a.kernel_h, a.kernel_w},
            DLHOST_INIT_XAVIER_UNIFORM, cin * k, a.out_channels / a.groups * k);
  if (a.has_bias)
    add_param(n, DLHOST_PARAM_BIAS, {a.out_channels}, DLHOST_INIT_ZERO, cin * k,
              a.out_channels / a.groups * k);
  double outputs = 1.0 * in.dims[0] * a.out_channels * oh * ow;
  n.node.forward_flops = 2.0 * outputs * cin * k + (a.has_bias ? outputs : 0.0);
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, {in.dims[0], a.out_channels, oh, ow});
  return n.node.output;
}

namespace {
// Output size of pooling: floor or ceil mode; in ceil mode the last window must start inside
// the input or its left padding (Caffe's and PyTorch's rule).
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  int64_t span = in + 2 * p - k;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}
}  // namespace

int32_t GraphBuilder::pool2d(const std::string& name, int32_t x, const dlhost_pool2d_attrs& a) {
  const auto& in = checked_tensor(name, x);
  if (in.dtype != DLHOST_DTYPE_F32 || in.rank != 4)
    bad(name, "needs an F32 NCHW input, got " + shape_string(in));
  if (a.kind != DLHOST_POOL_MAX && a.kind != DLHOST_POOL_AVG)
    bad(name, "unknown pooling kind " + std::to_string(a.kind));
  if (a.kernel_h <= 0 || a.kernel_w <= 0 || a.stride_h <= 0 || a.stride_w <= 0 || a.pad_h < 0 ||
      a.pad_w < 0)
    bad(name, "kernel and stride must be > 0 and padding >= 0");
  if (a.pad_h * 2 > a.kernel_h || a.pad_w * 2 > a.kernel_w)
    bad(name, "padding must be at most half the kernel");
  int64_t h = in.dims[2], w = in.dims[3];
  if (h + 2 * a.pad_h < a.kernel_h || w + 2 * a.pad_w < a.kernel_w)
    bad(name, "window larger than the padded input " + shape_string(in));
  int64_t oh = pooled_size(h, a.kernel_h, a.stride_h, a.pad_h, a.ceil_mode != 0);
  int64_t ow = pooled_size(w, a.kernel_w, a.stride_w, a.pad_w, a.ceil_mode != 0);
  auto& n = add_node(DLHOST_OP_POOL2D, name, {x});
  n.pool = a;
  n.pool.struct_size = DLHOST_POOL2D_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.pool;
  n.node.forward_flops = 1.0 * in.dims[0] * in.dims[1] * oh * ow * a.kernel_h * a.kernel_w;
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, {in.dims[0], in.dims[1], oh, ow});
  return n.node.output;
}

int32_t GraphBuilder::activation(const std::string& name, int32_t x,
                                 const dlhost_activation_attrs& a) {
  const auto& in = checked_tensor(name, x);
  if (in.dtype != DLHOST_DTYPE_F32) bad(name, "needs an F32 input");
  if (a.kind < DLHOST_ACTIVATION_RELU || a.kind > DLHOST_ACTIVATION_TANH)
    bad(name, "unknown activation kind " + std::to_string(a.kind));
  std::vector<int64_t> dims(in.dims, in.dims + in.rank);
  double count = static_cast<double>(elements(in));
  auto& n = add_node(DLHOST_OP_ACTIVATION, name, {x});
  n.act = a;
  n.act.struct_size = DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.act;
  n.node.forward_flops = count;
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::softmax_cross_entropy(const std::string& name, int32_t logits,
                                            int32_t labels) {
  const auto& l = checked_tensor(name, logits);
  const auto& y = checked_tensor(name, labels);
  if (l.dtype != DLHOST_DTYPE_F32 || l.rank < 2)
    bad(name, "logits must be F32 [batch, ..., classes], got " + shape_string(l));
  bool same = y.rank == l.rank - 1;
  for (int32_t i = 0; same && i < y.rank; ++i) same = y.dims[i] == l.dims[i];
  if (y.dtype != DLHOST_DTYPE_I32 || !same)
    bad(name, "labels must be I32 of the logits' shape without the class dimension (logits " +
                  shape_string(l) + ", labels " + shape_string(y) + ")");
  if (graph_->loss_ >= 0) bad(name, "the graph already has a loss");
  double count = static_cast<double>(elements(l));
  auto& n = add_node(DLHOST_OP_SOFTMAX_CROSS_ENTROPY, name, {logits, labels});
  n.node.forward_flops = 3.0 * count;
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, {});
  graph_->loss_ = n.node.output;
  return n.node.output;
}

int32_t GraphBuilder::mse_loss(const std::string& name, int32_t prediction, int32_t target) {
  const auto& p = checked_tensor(name, prediction);
  const auto& t = checked_tensor(name, target);
  if (p.dtype != DLHOST_DTYPE_F32 || t.dtype != DLHOST_DTYPE_F32 || elements(p) != elements(t) ||
      p.dims[0] != t.dims[0])
    bad(name, "prediction " + shape_string(p) + " and target " + shape_string(t) +
                  " must be F32 with the same number of elements per sample");
  if (graph_->loss_ >= 0) bad(name, "the graph already has a loss");
  double count = static_cast<double>(elements(p));
  auto& n = add_node(DLHOST_OP_MSE_LOSS, name, {prediction, target});
  n.node.forward_flops = 3.0 * count;
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, {});
  graph_->loss_ = n.node.output;
  return n.node.output;
}

// --- ABI 1.1 ops -----------------------------------------------------------------------------

int32_t GraphBuilder::batch_norm(const std::string& name, int32_t x,
                                 const dlhost_batch_norm_attrs& a) {
  const auto& in = checked_tensor(name, x);
  if (in.dtype != DLHOST_DTYPE_F32 || (in.rank != 2 && in.rank != 4))
    bad(name, "needs an F32 input [N, C] or [N, C, H, W], got " + shape_string(in));
  if (!(a.epsilon > 0) || !(a.momentum >= 0 && a.momentum <= 1))
    bad(name, "epsilon must be > 0 and momentum in [0, 1]");
  std::vector<int64_t> dims(in.dims, in.dims + in.rank);
  int64_t channels = in.dims[1];
  double count = static_cast<double>(elements(in));
  auto& n = add_node(DLHOST_OP_BATCH_NORM, name, {x});
  n.bn = a;
  n.bn.struct_size = DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.bn;
  add_param(n, DLHOST_PARAM_SCALE, {channels}, DLHOST_INIT_ONE, channels, channels);
  add_param(n, DLHOST_PARAM_SHIFT, {channels}, DLHOST_INIT_ZERO, channels, channels);
  n.node.forward_flops = 4.0 * count;  // statistics (2) and the affine normalization (2)
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::dropout(const std::string& name, int32_t x, const dlhost_dropout_attrs& a) {
  const auto& in = checked_tensor(name, x);
  if (in.dtype != DLHOST_DTYPE_F32) bad(name, "needs an F32 input");
  if (!(a.probability >= 0 && a.probability < 1)) bad(name, "probability must be in [0, 1)");
  std::vector<int64_t> dims(in.dims, in.dims + in.rank);
  double count = static_cast<double>(elements(in));
  auto& n = add_node(DLHOST_OP_DROPOUT, name, {x});
  n.dropout = a;
  n.dropout.struct_size = DLHOST_DROPOUT_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.dropout;
  n.node.forward_flops = count;
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::add(const std::string& name, int32_t x, int32_t y) {
  const auto& a = checked_tensor(name, x);
  const auto& b = checked_tensor(name, y);
  bool same = a.rank == b.rank && a.dtype == DLHOST_DTYPE_F32 && b.dtype == DLHOST_DTYPE_F32;
  for (int32_t i = 0; same && i < a.rank; ++i) same = a.dims[i] == b.dims[i];
  if (!same)
    bad(name, "adds F32 tensors of one shape, got " + shape_string(a) + " and " + shape_string(b));
  std::vector<int64_t> dims(a.dims, a.dims + a.rank);
  double count = static_cast<double>(elements(a));
  auto& n = add_node(DLHOST_OP_ADD, name, {x, y});
  n.node.forward_flops = count;
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::lrn(const std::string& name, int32_t x, const dlhost_lrn_attrs& a) {
  const auto& in = checked_tensor(name, x);
  if (in.dtype != DLHOST_DTYPE_F32 || in.rank != 4)
    bad(name, "needs an F32 NCHW input, got " + shape_string(in));
  if (a.size <= 0 || a.size % 2 == 0) bad(name, "size must be odd and > 0");
  if (!(a.k > 0) || !(a.beta > 0) || !(a.alpha >= 0))
    bad(name, "k and beta must be > 0 and alpha >= 0");
  std::vector<int64_t> dims(in.dims, in.dims + in.rank);
  double count = static_cast<double>(elements(in));
  auto& n = add_node(DLHOST_OP_LRN, name, {x});
  n.lrn = a;
  n.lrn.struct_size = DLHOST_LRN_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.lrn;
  n.node.forward_flops = count * static_cast<double>(a.size + 3);
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::embedding(const std::string& name, int32_t ids,
                                const dlhost_embedding_attrs& a) {
  const auto& in = checked_tensor(name, ids);
  if (in.dtype != DLHOST_DTYPE_I32 || in.rank != 2)
    bad(name, "needs I32 token ids [N, T], got " + shape_string(in));
  if (a.vocab <= 0 || a.dim <= 0) bad(name, "vocab and dim must be > 0");
  std::vector<int64_t> dims{in.dims[0], in.dims[1], a.dim};
  auto& n = add_node(DLHOST_OP_EMBEDDING, name, {ids});
  n.embedding = a;
  n.embedding.struct_size = DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.embedding;
  add_param(n, DLHOST_PARAM_EMBEDDING, {a.vocab, a.dim}, DLHOST_INIT_UNIFORM, a.dim, a.vocab);
  n.node.forward_flops = 0;  // a gather: no arithmetic
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::lstm(const std::string& name, int32_t x, const dlhost_lstm_attrs& a) {
  const auto& in = checked_tensor(name, x);
  if (in.dtype != DLHOST_DTYPE_F32 || in.rank != 3)
    bad(name, "needs an F32 input [N, T, C], got " + shape_string(in));
  if (a.hidden <= 0 || a.layers <= 0) bad(name, "hidden and layers must be > 0");
  int64_t batch = in.dims[0], steps = in.dims[1], channels = in.dims[2], h = a.hidden;
  auto& n = add_node(DLHOST_OP_LSTM, name, {x});
  n.lstm = a;
  n.lstm.struct_size = DLHOST_LSTM_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.lstm;
  double flops = 0;
  for (int64_t l = 0; l < a.layers; ++l) {
    int64_t c = l == 0 ? channels : h;
    std::string layer = "l" + std::to_string(l) + ".";
    add_param(n, DLHOST_PARAM_WEIGHT, {4 * h, c}, DLHOST_INIT_UNIFORM, h, 4 * h, layer + "weight");
    add_param(n, DLHOST_PARAM_WEIGHT_ITER, {4 * h, h}, DLHOST_INIT_UNIFORM, h, 4 * h,
              layer + "weight_iter");
    add_param(n, DLHOST_PARAM_BIAS, {4 * h}, DLHOST_INIT_UNIFORM, h, 4 * h, layer + "bias");
    // Gate pre-activations (two GEMMs and the bias), then ~3 element-wise ops per gate unit.
    flops += static_cast<double>(batch * steps) * (2.0 * 4 * h * (c + h) + 4.0 * h + 12.0 * h);
  }
  n.node.forward_flops = flops;
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, {batch, steps, h});
  return n.node.output;
}

int32_t GraphBuilder::global_avg_pool(const std::string& name, int32_t x) {
  const auto& in = checked_tensor(name, x);
  if (in.dtype != DLHOST_DTYPE_F32 || in.rank != 4)
    bad(name, "needs an F32 NCHW input, got " + shape_string(in));
  std::vector<int64_t> dims{in.dims[0], in.dims[1]};
  double count = static_cast<double>(elements(in));
  auto& n = add_node(DLHOST_OP_GLOBAL_AVG_POOL, name, {x});
  n.node.forward_flops = count;
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

std::unique_ptr<Graph> GraphBuilder::finish() {
  if (!graph_) throw Error(DLHOST_CODE_FAILED_PRECONDITION, "graph builder already finished");
  if (graph_->loss_ < 0)
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                "network '" + graph_->network_ + "' has no loss layer");
  graph_->finish();
  return std::move(graph_);
}

// --- the C builder table ---------------------------------------------------------------------

namespace {

// The C builder table: one short entry per call of dlhost_builder_api, in the table's order, each
// forwarding to GraphBuilder inside a guard.
// long-function: flat, one short entry per call of the table; split, it would scatter the table.
dlhost_builder_api make_builder_api() {
  dlhost_builder_api t{};
  t.struct_size = DLHOST_BUILDER_API_STRUCT_SIZE;
  t.input = [](dlhost_graph_builder* b, const char* name, int32_t dtype, int32_t rank,
               const int64_t* dims, int32_t* out) {
    return call(out, [&] {
      if (rank < 0 || (rank > 0 && dims == nullptr))
        throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                    "input '" + str(name) + "': bad rank or NULL dims");
      return unwrap(b).input(str(name), static_cast<dlhost_dtype>(dtype),
                             std::vector<int64_t>(dims, dims + rank));
    });
  };
  t.fc = [](dlhost_graph_builder* b, const char* name, int32_t x, const dlhost_fc_attrs* a,
            int32_t* out) {
    return call(out, [&] {
      // A 1.0 plugin's struct ends before batch_dims: read what it has, default the rest.
      dlhost_fc_attrs attrs{};
      attrs.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE;
      if (a == nullptr || a->struct_size < DLHOST_FC_ATTRS_STRUCT_SIZE_1_0)
        throw Error(DLHOST_CODE_INVALID_ARGUMENT, "fc attrs missing or smaller than ABI 1.0's");
      attrs.out_features = a->out_features;
      attrs.has_bias = a->has_bias;
      attrs.batch_dims = DLHOST_HAS_FIELD(a, dlhost_fc_attrs, batch_dims) ? a->batch_dims : 1;
      return unwrap(b).fc(str(name), x, attrs);
    });
  };
  t.conv2d = [](dlhost_graph_builder* b, const char* name, int32_t x, const dlhost_conv2d_attrs* a,
                int32_t* out) {
    return call(out, [&] {
      return unwrap(b).conv2d(str(name), x,
                              checked_attrs(a, DLHOST_CONV2D_ATTRS_STRUCT_SIZE, "conv2d"));
    });
  };
  t.pool2d = [](dlhost_graph_builder* b, const char* name, int32_t x, const dlhost_pool2d_attrs* a,
                int32_t* out) {
    return call(out, [&] {
      return unwrap(b).pool2d(str(name), x,
                              checked_attrs(a, DLHOST_POOL2D_ATTRS_STRUCT_SIZE, "pool2d"));
    });
  };
  t.activation = [](dlhost_graph_builder* b, const char* name, int32_t x,
                    const dlhost_activation_attrs* a, int32_t* out) {
    return call(out, [&] {
      return unwrap(b).activation(
          str(name), x, checked_attrs(a, DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE, "activation"));
    });
  };
  t.softmax_cross_entropy = [](dlhost_graph_builder* b, const char* name, int32_t logits,
                               int32_t labels, int32_t* out) {
    return call(out, [&] { return unwrap(b).softmax_cross_entropy(str(name), logits, labels); });
  };
  t.mse_loss = [](dlhost_graph_builder* b, const char* name, int32_t prediction, int32_t target,
                  int32_t* out) {
    return call(out, [&] { return unwrap(b).mse_loss(str(name), prediction, target); });
  };
  t.batch_norm = [](dlhost_graph_builder* b, const char* name, int32_t x,
                    const dlhost_batch_norm_attrs* a, int32_t* out) {
    return call(out, [&] {
      return unwrap(b).batch_norm(
          str(name), x, checked_attrs(a, DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE, "batch_norm"));
    });
  };
  t.dropout = [](dlhost_graph_builder* b, const char* name, int32_t x,
                 const dlhost_dropout_attrs* a, int32_t* out) {
    return call(out, [&] {
      return unwrap(b).dropout(str(name), x,
                               checked_attrs(a, DLHOST_DROPOUT_ATTRS_STRUCT_SIZE, "dropout"));
    });
  };
  t.add = [](dlhost_graph_builder* b, const char* name, int32_t x, int32_t y, int32_t* out) {
    return call(out, [&] { return unwrap(b).add(str(name), x, y); });
  };
  t.lrn = [](dlhost_graph_builder* b, const char* name, int32_t x, const dlhost_lrn_attrs* a,
             int32_t* out) {
    return call(out, [&] {
      return unwrap(b).lrn(str(name), x, checked_attrs(a, DLHOST_LRN_ATTRS_STRUCT_SIZE, "lrn"));
    });
  };
  t.embedding = [](dlhost_graph_builder* b, const char* name, int32_t ids,
                   const dlhost_embedding_attrs* a, int32_t* out) {
    return call(out, [&] {
      return unwrap(b).embedding(str(name), ids,
                                 checked_attrs(a, DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE, "embedding"));
    });
  };
  t.lstm = [](dlhost_graph_builder* b, const char* name, int32_t x, const dlhost_lstm_attrs* a,
              int32_t* out) {
    return call(out, [&] {
      return unwrap(b).lstm(str(name), x, checked_attrs(a, DLHOST_LSTM_ATTRS_STRUCT_SIZE, "lstm"));
    });
  };
  t.global_avg_pool = [](dlhost_graph_builder* b, const char* name, int32_t x, int32_t* out) {
    return call(out, [&] { return unwrap(b).global_avg_pool(str(name), x); });
  };
  GraphBuilder::fill_transformer_entries(t);
  return t;
}

}  // namespace

const dlhost_builder_api* GraphBuilder::c_api() {
  static const dlhost_builder_api table = make_builder_api();
  return &table;
}

std::unique_ptr<Graph> build_network(const LoadedPlugin& plugin, int32_t index, int64_t batch,
                                     const dlhost_options* options) {
  const dlhost_network_api* api = plugin.table->network;
  const dlhost_network_info* info = nullptr;
  check_status(api->info(index, &info), "network plugin '" + plugin.name + "'");
  std::string name = info != nullptr && info->name != nullptr ? info->name : "?";
  GraphBuilder builder(name, batch);
  check_status(api->build(index, GraphBuilder::c_api(), builder.c_handle(), options),
               "building network '" + name + "' (plugin " + plugin.path + ")");
  return builder.finish();
}

}  // namespace dlhost
