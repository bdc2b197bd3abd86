// model_transformer.cpp — cpu_reference's lowering of ABI 1.4's Transformer ops onto the kernels
// of ops_transformer.h (and ops.h's fc for the tied output layer), and its AdamW update. See
// model.h; the paper's ops are lowered in model.cpp.
#include <algorithm>
#include <string>

#include "dlhost/common.hpp"
#include "model.h"
#include "ops.h"
#include "ops_transformer.h"

namespace cpu_reference {

namespace sdk = dlhost::sdk;

namespace {

[[noreturn]] void wrong(const dlhost_node& node, const std::string& what) {
  sdk::invalid(std::string("cpu_reference: node '") + (node.name != nullptr ? node.name : "?") +
               "': " + what);
}

// The node's attributes, refused when missing or shorter than ABI 1.4's struct (the SDK's checked
// accessor, as for every other op); and its inputs.
template <class Attrs>
const Attrs& transformer_attrs(const dlhost_node& node, int32_t inputs) {
  const Attrs& attrs = sdk::node_attrs<Attrs>(node);
  if (node.num_inputs != inputs || node.inputs == nullptr)
    wrong(node, "has " + std::to_string(node.num_inputs) + " inputs, its op takes " +
                    std::to_string(inputs));
  return attrs;
}

}  // namespace

void Model::lower_transformer(uint32_t index, const dlhost_node& node, Step& step) {
  switch (node.op) {
    case DLHOST_OP_LAYER_NORM:
      return lower_layer_norm(node, step);
    case DLHOST_OP_GELU:
      return lower_gelu(node, step);
    case DLHOST_OP_ATTENTION:
      return lower_attention(index, node, step);
    case DLHOST_OP_POSITION_EMBEDDING:
      return lower_position_embedding(node, step);
    case DLHOST_OP_TIED_FC:
      return lower_tied_fc(node, step);
    default:
      wrong(node, "not a Transformer op");
  }
}

void Model::lower_layer_norm(const dlhost_node& node, Step& step) {
  const auto& a = transformer_attrs<dlhost_layer_norm_attrs>(node, 1);
  const int32_t x = node.inputs[0], y = node.output;
  const Tensor& in = tensor(x);
  LayerNormShape s;
  s.channels = in.dims.back();
  s.rows = in.count / s.channels;
  s.epsilon = a.epsilon;
  if (node.num_params != 2 || param(node.params[0]).count != s.channels ||
      param(node.params[1]).count != s.channels)
    wrong(node, "layer_norm wants scale and shift [C]");
  Param &scale = param(node.params[0]), &shift = param(node.params[1]);
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  float *S = scale.value.data(), *dS = scale.grad.data();
  float *B = shift.value.data(), *dB = shift.grad.data();
  double* mean = scratch_doubles(s.rows, 0.0);
  double* inv_std = scratch_doubles(s.rows, 0.0);
  step.forward = [=] { layer_norm_forward(s, X, S, B, Y, mean, inv_std); };
  step.backward = [=] { layer_norm_backward(s, X, S, mean, inv_std, dY, dX, dS, dB); };
}

void Model::lower_gelu(const dlhost_node& node, Step& step) {
  const auto& a = transformer_attrs<dlhost_gelu_attrs>(node, 1);
  if (a.approximation != DLHOST_GELU_ERF && a.approximation != DLHOST_GELU_TANH)
    wrong(node, "gelu approximation " + std::to_string(a.approximation));
  const bool tanh = a.approximation == DLHOST_GELU_TANH;
  const int32_t x = node.inputs[0], y = node.output;
  const int64_t n = tensor(x).count;
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  step.forward = [=] { gelu_forward(tanh, n, X, Y); };
  step.backward = [=] {
    if (dX != nullptr) gelu_backward(tanh, n, X, dY, dX);
  };
}

void Model::lower_attention(uint32_t index, const dlhost_node& node, Step& step) {
  const auto& a = transformer_attrs<dlhost_attention_attrs>(node, 3);
  const int32_t q = node.inputs[0], k = node.inputs[1], v = node.inputs[2], y = node.output;
  const Tensor& in = tensor(q);
  if (in.dims.size() != 3 || a.heads <= 0 || in.dims[2] % a.heads != 0 ||
      tensor(k).dims != in.dims || tensor(v).dims != in.dims)
    wrong(node, "attention wants q, k, v [N, T, heads * d] of one shape");
  AttentionShape s;
  s.batch = in.dims[0];
  s.steps = in.dims[1];
  s.heads = a.heads;
  s.head_dim = in.dims[2] / a.heads;
  s.causal = a.causal != 0;
  s.dropout = a.dropout;
  const int64_t squares = s.batch * s.heads * s.steps * s.steps;
  float* probs = scratch_floats(squares);
  float* keep = s.dropout > 0 ? scratch_floats(squares) : nullptr;
  float* scratch = scratch_floats(2 * s.steps * s.steps);
  float *Q = value(q), *K = value(k), *V = value(v), *Y = value(y);
  float *dQ = grad(q), *dK = grad(k), *dV = grad(v), *dY = grad(y);
  const uint64_t seed = settings_.seed;
  const uint64_t* calls = &forward_calls_;  // the dropout mask's step
  step.forward = [=] {
    attention_forward(s, seed, index, *calls, Q, K, V, Y, probs, keep, scratch);
  };
  step.backward = [=] { attention_backward(s, Q, K, V, probs, keep, dY, dQ, dK, dV, scratch); };
}

void Model::lower_position_embedding(const dlhost_node& node, Step& step) {
  const auto& a = transformer_attrs<dlhost_position_embedding_attrs>(node, 1);
  const int32_t x = node.inputs[0], y = node.output;
  const Tensor& in = tensor(x);
  if (in.dims.size() != 3 || in.dims[1] > a.max_positions || node.num_params != 1 ||
      param(node.params[0]).count != a.max_positions * in.dims[2])
    wrong(node, "position_embedding wants [N, T, C] and a table [max_positions, C]");
  const int64_t batch = in.dims[0], steps = in.dims[1], channels = in.dims[2];
  const int64_t rows = a.max_positions;
  Param& table = param(node.params[0]);
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  float *E = table.value.data(), *dE = table.grad.data();
  step.forward = [=] { position_embedding_forward(batch, steps, channels, X, E, Y); };
  step.backward = [=] { position_embedding_backward(batch, steps, channels, rows, dY, dX, dE); };
}

// The table belongs to the embedding node, which runs its backward after this one (it comes
// first in the graph) and overwrites the table's gradient, as every parameter's owner does. So
// this node's share goes to a buffer of its own, added to the table's gradient right after the
// owner's backward; the table is reported ready there, once.
void Model::lower_tied_fc(const dlhost_node& node, Step& step) {
  const auto& a = transformer_attrs<dlhost_tied_fc_attrs>(node, 1);
  const int32_t x = node.inputs[0], y = node.output;
  if (a.embedding_node < 0 || a.embedding_node >= static_cast<int32_t>(step_of_node_.size()) ||
      step_of_node_[a.embedding_node] < 0 || node.num_params != 1 + (a.has_bias ? 1 : 0))
    wrong(node, "tied_fc's embedding node was not lowered before it");
  const int32_t table_id = node.params[0];
  Param& table = param(table_id);
  const Tensor& in = tensor(x);
  FcShape s;
  s.in = in.dims.back();
  s.rows = in.count / s.in;
  s.out = table.count / s.in;
  if (s.out * s.in != table.count || tensor(y).count != s.rows * s.out)
    wrong(node, "tied_fc's input, table and output do not agree");
  float* B = a.has_bias ? param(node.params[1]).value.data() : nullptr;
  float* dB = a.has_bias ? param(node.params[1]).grad.data() : nullptr;
  float *X = value(x), *Y = value(y), *dX = grad(x), *dY = grad(y);
  float *E = table.value.data(), *dE = table.grad.data();
  float* dE_here = scratch_floats(table.count);
  const int64_t count = table.count;
  step.forward = [=] { fc_forward(s, X, E, B, Y); };
  step.backward = [=] { fc_backward(s, X, E, dY, dX, dE_here, dB); };
  step.params.erase(std::remove(step.params.begin(), step.params.end(), table_id),
                    step.params.end());
  Step& owner = steps_[static_cast<size_t>(step_of_node_[a.embedding_node])];
  owner.backward = [owner_backward = owner.backward, dE, dE_here, count] {
    owner_backward();
    for (int64_t i = 0; i < count; ++i) dE[i] += dE_here[i];
  };
}

void Model::adamw_update_all(float grad_scale) {
  ++updates_;
  AdamWSettings a;
  a.learning_rate = learning_rate_;
  a.beta1 = beta1_;
  a.beta2 = beta2_;
  a.epsilon = adam_epsilon_;
  a.weight_decay = weight_decay_;
  for (Param& p : params_)
    adamw_update(a, updates_, p.count, grad_scale, p.grad.data(), p.value.data(), p.moment1.data(),
                 p.moment2.data());
}

}  // namespace cpu_reference
