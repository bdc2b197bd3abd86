// model.cpp — compiling a dlhost graph into buffers and per-node closures, and running the
// training step (forward, backward with grad_ready, SGD update) over them. See model.h.
#include "model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "dlhost/common.hpp"
#include "dlhost/graph_access.hpp"
#include "ops.h"

namespace cpu_reference {

namespace sdk = dlhost::sdk;

namespace {

using sdk::node_label;

// The node's attribute struct, refused when it is missing or shorter than `min_size`.
template <class Attrs>
const Attrs& attrs_of(const dlhost_node& node, size_t min_size) {
  return sdk::node_attrs<Attrs>(node, min_size);
}

}  // namespace

// --- compile -----------------------------------------------------------------------------------

Model::Model(const dlhost_graph& graph, const dlhost_optimizer_desc& optimizer,
             const Settings& settings)
    : graph_(&graph), settings_(settings) {
  if (graph.struct_size < DLHOST_GRAPH_STRUCT_SIZE)
    sdk::invalid("cpu_reference: graph struct smaller than ABI 1.0's");
  if (optimizer.struct_size < DLHOST_OPTIMIZER_DESC_STRUCT_SIZE_1_0)
    sdk::invalid("cpu_reference: optimizer struct smaller than ABI 1.0's");
  if (optimizer.kind != DLHOST_OPTIMIZER_SGD && optimizer.kind != DLHOST_OPTIMIZER_ADAMW)
    sdk::unimplemented("cpu_reference: optimizer kind " + std::to_string(optimizer.kind) +
                       " (SGD and AdamW)");
  optimizer_kind_ = optimizer.kind;
  if (optimizer_kind_ == DLHOST_OPTIMIZER_ADAMW) {
    beta1_ = optimizer.beta1;  // the kit completed an older struct with the defaults
    beta2_ = optimizer.beta2;
    adam_epsilon_ = optimizer.epsilon;
  }
  learning_rate_ = optimizer.learning_rate;
  momentum_ = optimizer.momentum;
  weight_decay_ = optimizer.weight_decay;
  clip_norm_ = optimizer.clip_norm;

  // Every tensor: values for all, gradients for the F32 ones the graph computes.
  tensors_.resize(static_cast<size_t>(graph.num_tensors));
  for (int32_t id = 0; id < graph.num_tensors; ++id) {
    const dlhost_tensor_desc& desc = *graph.tensors[id];
    Tensor& t = tensors_[id];
    t.name = desc.name != nullptr ? desc.name : "";
    t.dtype = desc.dtype;
    t.dims.assign(desc.dims, desc.dims + desc.rank);
    for (int64_t d : t.dims) t.count *= d;
  }
  for (int32_t k = 0; k < graph.num_inputs; ++k) {
    if (graph.inputs[k] < 0 || graph.inputs[k] >= graph.num_tensors)
      sdk::invalid("cpu_reference: graph input id out of range");
    tensors_[graph.inputs[k]].is_input = true;
  }
  for (Tensor& t : tensors_) {
    if (t.dtype == DLHOST_DTYPE_F32) {
      t.value.assign(static_cast<size_t>(t.count), 0.0f);
      if (!t.is_input) t.grad.assign(static_cast<size_t>(t.count), 0.0f);
    } else if (t.dtype == DLHOST_DTYPE_I32 && t.is_input) {
      t.ids.assign(static_cast<size_t>(t.count), 0);
    } else {
      sdk::unimplemented("cpu_reference: tensor '" + t.name + "' of dtype " +
                         std::to_string(t.dtype) + " (only F32 tensors and I32 inputs)");
    }
    workspace_bytes_ += 4 * (t.value.size() + t.grad.size() + t.ids.size());
  }

  params_.resize(static_cast<size_t>(graph.num_params));
  for (int32_t id = 0; id < graph.num_params; ++id) {
    const dlhost_param_desc& desc = *graph.params[id];
    Param& p = params_[id];
    p.name = desc.name != nullptr ? desc.name : "";
    p.count = desc.count;
    p.value.assign(static_cast<size_t>(p.count), 0.0f);
    p.grad.assign(static_cast<size_t>(p.count), 0.0f);
    if (momentum_ != 0.0f && optimizer_kind_ == DLHOST_OPTIMIZER_SGD)
      p.velocity.assign(static_cast<size_t>(p.count), 0.0f);
    if (optimizer_kind_ == DLHOST_OPTIMIZER_ADAMW) {
      p.moment1.assign(static_cast<size_t>(p.count), 0.0f);
      p.moment2.assign(static_cast<size_t>(p.count), 0.0f);
    }
    param_bytes_ += 4 * p.value.size();
    workspace_bytes_ +=
        4 * (p.grad.size() + p.velocity.size() + p.moment1.size() + p.moment2.size());
  }

  if (graph.loss < 0 || graph.loss >= graph.num_tensors || tensors_[graph.loss].count != 1)
    sdk::invalid("cpu_reference: the graph's loss is not a scalar tensor");
  loss_tensor_ = graph.loss;

  step_of_node_.assign(static_cast<size_t>(graph.num_nodes), -1);
  for (int32_t i = 0; i < graph.num_nodes; ++i) {
    const dlhost_node& node = *graph.nodes[i];
    if (node.struct_size < DLHOST_NODE_STRUCT_SIZE)
      sdk::invalid("cpu_reference: node struct smaller than ABI 1.0's");
    lower(static_cast<uint32_t>(i), node);
  }
  graph_ = nullptr;  // borrowed for compile only
  implementation_ =
      "reference: textbook loops (float32 values, double sums), im2col + OpenBLAS sgemm";
}

void Model::lower(uint32_t index, const dlhost_node& node) {
  if (node.op == DLHOST_OP_INPUT) return;  // set_input fills it; nothing to run
  Step step;
  for (int32_t k = 0; k < node.num_params; ++k) step.params.push_back(node.params[k]);
  if (node.output < 0 || node.output >= static_cast<int32_t>(tensors_.size()))
    sdk::invalid("cpu_reference: " + node_label(node) + " has no valid output");
  switch (node.op) {
    case DLHOST_OP_FC:
      lower_fc(node, step);
      break;
    case DLHOST_OP_CONV2D:
      lower_conv2d(node, step);
      break;
    case DLHOST_OP_POOL2D:
      lower_pool2d(node, step);
      break;
    case DLHOST_OP_ACTIVATION:
      lower_activation(node, step);
      break;
    case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
      lower_softmax_cross_entropy(node, step);
      break;
    case DLHOST_OP_MSE_LOSS:
      lower_mse_loss(node, step);
      break;
    case DLHOST_OP_BATCH_NORM:
      lower_batch_norm(node, step);
      break;
    case DLHOST_OP_DROPOUT:
      lower_dropout(index, node, step);
      break;
    case DLHOST_OP_ADD:
      lower_add(node, step);
      break;
    case DLHOST_OP_LRN:
      lower_lrn(node, step);
      break;
    case DLHOST_OP_EMBEDDING:
      lower_embedding(node, step);
      break;
    case DLHOST_OP_LSTM:
      lower_lstm(node, step);
      break;
    case DLHOST_OP_GLOBAL_AVG_POOL:
      lower_global_avg_pool(node, step);
      break;
    case DLHOST_OP_LAYER_NORM:
    case DLHOST_OP_GELU:
    case DLHOST_OP_ATTENTION:
    case DLHOST_OP_POSITION_EMBEDDING:
    case DLHOST_OP_TIED_FC:
      lower_transformer(index, node, step);
      break;
    default:
      sdk::unimplemented("cpu_reference: op " + std::to_string(node.op) + " (" +
                         sdk::op_name(node.op) + ") of " + node_label(node) +
                         " is not implemented");
  }
  step_of_node_[index] = static_cast<int32_t>(steps_.size());
  steps_.push_back(std::move(step));
}

void Model::lower_fc(const dlhost_node& node, Step& step) {
  const FcShape s = sdk::fc_geometry(*graph_, node);  // checks inputs, attributes, W and b
  const int32_t x = node.inputs[0], y = node.output;
  if (tensor(y).count != s.rows * s.out)
    sdk::invalid("cpu_reference: " + node_label(node) + ": fc output does not agree");
  const auto& a = attrs_of<dlhost_fc_attrs>(node, DLHOST_FC_ATTRS_STRUCT_SIZE_1_0);
  Param& w = param(node.params[0]);
  Param* b = a.has_bias ? &param(node.params[1]) : nullptr;
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  float *W = w.value.data(), *dW = w.grad.data();
  float* B = b != nullptr ? b->value.data() : nullptr;
  float* dB = b != nullptr ? b->grad.data() : nullptr;
  step.forward = [=] { fc_forward(s, X, W, B, Y); };
  step.backward = [=] { fc_backward(s, X, W, dY, dX, dW, dB); };
}

void Model::lower_conv2d(const dlhost_node& node, Step& step) {
  const ConvShape s = sdk::conv2d_geometry(*graph_, node);  // checks inputs, attributes, W and b
  const auto& a = attrs_of<dlhost_conv2d_attrs>(node, DLHOST_CONV2D_ATTRS_STRUCT_SIZE);
  const int32_t x = node.inputs[0], y = node.output;
  expect_output(node, {s.n, s.oc, s.oh, s.ow});
  Param& w = param(node.params[0]);
  Param* b = a.has_bias ? &param(node.params[1]) : nullptr;
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  float *W = w.value.data(), *dW = w.grad.data();
  float* B = b != nullptr ? b->value.data() : nullptr;
  float* dB = b != nullptr ? b->grad.data() : nullptr;
  float* col = scratch_floats(conv2d_col_size(s));
  step.forward = [=] { conv2d_forward(s, X, W, B, Y, col); };
  step.backward = [=] { conv2d_backward(s, X, W, dY, dX, dW, dB, col); };
}

void Model::lower_pool2d(const dlhost_node& node, Step& step) {
  const auto& a = attrs_of<dlhost_pool2d_attrs>(node, DLHOST_POOL2D_ATTRS_STRUCT_SIZE);
  if (a.kind != DLHOST_POOL_MAX && a.kind != DLHOST_POOL_AVG)
    sdk::unimplemented("cpu_reference: " + node_label(node) + ": pooling kind " +
                       std::to_string(a.kind));
  PoolShape s;
  static_cast<sdk::Geometry2d&>(s) = sdk::pool2d_geometry(*graph_, node);
  const int32_t x = node.inputs[0], y = node.output;
  expect_output(node, {s.n, s.c, s.oh, s.ow});
  s.max = a.kind == DLHOST_POOL_MAX;
  s.count_include_pad = a.count_include_pad != 0;
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  int64_t* argmax = s.max ? scratch_indices(tensor(y).count) : nullptr;
  step.forward = [=] { pool2d_forward(s, X, Y, argmax); };
  step.backward = [=] { pool2d_backward(s, argmax, dY, dX); };
}

void Model::lower_activation(const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 1);
  const auto& a = attrs_of<dlhost_activation_attrs>(node, DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE);
  Activation kind;
  switch (a.kind) {
    case DLHOST_ACTIVATION_RELU:
      kind = Activation::kRelu;
      break;
    case DLHOST_ACTIVATION_SIGMOID:
      kind = Activation::kSigmoid;
      break;
    case DLHOST_ACTIVATION_TANH:
      kind = Activation::kTanh;
      break;
    default:
      sdk::unimplemented("cpu_reference: " + node_label(node) + ": activation kind " +
                         std::to_string(a.kind));
  }
  const int32_t x = node.inputs[0], y = node.output;
  const int64_t n = tensor(x).count;
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  step.forward = [=] { activation_forward(kind, n, X, Y); };
  step.backward = [=] { activation_backward(kind, n, X, Y, dY, dX); };
}

