// graph.cpp — shape inference, parameter creation and FLOP counting for the host-owned graph IR,
// and the C builder table that network plugins call.
//
// FLOPs are forward FLOPs per mini-batch: a multiply-add counts 2, a bias add, an activation or
// a pooling window element counts 1 per element, as the usual conv-net tables count them.
#include "graph.h"

#include <numeric>
#include <sstream>
#include <unordered_set>

#include "host_api.h"
#include "plugin_registry.h"

namespace dlhost {

namespace {

std::string shape_string(const dlhost_tensor_desc& t) {
  std::ostringstream os;
  for (int32_t i = 0; i < t.rank; ++i) os << (i ? "x" : "") << t.dims[i];
  if (t.rank == 0) os << "scalar";
  return os.str();
}

int64_t elements(const dlhost_tensor_desc& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

[[noreturn]] void bad(const std::string& layer, const std::string& what) {
  throw Error(DLHOST_CODE_INVALID_ARGUMENT, "layer '" + layer + "': " + what);
}

}  // namespace

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

std::string Graph::input_shape() const {
  for (int32_t id : inputs_) {
    const auto& t = tensors_[id].desc;
    if (t.dtype != DLHOST_DTYPE_F32) continue;
    std::ostringstream os;
    for (int32_t i = 1; i < t.rank; ++i) os << (i > 1 ? "x" : "") << t.dims[i];
    return os.str();
  }
  return "";
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
                                int64_t fan_out) {
  auto& p = graph_->params_.emplace_back();
  p.name = node.name + (role == DLHOST_PARAM_WEIGHT ? ".weight" : ".bias");
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
    bad(name, "inputs are F32 (data) or I32 (class labels)");
  if (dtype == DLHOST_DTYPE_I32 && !per_sample.empty())
    bad(name, "class labels are one I32 per sample (per-sample rank 0)");
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
  if (in.dtype != DLHOST_DTYPE_F32 || in.rank < 2)
    bad(name, "needs an F32 input of rank >= 2, got " + shape_string(in));
  if (attrs.out_features <= 0) bad(name, "out_features must be > 0");
  int64_t batch = in.dims[0];
  int64_t features = elements(in) / batch;
  auto& n = add_node(DLHOST_OP_FC, name, {x});
  n.fc = attrs;
  n.fc.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.fc;
  add_param(n, DLHOST_PARAM_WEIGHT, {attrs.out_features, features}, DLHOST_INIT_XAVIER_UNIFORM,
            features, attrs.out_features);
  if (attrs.has_bias)
    add_param(n, DLHOST_PARAM_BIAS, {attrs.out_features}, DLHOST_INIT_ZERO, features,
              attrs.out_features);
  n.node.forward_flops = 2.0 * batch * features * attrs.out_features +
                         (attrs.has_bias ? 1.0 * batch * attrs.out_features : 0.0);
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, {batch, attrs.out_features});
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
  if (l.dtype != DLHOST_DTYPE_F32 || l.rank != 2)
    bad(name, "logits must be F32 [batch, classes], got " + shape_string(l));
  if (y.dtype != DLHOST_DTYPE_I32 || y.rank != 1 || y.dims[0] != l.dims[0])
    bad(name, "labels must be an I32 input of one class id per sample");
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

GraphBuilder& unwrap(dlhost_graph_builder* b) {
  if (b == nullptr) throw Error(DLHOST_CODE_INVALID_ARGUMENT, "NULL graph builder");
  return *reinterpret_cast<GraphBuilder*>(b);
}

// An attrs struct shorter than ABI 1.0's is refused rather than read past its end.
template <class Attrs>
Attrs checked_attrs(const Attrs* a, size_t min_size, const char* what) {
  if (a == nullptr || a->struct_size < min_size)
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                std::string(what) + " attrs missing or smaller than ABI 1.0's");
  return *a;
}

template <class Fn>
dlhost_status* call(int32_t* out, Fn&& fn) {
  return guard_status([&] {
    if (out == nullptr) throw Error(DLHOST_CODE_INVALID_ARGUMENT, "NULL out pointer");
    int32_t id = fn();
    *out = id;
  });
}

std::string str(const char* s) { return s != nullptr ? s : ""; }

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
      return unwrap(b).fc(str(name), x, checked_attrs(a, DLHOST_FC_ATTRS_STRUCT_SIZE, "fc"));
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
