// ops.cpp — the host's graph ops as ATen calls, the way a PyTorch user writes each layer: conv2d,
// max/avg pooling, linear, relu/sigmoid/tanh, batch_norm (training mode, running statistics
// updated by ATen), cross_entropy, mse_loss, embedding, the fused lstm, and LRN as
// torch.nn.functional.local_response_norm composes it. Dropout multiplies by the ABI's pinned
// mask (dlhost_dropout_keep) so that every backend drops the same elements.
// Thread-safety: as ops.h.
#include "ops.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <utility>

#include "dlhost/common.hpp"
#include "dlhost/framework_kit.hpp"
#include "dlhost/graph_access.hpp"

namespace dlhost::cpu_libtorch {
namespace {

namespace sdk = dlhost::sdk;

std::vector<int64_t> dims_of(const dlhost_tensor_desc& t) {
  return std::vector<int64_t>(t.dims, t.dims + t.rank);
}

// at::linear whose backward writes the weight and bias gradients straight into the parameters'
// grad() buffers (at::mm_out, at::sum_out: the gemm and the sum of PyTorch's own formula for
// linear, dW = dY^T X, db = sum dY, dX = dY W) and hands autograd no gradient for them.
// Why: the ABI pins every gradient buffer (param_buffers, all-reduced in place), so autograd
// cannot give the parameter the tensor its gemm made, as PyTorch does after
// zero_grad(set_to_none=True); its AccumulateGrad would add that fresh tensor into a zeroed
// buffer: a zero pass, an add pass and a fresh allocation of every weight gradient per step.
// On FCN-5 (118M parameters, 64 samples) that was ~0.95 GB of extra memory traffic a step and,
// on cpu_libtorch2's allocator, ~115k page faults (bench/results/2026-12-06-fairness).
struct LinearIntoGrads : torch::autograd::Function<LinearIntoGrads> {
  // The bias goes by pointer (nullptr: none): autograd's inputs must be defined tensors, and
  // the output needs its gradient edges through x and w only.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, const at::Tensor* bias, int64_t w_id, int64_t b_id,
                            const std::function<void(int32_t)>* written) {
    const at::Tensor b = bias != nullptr ? *bias : at::Tensor();
    ctx->save_for_backward({x});
    ctx->saved_data["w"] = w;
    if (b.defined()) ctx->saved_data["b"] = b;  // no bias: no entry
    ctx->saved_data["ids"] = std::vector<int64_t>{w_id, b_id};
    ctx->saved_data["written"] = reinterpret_cast<int64_t>(written);
    return at::linear(x, w, b);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor w = ctx->saved_data["w"].toTensor();
    const auto bias = ctx->saved_data.find("b");
    const std::vector<int64_t> ids = ctx->saved_data["ids"].toIntVector();
    const auto& written =
        *reinterpret_cast<const std::function<void(int32_t)>*>(ctx->saved_data["written"].toInt());
    const at::Tensor dy = grads[0].reshape({-1, w.size(0)});
    at::Tensor dx;
    if (ctx->needs_input_grad(0)) dx = dy.mm(w).view(x.sizes());
    at::Tensor dw = w.grad();  // the buffer itself: mm_out overwrites it, shape unchanged
    at::mm_out(dw, dy.t(), x.reshape({-1, w.size(1)}));
    written(int32_t(ids[0]));
    if (bias != ctx->saved_data.end()) {
      at::Tensor db = bias->second.toTensor().grad();
      at::sum_out(db, dy, {0});
      written(int32_t(ids[1]));
    }
    return {dx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Whether parameter `p` is node `index`'s own and no other node uses it (a tied table's
// gradient sums two uses, which autograd's accumulation must do).
bool owned_alone(const dlhost_graph& g, int32_t index, int32_t p) {
  if (g.params[p]->node != index) return false;
  for (int32_t k = 0; k < g.num_nodes; ++k)
    for (int32_t q = 0; k != index && q < g.nodes[k]->num_params; ++q)
      if (g.nodes[k]->params[q] == p) return false;
  return true;
}

}  // namespace

NodeForward Lowering::fc(const NodeView& v, const dlhost_fc_attrs& a) {
  const int32_t keep = DLHOST_HAS_FIELD(&a, dlhost_fc_attrs, batch_dims) ? a.batch_dims : 1;
  std::vector<int64_t> rows(v.tensor(v.in(0)).dims, v.tensor(v.in(0)).dims + keep);
  rows.push_back(-1);  // the features: C*H*W flattened in NCHW order, as the canonical weight
  const dlhost_graph& g = v.env.graph;
  bool alone = v.env.writes_own_grad != nullptr && v.env.gradient_written != nullptr;
  for (int32_t p = 0; p < v.node.num_params; ++p)
    alone = alone && owned_alone(g, v.index, v.node.params[p]);
  if (!alone) {
    return [x = v.in(0), rows, w = v.param(0), b = v.bias()](const Values& t) {
      return at::linear(t[size_t(x)].reshape(rows), w, b);
    };
  }
  const int64_t w_id = v.node.params[0];
  const int64_t b_id = v.node.num_params > 1 ? v.node.params[1] : -1;
  for (int32_t p = 0; p < v.node.num_params; ++p)
    (*v.env.writes_own_grad)[size_t(v.node.params[p])] = true;
  return [x = v.in(0), rows, w = v.param(0), b = v.bias(), w_id, b_id,
          written = v.env.gradient_written](const Values& t) {
    return LinearIntoGrads::apply(t[size_t(x)].reshape(rows), w, b.defined() ? &b : nullptr, w_id,
                                  b_id, written);
  };
}

NodeForward Lowering::conv2d(const NodeView& v, const dlhost_conv2d_attrs& a) {
  return [x = v.in(0), a, w = v.param(0), b = v.bias()](const Values& t) {
    return at::conv2d(t[size_t(x)], w, b, {a.stride_h, a.stride_w}, {a.pad_h, a.pad_w},
                      {a.dilation_h, a.dilation_w}, a.groups);
  };
}

NodeForward Lowering::pool2d(const NodeView& v, const dlhost_pool2d_attrs& a) {
  // Padding up to half the window, as ATen requires: the host's builder already refuses more.
  if (a.kind != DLHOST_POOL_MAX && a.kind != DLHOST_POOL_AVG)
    sdk::unsupported_op(v.node, "pooling kind " + std::to_string(a.kind));
  return [x = v.in(0), a](const Values& t) {
    // Arrays, not IntArrayRef{...}: a braced list would die before the call.
    const int64_t k[] = {a.kernel_h, a.kernel_w}, s[] = {a.stride_h, a.stride_w},
                  p[] = {a.pad_h, a.pad_w};
    if (a.kind == DLHOST_POOL_MAX)
      return at::max_pool2d(t[size_t(x)], k, s, p, {1, 1}, a.ceil_mode);
    return at::avg_pool2d(t[size_t(x)], k, s, p, a.ceil_mode, a.count_include_pad != 0);
  };
}

NodeForward Lowering::activation(const NodeView& v, const dlhost_activation_attrs& a) {
  switch (a.kind) {
    case DLHOST_ACTIVATION_RELU:
      return [x = v.in(0)](const Values& t) { return at::relu(t[size_t(x)]); };
    case DLHOST_ACTIVATION_SIGMOID:
      return [x = v.in(0)](const Values& t) { return at::sigmoid(t[size_t(x)]); };
    case DLHOST_ACTIVATION_TANH:
      return [x = v.in(0)](const Values& t) { return at::tanh(t[size_t(x)]); };
  }
  sdk::unsupported_op(v.node, "activation kind " + std::to_string(a.kind));
}

// Logits [..., classes] against I64 labels (set_input widens the ABI's I32): the mean over all
// positions, as the ABI's loss.
NodeForward Lowering::softmax_cross_entropy(const NodeView& v) {
  const int64_t classes = v.tensor(v.in(0)).dims[v.tensor(v.in(0)).rank - 1];
  return [x = v.in(0), y = v.in(1), classes](const Values& t) {
    return at::cross_entropy_loss(t[size_t(x)].reshape({-1, classes}), t[size_t(y)].reshape(-1));
  };
}

NodeForward Lowering::mse_loss(const NodeView& v) {
  return [x = v.in(0), y = v.in(1)](const Values& t) {
    return at::mse_loss(t[size_t(x)], t[size_t(y)]);
  };
}

NodeForward Lowering::batch_norm(const NodeView& v, const dlhost_batch_norm_attrs& a) {
  const int64_t channels = v.out().dims[1];
  // Running statistics: state of the model, PyTorch's start (mean 0, variance 1), updated by
  // ATen with the unbiased variance as the ABI says.
  at::Tensor mean = at::zeros({channels}), var = at::ones({channels});
  return [x = v.in(0), a, g = v.param(0), b = v.param(1), mean, var](const Values& t) {
    return at::batch_norm(t[size_t(x)], g, b, mean, var, /*training=*/true, a.momentum, a.epsilon,
                          /*cudnn_enabled=*/false);
  };
}

NodeForward Lowering::dropout(const NodeView& v, const dlhost_dropout_attrs& a) {
  const float p = a.probability;
  at::Tensor mask = at::empty(dims_of(v.out()));  // persistent: refilled by every forward
  return [x = v.in(0), p, mask, seed = v.env.seed, calls = v.env.forward_calls,
          node = static_cast<uint32_t>(v.index)](const Values& t) mutable {
    fill_dropout_mask(mask, seed, node, *calls, p);
    return t[size_t(x)] * mask;
  };
}

NodeForward Lowering::add(const NodeView& v) {
  return [x = v.in(0), y = v.in(1)](const Values& t) { return t[size_t(x)] + t[size_t(y)]; };
}

// y = x / (k + alpha / size * sum over the window of x^2)^beta: the average of x^2 over `size`
// zero-padded channels, as torch.nn.functional.local_response_norm computes it.
NodeForward Lowering::lrn(const NodeView& v, const dlhost_lrn_attrs& a) {
  if (v.out().rank != 4)
    sdk::unsupported_op(v.node, "LRN over a rank-" + std::to_string(v.out().rank) + " input");
  return [x = v.in(0), a](const Values& t) {
    const at::Tensor& in = t[size_t(x)];
    at::Tensor div =
        at::constant_pad_nd(in.mul(in).unsqueeze(1), {0, 0, 0, 0, a.size / 2, (a.size - 1) / 2});
    div = at::avg_pool3d(div, {a.size, 1, 1}, {1, 1, 1}).squeeze(1);
    return in / div.mul(a.alpha).add(a.k).pow(a.beta);
  };
}

NodeForward Lowering::embedding(const NodeView& v, const dlhost_embedding_attrs&) {
  return [ids = v.in(0), table = v.param(0)](const Values& t) {
    return at::embedding(table, t[size_t(ids)]);
  };
}

// The fused multi-layer LSTM (batch first). PyTorch's two biases per layer collapse into the
// ABI's one: b_ih is the parameter, b_hh a constant zero, so the gradient of b_ih is the ABI's.
NodeForward Lowering::lstm(const NodeView& v, const dlhost_lstm_attrs& a) {
  std::vector<at::Tensor> weights;
  const at::Tensor zero_bias = at::zeros({4 * a.hidden});
  for (int64_t l = 0; l < a.layers; ++l) {
    const int k = static_cast<int>(3 * l);
    weights.insert(weights.end(), {v.param(k), v.param(k + 1), v.param(k + 2), zero_bias});
  }
  const int64_t batch = v.out().dims[0];
  const at::Tensor h0 = at::zeros({a.layers, batch, a.hidden});
  return [x = v.in(0), a, weights, h0](const Values& t) {
    return std::get<0>(at::lstm(t[size_t(x)], {h0, h0}, weights, /*has_biases=*/true, a.layers,
                                /*dropout=*/0.0, /*train=*/true, /*bidirectional=*/false,
                                /*batch_first=*/true));
  };
}

NodeForward Lowering::global_avg_pool(const NodeView& v) {
  return [x = v.in(0)](const Values& t) { return t[size_t(x)].mean({2, 3}); };
}

void fill_dropout_mask(at::Tensor& mask, uint64_t seed, uint32_t node, uint64_t step, float p) {
  float* m = mask.data_ptr<float>();
  const sdk::DropoutMask draw{seed, node, step, p};
  at::parallel_for(0, mask.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    draw.fill(m, uint64_t(begin), uint64_t(end));
  });
}

NodeForward lower_node(const LowerEnv& env, int32_t index) {
  const dlhost_node& n = *env.graph.nodes[index];
  return Lowering().visit(n, NodeView{env, n, index});
}

}  // namespace dlhost::cpu_libtorch