void Model::lower_softmax_cross_entropy(const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 2);
  const int32_t x = node.inputs[0], labels = node.inputs[1], y = node.output;
  const Tensor& logits = tensor(x);
  if (logits.dims.size() < 2)
    sdk::invalid("cpu_reference: " + node_label(node) + ": logits need a class dimension");
  const int64_t classes = logits.dims.back();
  const int64_t positions = logits.count / classes;
  if (tensor(labels).count != positions)
    sdk::invalid("cpu_reference: " + node_label(node) + ": one label per position expected");
  float *X = value(x), *dX = grad(x), *L = value(y), *dL = grad(y);
  const int32_t* ids_ptr = ids(labels);
  step.forward = [=] { *L = softmax_cross_entropy_forward(positions, classes, X, ids_ptr); };
  step.backward = [=] { softmax_cross_entropy_backward(positions, classes, X, ids_ptr, *dL, dX); };
}

void Model::lower_mse_loss(const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 2);
  const int32_t x = node.inputs[0], t = node.inputs[1], y = node.output;
  const int64_t n = tensor(x).count;
  if (tensor(t).count != n)
    sdk::invalid("cpu_reference: " + node_label(node) + ": prediction and target sizes differ");
  // A target that is a graph input has no gradient buffer (null); a computed one gets -dx.
  float *X = value(x), *T = value(t), *dX = grad(x), *dT = grad(t), *L = value(y), *dL = grad(y);
  step.forward = [=] { *L = mse_forward(n, X, T); };
  step.backward = [=] { mse_backward(n, X, T, *dL, dX, dT); };
}

void Model::lower_batch_norm(const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 1);
  const auto& a = attrs_of<dlhost_batch_norm_attrs>(node, DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE);
  const int32_t x = node.inputs[0], y = node.output;
  const Tensor& in = tensor(x);
  if (in.dims.size() != 2 && in.dims.size() != 4)
    sdk::invalid("cpu_reference: " + node_label(node) + ": batch_norm wants rank 2 or 4");
  BatchNormShape s;
  s.batch = in.dims[0];
  s.channels = in.dims[1];
  s.spatial = in.dims.size() == 4 ? in.dims[2] * in.dims[3] : 1;
  s.epsilon = a.epsilon;
  s.momentum = a.momentum;
  if (node.num_params != 2 || param(node.params[0]).count != s.channels ||
      param(node.params[1]).count != s.channels)
    sdk::invalid("cpu_reference: " + node_label(node) + ": batch_norm wants scale and shift [C]");
  Param &scale = param(node.params[0]), &shift = param(node.params[1]);
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  float *S = scale.value.data(), *dS = scale.grad.data();
  float *B = shift.value.data(), *dB = shift.grad.data();
  double* mean = scratch_doubles(s.channels, 0.0);
  double* inv_std = scratch_doubles(s.channels, 0.0);
  // Running statistics start as PyTorch's: mean 0, variance 1.
  double* running_mean = scratch_doubles(s.channels, 0.0);
  double* running_var = scratch_doubles(s.channels, 1.0);
  step.forward = [=] {
    batch_norm_forward(s, X, S, B, Y, mean, inv_std, running_mean, running_var);
  };
  step.backward = [=] { batch_norm_backward(s, X, S, mean, inv_std, dY, dX, dS, dB); };
}

void Model::lower_dropout(uint32_t index, const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 1);
  const auto& a = attrs_of<dlhost_dropout_attrs>(node, DLHOST_DROPOUT_ATTRS_STRUCT_SIZE);
  if (!(a.probability >= 0.0f && a.probability < 1.0f))
    sdk::invalid("cpu_reference: " + node_label(node) + ": dropout probability outside [0, 1)");
  const int32_t x = node.inputs[0], y = node.output;
  const int64_t n = tensor(x).count;
  const float p = a.probability;
  const uint64_t seed = settings_.seed;
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  float* mask = scratch_floats(n);
  const uint64_t* calls = &forward_calls_;  // the step: forward calls made before this one
  step.forward = [=] { dropout_forward(seed, index, *calls, p, n, X, Y, mask); };
  step.backward = [=] { dropout_backward(n, mask, dY, dX); };
}

void Model::lower_add(const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 2);
  const int32_t a = node.inputs[0], b = node.inputs[1], y = node.output;
  const int64_t n = tensor(y).count;
  if (tensor(a).count != n || tensor(b).count != n)
    sdk::invalid("cpu_reference: " + node_label(node) + ": add wants tensors of one shape");
  float *A = value(a), *B = value(b), *Y = value(y), *dA = grad(a), *dB = grad(b), *dY = grad(y);
  step.forward = [=] { add_forward(n, A, B, Y); };
  step.backward = [=] { add_backward(n, dY, dA, dB); };
}

void Model::lower_lrn(const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 1);
  const auto& a = attrs_of<dlhost_lrn_attrs>(node, DLHOST_LRN_ATTRS_STRUCT_SIZE);
  const int32_t x = node.inputs[0], y = node.output;
  const Tensor& in = tensor(x);
  if (in.dims.size() != 4 || a.size <= 0 || a.size % 2 == 0)
    sdk::invalid("cpu_reference: " + node_label(node) + ": lrn wants NCHW and an odd size");
  LrnShape s;
  s.batch = in.dims[0];
  s.channels = in.dims[1];
  s.spatial = in.dims[2] * in.dims[3];
  s.size = a.size;
  s.alpha = a.alpha;
  s.beta = a.beta;
  s.k = a.k;
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  float* denominator = scratch_floats(in.count);
  step.forward = [=] { lrn_forward(s, X, Y, denominator); };
  step.backward = [=] { lrn_backward(s, X, denominator, dY, dX); };
}

void Model::lower_embedding(const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 1);
  const auto& a = attrs_of<dlhost_embedding_attrs>(node, DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE);
  const int32_t x = node.inputs[0], y = node.output;
  const int64_t rows = tensor(x).count;
  if (node.num_params != 1 || param(node.params[0]).count != a.vocab * a.dim ||
      tensor(y).count != rows * a.dim)
    sdk::invalid("cpu_reference: " + node_label(node) + ": embedding shapes do not agree");
  const int64_t vocab = a.vocab, dim = a.dim;
  Param& table = param(node.params[0]);
  const int32_t* I = ids(x);
  float *E = table.value.data(), *dE = table.grad.data(), *Y = value(y), *dY = grad(y);
  step.forward = [=] { embedding_forward(rows, vocab, dim, I, E, Y); };
  step.backward = [=] { embedding_backward(rows, vocab, dim, I, dY, dE); };
}

void Model::lower_lstm(const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 1);
  const auto& a = attrs_of<dlhost_lstm_attrs>(node, DLHOST_LSTM_ATTRS_STRUCT_SIZE);
  const int32_t x = node.inputs[0], y = node.output;
  const Tensor& in = tensor(x);
  if (in.dims.size() != 3 || a.hidden <= 0 || a.layers <= 0 || node.num_params != 3 * a.layers)
    sdk::invalid("cpu_reference: " + node_label(node) +
                 ": lstm wants [N, T, C] and 3 params a layer");
  const int64_t N = in.dims[0], T = in.dims[1], H = a.hidden, L = a.layers;

  // Per layer: its shape, parameters, saved gates and cells, and where its h sequence (and the
  // gradient arriving at it) lives. The last layer's h is the node's output.
  struct Layer {
    LstmShape s;
    const float *w, *w_iter, *b;
    float *dw, *dw_iter, *db;
    float *gates, *c, *h, *dh;
    const float* x;
    float* dx;
  };
  std::vector<Layer> layers(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) {
    Layer& ly = layers[l];
    ly.s = LstmShape{N, T, l == 0 ? in.dims[2] : H, H};
    Param &w = param(node.params[3 * l]), &wi = param(node.params[3 * l + 1]),
          &b = param(node.params[3 * l + 2]);
    if (w.count != 4 * H * ly.s.in || wi.count != 4 * H * H || b.count != 4 * H)
      sdk::invalid("cpu_reference: " + node_label(node) + ": lstm layer " + std::to_string(l) +
                   " parameters do not have the canonical shapes");
    ly.w = w.value.data();
    ly.w_iter = wi.value.data();
    ly.b = b.value.data();
    ly.dw = w.grad.data();
    ly.dw_iter = wi.grad.data();
    ly.db = b.grad.data();
    ly.gates = scratch_floats(N * T * 4 * H);
    ly.c = scratch_floats(N * T * H);
    if (l == L - 1) {
      ly.h = value(y);
      ly.dh = grad(y);
    } else {
      ly.h = scratch_floats(N * T * H);
      ly.dh = scratch_floats(N * T * H);
    }
  }
  for (int64_t l = 0; l < L; ++l) {
    layers[l].x = l == 0 ? value(x) : layers[l - 1].h;
    layers[l].dx = l == 0 ? grad(x) : layers[l - 1].dh;
  }
  float* dgates = scratch_floats(N * T * 4 * H);
  float* carry = scratch_floats(2 * N * H);
  step.forward = [=] {
    for (const Layer& ly : layers)
      lstm_layer_forward(ly.s, ly.x, ly.w, ly.w_iter, ly.b, ly.gates, ly.c, ly.h);
  };
  step.backward = [=] {
    // The lower layers' dh buffers collect what the layer above sends: start them at zero.
    for (int64_t l = 0; l + 1 < L; ++l) std::fill(layers[l].dh, layers[l].dh + N * T * H, 0.0f);
    for (int64_t l = L - 1; l >= 0; --l) {
      const Layer& ly = layers[l];
      lstm_layer_backward(ly.s, ly.x, ly.w, ly.w_iter, ly.gates, ly.c, ly.h, ly.dh, ly.dx, ly.dw,
                          ly.dw_iter, ly.db, dgates, carry);
    }
  };
}

void Model::lower_global_avg_pool(const dlhost_node& node, Step& step) {
  sdk::expect_inputs(*graph_, node, 1);
  const int32_t x = node.inputs[0], y = node.output;
  const Tensor& in = tensor(x);
  if (in.dims.size() != 4)
    sdk::invalid("cpu_reference: " + node_label(node) + ": global_avg_pool wants NCHW");
  const int64_t planes = in.dims[0] * in.dims[1], spatial = in.dims[2] * in.dims[3];
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  step.forward = [=] { global_avg_pool_forward(planes, spatial, X, Y); };
  step.backward = [=] { global_avg_pool_backward(planes, spatial, dY, dX); };
}

// --- accessors -------------------------------------------------------------------------------

void Model::expect_output(const dlhost_node& node, std::initializer_list<int64_t> dims) const {
  const Tensor& out = tensor(node.output);
  if (!std::equal(out.dims.begin(), out.dims.end(), dims.begin(), dims.end()))
    sdk::invalid("cpu_reference: " + node_label(node) + ": its output's shape is not what its " +
                 sdk::op_name(node.op) + " geometry gives");
}

const Model::Tensor& Model::tensor(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(tensors_.size()))
    sdk::invalid("cpu_reference: tensor id " + std::to_string(id) + " out of range");
  return tensors_[id];
}

float* Model::value(int32_t id) {
  const Tensor& t = tensor(id);
  if (t.dtype != DLHOST_DTYPE_F32)
    sdk::invalid("cpu_reference: tensor '" + t.name + "' is not F32");
  return tensors_[id].value.data();
}

float* Model::grad(int32_t id) {
  tensor(id);  // range check
  Tensor& t = tensors_[id];
  return t.grad.empty() ? nullptr : t.grad.data();
}

const int32_t* Model::ids(int32_t id) {
  const Tensor& t = tensor(id);
  if (t.dtype != DLHOST_DTYPE_I32 || !t.is_input)
    sdk::invalid("cpu_reference: tensor '" + t.name + "' should be an I32 input");
  return tensors_[id].ids.data();
}

Model::Param& Model::param(int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(params_.size()))
    sdk::invalid("cpu_reference: parameter id " + std::to_string(id) + " out of range");
  return params_[id];
}

float* Model::scratch_floats(int64_t count) {
  float_scratch_.emplace_back(static_cast<size_t>(count), 0.0f);
  workspace_bytes_ += sizeof(float) * static_cast<uint64_t>(count);
  return float_scratch_.back().data();
}

double* Model::scratch_doubles(int64_t count, double fill) {
  double_scratch_.emplace_back(static_cast<size_t>(count), fill);
  workspace_bytes_ += sizeof(double) * static_cast<uint64_t>(count);
  return double_scratch_.back().data();
}

int64_t* Model::scratch_indices(int64_t count) {
  index_scratch_.emplace_back(static_cast<size_t>(count), 0);
  workspace_bytes_ += sizeof(int64_t) * static_cast<uint64_t>(count);
  return index_scratch_.back().data();
}

// --- the training step -----------------------------------------------------------------------

void Model::set_input(int32_t id, const void* data, size_t bytes) {
  tensor(id);  // range check
  Tensor& t = tensors_[id];
  if (!t.is_input) sdk::invalid("cpu_reference: tensor '" + t.name + "' is not a graph input");
  const size_t expected = static_cast<size_t>(t.count) * 4;
  if (data == nullptr || bytes != expected)
    sdk::invalid("cpu_reference: input '" + t.name + "' takes " + std::to_string(expected) +
                 " bytes, got " + std::to_string(bytes));
  if (t.dtype == DLHOST_DTYPE_F32)
    std::memcpy(t.value.data(), data, bytes);
  else
    std::memcpy(t.ids.data(), data, bytes);
}

void Model::forward() {
  for (const Step& step : steps_) step.forward();
  ++forward_calls_;
}

void Model::backward(const dlhost_grad_ready* ready) {
  if (forward_calls_ == 0) sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "backward before forward");
  if (ready != nullptr && ready->struct_size < DLHOST_GRAD_READY_STRUCT_SIZE)
    sdk::invalid("cpu_reference: grad_ready struct smaller than ABI 1.0's");
  // Tensor gradients are sums over the consumers: start from zero, seed d(loss)/d(loss) = 1.
  for (Tensor& t : tensors_) std::fill(t.grad.begin(), t.grad.end(), 0.0f);
  tensors_[loss_tensor_].grad[0] = 1.0f;
  for (auto step = steps_.rbegin(); step != steps_.rend(); ++step) {
    step->backward();
    if (ready != nullptr && ready->fn != nullptr)
      for (int32_t p : step->params) ready->fn(ready->user, p);
  }
}

void Model::update() {
  // Clipping by the global norm over every parameter's gradient, in double.
  float grad_scale = 1.0f;
  if (clip_norm_ > 0.0f) {
    double total = 0;
    for (const Param& p : params_) total += sum_of_squares(p.count, p.grad.data());
    const double norm = std::sqrt(total);
    if (norm > clip_norm_) grad_scale = static_cast<float>(clip_norm_ / norm);
  }
  if (optimizer_kind_ == DLHOST_OPTIMIZER_ADAMW) {
    adamw_update_all(grad_scale);
    return;
  }
  for (Param& p : params_)
    sgd_update(p.count, learning_rate_, momentum_, weight_decay_, grad_scale, p.grad.data(),
               p.value.data(), p.velocity.empty() ? nullptr : p.velocity.data());
}

void Model::read_tensor(int32_t id, void* data, size_t bytes) {
  const Tensor& t = tensor(id);
  if (t.dtype != DLHOST_DTYPE_F32)
    sdk::invalid("cpu_reference: read_tensor: '" + t.name + "' is not float32");
  const size_t expected = static_cast<size_t>(t.count) * 4;
  if (bytes != expected || t.value.size() * 4 != expected)
    sdk::invalid("cpu_reference: read_tensor: '" + t.name + "' holds " + std::to_string(expected) +
                 " bytes, got " + std::to_string(bytes));
  std::memcpy(data, t.value.data(), bytes);
}

float Model::loss() const { return tensors_[loss_tensor_].value[0]; }

// --- parameters ------------------------------------------------------------------------------

std::vector<float>& Model::part(int32_t id, int32_t which, size_t bytes) {
  Param& p = param(id);
  if (which != DLHOST_PARAM_VALUE && which != DLHOST_PARAM_GRAD)
    sdk::invalid("cpu_reference: unknown parameter part " + std::to_string(which));
  const size_t expected = static_cast<size_t>(p.count) * 4;
  if (bytes != expected)
    sdk::invalid("cpu_reference: parameter '" + p.name + "' holds " + std::to_string(expected) +
                 " bytes, got " + std::to_string(bytes));
  return which == DLHOST_PARAM_VALUE ? p.value : p.grad;
}

void Model::read_param(int32_t id, int32_t which, void* data, size_t bytes) {
  std::vector<float>& source = part(id, which, bytes);
  if (data == nullptr) sdk::invalid("cpu_reference: read_param into NULL");
  std::memcpy(data, source.data(), bytes);
}

void Model::write_param(int32_t id, int32_t which, const void* data, size_t bytes) {
  std::vector<float>& target = part(id, which, bytes);
  if (data == nullptr) sdk::invalid("cpu_reference: write_param from NULL");
  std::memcpy(target.data(), data, bytes);
}

void Model::param_buffers(int32_t id, dlhost_buffer* value, dlhost_buffer* grad) {
  Param& p = param(id);
  sdk::host_buffer(value, p.value.data(), p.value.size());
  sdk::host_buffer(grad, p.grad.data(), p.grad.size());
}

sdk::ModelInfo Model::info() const {
  return {settings_.threads, implementation_.c_str(), param_bytes_, workspace_bytes_};
}

}  // namespace cpu_reference
