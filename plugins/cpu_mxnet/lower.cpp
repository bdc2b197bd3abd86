// lower.cpp — each dlhost op as the MXNet operators a Gluon user's layer calls: Convolution,
// Pooling, FullyConnected, Activation, BatchNorm, elemwise_add, LRN, Embedding, the fused RNN
// (mode lstm) between transposes (MXNet's RNN is time-major, the ABI's batch-first), mean over H
// and W, log_softmax + pick + mean for cross-entropy, square + mean for MSE; ABI 1.4's
// Transformer ops as LayerNorm, LeakyReLU gelu, batch_dot + softmax attention, Embedding of the
// positions, FullyConnected on the embedding's table. Dropout multiplies by the ABI's pinned mask,
// a leaf the model refills every forward (never MXNet's RNG).
// Thread-safety: compile-time only.
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "dlhost/common.hpp"
#include "dlhost/graph_access.hpp"
#include "dlhost/op_visitor.hpp"
#include "program.h"

namespace dlhost::cpu_mxnet {
namespace {

namespace sdk = dlhost::sdk;

std::vector<uint32_t> shape_of(const int64_t* dims, int32_t rank) {
  return std::vector<uint32_t>(dims, dims + rank);
}

// One method per op (sdk::OpVisitor): the op's MXNet calls; its result the output's value id.
class Lowering final : public sdk::OpVisitor<int> {
 public:
  explicit Lowering(const dlhost_graph& g) : g_(g), p_(std::make_unique<Program>()) {
    p_->tensor_value.assign(size_t(g.num_tensors), -1);
    p_->input_leaf.assign(size_t(g.num_tensors), -1);
    p_->params.resize(size_t(g.num_params));
    param_value_.assign(size_t(g.num_params), -1);
  }

  std::unique_ptr<Program> run() {
    for (int32_t k = 0; k < g_.num_inputs; ++k) add_input(*g_.tensors[g_.inputs[k]]);
    for (int32_t k = 0; k < g_.num_nodes; ++k) {
      node_ = k;
      const dlhost_node& n = *g_.nodes[k];
      if (n.op == DLHOST_OP_INPUT) continue;
      step_ = 0;
      p_->tensor_value[size_t(n.output)] = visit(n);
      const dlhost_tensor_desc& out = *g_.tensors[n.output];
      p_->activation_bytes += uint64_t(sdk::element_count(out)) * 8;
    }
    p_->loss = p_->tensor_value[size_t(g_.loss)];
    return std::move(p_);
  }

 private:
  const dlhost_tensor_desc& tensor(int32_t id) const { return *g_.tensors[id]; }
  const dlhost_node& node() const { return *g_.nodes[node_]; }
  int in(int k) const { return p_->tensor_value[size_t(node().inputs[k])]; }
  // Says once where the lowering takes another path than Gluon's layers and is faster for it.
  void departure(const std::string& what) {
    if (p_->departures.find(what + "\n") == std::string::npos) p_->departures += what + "\n";
  }

  int add_leaf(LeafKind kind, const std::string& name, std::vector<uint32_t> shape) {
    Leaf l{kind, name, shape, NDArray::zeros(shape), NDArray(), {}};
    if (kind == LeafKind::kTrainable) l.grad = NDArray::zeros(shape);
    p_->leaves.push_back(std::move(l));
    p_->values.push_back({true, int(p_->leaves.size()) - 1});
    return int(p_->values.size()) - 1;
  }
  int leaf_of(int value) const { return p_->values[size_t(value)].index; }

  // Applies `op` to `inputs`; the new value's id.
  int call(const std::string& op, std::vector<int> inputs, Attrs attrs) {
    const std::string name = "n" + std::to_string(node_) + "." + std::to_string(step_++) + "." + op;
    p_->calls.push_back({op, name, std::move(inputs), std::move(attrs), node_});
    p_->values.push_back({false, int(p_->calls.size()) - 1});
    return int(p_->values.size()) - 1;
  }

  void add_input(const dlhost_tensor_desc& d) {
    if (d.dtype != DLHOST_DTYPE_F32 && d.dtype != DLHOST_DTYPE_I32)
      sdk::unimplemented("cpu_mxnet: input '" + std::string(d.name) + "' is not F32 or I32");
    const int v =
        add_leaf(LeafKind::kInput, "input" + std::to_string(d.id), shape_of(d.dims, d.rank));
    p_->tensor_value[size_t(d.id)] = v;
    p_->input_leaf[size_t(d.id)] = leaf_of(v);
  }

  // A trainable leaf holding ABI parameter `k` of the node whole. A parameter a second node lists
  // (a tied embedding table) is the same leaf: MXNet's autograd sums both uses' gradients.
  int param(int k) {
    const dlhost_param_desc& d = *g_.params[node().params[k]];
    if (param_value_[size_t(d.id)] >= 0) return param_value_[size_t(d.id)];
    const std::vector<uint32_t> shape = shape_of(d.dims, d.rank);
    const int v = add_leaf(LeafKind::kTrainable, "param" + std::to_string(d.id), shape);
    expose(d.id, leaf_of(v), 0, shape);
    param_value_[size_t(d.id)] = v;
    return v;
  }
  // ABI parameter `id` as the elements [begin, begin + count) of trainable `leaf` (flattened).
  void expose(int32_t id, int leaf, uint32_t begin, const std::vector<uint32_t>& shape) {
    const Leaf& l = p_->leaves[size_t(leaf)];
    size_t count = 1;
    for (uint32_t s : shape) count *= s;
    ParamView& view = p_->params[size_t(id)];
    view.leaf = leaf;
    view.count = count;
    if (l.shape.size() == 1) {
      view.value = l.value.view(begin, begin + uint32_t(count), shape);
      view.grad = l.grad.view(begin, begin + uint32_t(count), shape);
    } else {  // the whole array: a view over its first axis
      view.value = l.value.view(0, l.shape[0], shape);
      view.grad = l.grad.view(0, l.shape[0], shape);
    }
  }
  bool has_bias() const { return node().num_params > 1; }

  // FullyConnected's weight is [out, in] with `in` the input flattened in NCHW order: the
  // canonical layout. flatten=True keeps the mini-batch axis; a per-time-step layer
  // (batch_dims 2) keeps N and T with flatten=False, which acts on the last axis.
  int fc(const dlhost_node&, const dlhost_fc_attrs& a) override {
    const int32_t keep = DLHOST_HAS_FIELD(&a, dlhost_fc_attrs, batch_dims) ? a.batch_dims : 1;
    int x = in(0);
    const int32_t rank = tensor(node().inputs[0]).rank;
    if (keep > 1 && rank != keep + 1) {
      std::vector<int64_t> shape(size_t(keep), 0);  // 0: keep that dimension
      shape.push_back(-1);
      x = call("Reshape", {x}, {{"shape", tuple(shape)}});
    }
    std::vector<int> args{x, param(0)};
    if (has_bias()) args.push_back(param(1));
    return call("FullyConnected", args,
                {{"num_hidden", std::to_string(a.out_features)},
                 {"no_bias", flag(!has_bias())},
                 {"flatten", flag(keep == 1)}});
  }

  int conv2d(const dlhost_node&, const dlhost_conv2d_attrs& a) override {
    std::vector<int> args{in(0), param(0)};
    if (has_bias()) args.push_back(param(1));
    return call("Convolution", args,
                {{"kernel", tuple({a.kernel_h, a.kernel_w})},
                 {"stride", tuple({a.stride_h, a.stride_w})},
                 {"pad", tuple({a.pad_h, a.pad_w})},
                 {"dilate", tuple({a.dilation_h, a.dilation_w})},
                 {"num_filter", std::to_string(a.out_channels)},
                 {"num_group", std::to_string(a.groups)},
                 {"no_bias", flag(!has_bias())}});
  }

  // pooling_convention full is ceil mode; where MXNet's full windows differ from the ABI's
  // (Caffe's last window clipped to the padded input) the output shapes differ, and the
  // executor's shape check reports the node UNIMPLEMENTED.
  int pool2d(const dlhost_node& n, const dlhost_pool2d_attrs& a) override {
    if (a.kind != DLHOST_POOL_MAX && a.kind != DLHOST_POOL_AVG)
      sdk::unsupported_op(n, "pooling kind " + std::to_string(a.kind));
    Attrs at{{"kernel", tuple({a.kernel_h, a.kernel_w})},
             {"stride", tuple({a.stride_h, a.stride_w})},
             {"pad", tuple({a.pad_h, a.pad_w})},
             {"pool_type", a.kind == DLHOST_POOL_MAX ? "max" : "avg"},
             {"pooling_convention", a.ceil_mode ? "full" : "valid"}};
    if (a.kind == DLHOST_POOL_AVG) at.push_back({"count_include_pad", flag(a.count_include_pad)});
    return call("Pooling", {in(0)}, at);
  }

  int activation(const dlhost_node& n, const dlhost_activation_attrs& a) override {
    switch (a.kind) {
      case DLHOST_ACTIVATION_RELU:
        return call("Activation", {in(0)}, {{"act_type", "relu"}});
      case DLHOST_ACTIVATION_SIGMOID:
        return call("Activation", {in(0)}, {{"act_type", "sigmoid"}});
      case DLHOST_ACTIVATION_TANH:
        return call("Activation", {in(0)}, {{"act_type", "tanh"}});
    }
    sdk::unsupported_op(n, "activation kind " + std::to_string(a.kind));
  }

  // -mean(log_softmax(x)[label]) over every position: logits [..., classes], labels [...].
  int softmax_cross_entropy(const dlhost_node&) override {
    const int log_p = call("log_softmax", {in(0)}, {{"axis", "-1"}});
    const int picked = call("pick", {log_p, in(1)}, {{"axis", "-1"}});
    return call("negative", {call("mean", {picked}, {})}, {});
  }

  int mse_loss(const dlhost_node&) override {
    return call("mean", {call("square", {call("elemwise_sub", {in(0), in(1)}, {})}, {})}, {});
  }

  // Training mode on the mini-batch's statistics. MXNet keeps running = momentum * running +
  // (1 - momentum) * batch, so its momentum is 1 - the ABI's. fix_gamma=False: the scale trains.
  int batch_norm(const dlhost_node&, const dlhost_batch_norm_attrs& a) override {
    const uint32_t channels = uint32_t(tensor(node().output).dims[1]);
    const int mean = add_leaf(LeafKind::kAux, "aux" + std::to_string(node_) + ".mean", {channels});
    const int var = add_leaf(LeafKind::kAux, "aux" + std::to_string(node_) + ".var", {channels});
    const float one = 1.0f;
    p_->leaves[size_t(leaf_of(var))].value.copy_from(std::vector<float>(channels, one).data(),
                                                     channels);
    return call("BatchNorm", {in(0), param(0), param(1), mean, var},
                {{"eps", number(a.epsilon)},
                 {"momentum", number(1.0 - double(a.momentum))},
                 {"fix_gamma", "False"},
                 {"use_global_stats", "False"},
                 {"axis", "1"}});
  }

  int dropout(const dlhost_node&, const dlhost_dropout_attrs& a) override {
    const dlhost_tensor_desc& out = tensor(node().output);
    const int mask =
        add_leaf(LeafKind::kConstant, "mask" + std::to_string(node_), shape_of(out.dims, out.rank));
    p_->masks.push_back({leaf_of(mask), uint32_t(node_), a.probability});
    return call("elemwise_mul", {in(0), mask}, {});
  }

  int add(const dlhost_node&) override { return call("elemwise_add", {in(0), in(1)}, {}); }

  int lrn(const dlhost_node& n, const dlhost_lrn_attrs& a) override {
    if (tensor(n.output).rank != 4)
      sdk::unsupported_op(n, "LRN over a rank-" + std::to_string(tensor(n.output).rank) + " input");
    return call("LRN", {in(0)},
                {{"nsize", std::to_string(a.size)},
                 {"alpha", number(a.alpha)},
                 {"beta", number(a.beta)},
                 {"knorm", number(a.k)}});
  }

  int embedding(const dlhost_node&, const dlhost_embedding_attrs& a) override {
    return call("Embedding", {in(0), param(0)},
                {{"input_dim", std::to_string(a.vocab)}, {"output_dim", std::to_string(a.dim)}});
  }

  // MXNet's packed vector (as Gluon's rnn layers pack it): every layer's i2h weight [4H, C_l] and
  // h2h weight [4H, H], then every layer's i2h bias [4H] and h2h bias [4H]. Gates i, f, c, o: the
  // ABI's i, f, g, o. The ABI's one bias is i2h; h2h is frozen at zero.
  int lstm(const dlhost_node&, const dlhost_lstm_attrs& a) override {
    const dlhost_tensor_desc& x = tensor(node().inputs[0]);
    const uint32_t h = uint32_t(a.hidden), gates = 4 * h, layers = uint32_t(a.layers);
    const uint32_t batch = uint32_t(x.dims[0]);
    uint32_t total = 0;
    for (uint32_t l = 0; l < layers; ++l)
      total += gates * (uint32_t(l == 0 ? x.dims[2] : a.hidden) + h) + 2 * gates;
    const int packed = add_leaf(LeafKind::kTrainable,
                                "param" + std::to_string(node().params[0]) + ".lstm", {total});
    Leaf& leaf = p_->leaves[size_t(leaf_of(packed))];
    uint32_t at = 0;
    for (uint32_t l = 0; l < layers; ++l) {
      const uint32_t c = uint32_t(l == 0 ? x.dims[2] : a.hidden);
      expose(node().params[3 * l], leaf_of(packed), at, {gates, c});
      expose(node().params[3 * l + 1], leaf_of(packed), at + gates * c, {gates, h});
      at += gates * (c + h);
    }
    for (uint32_t l = 0; l < layers; ++l) {
      expose(node().params[3 * l + 2], leaf_of(packed), at, {gates});
      leaf.frozen.push_back({at + gates, at + 2 * gates});
      at += 2 * gates;
    }
    const int state =
        add_leaf(LeafKind::kConstant, "state" + std::to_string(node_), {layers, batch, h});
    const int time_major = call("transpose", {in(0)}, {{"axes", tuple({1, 0, 2})}});
    const int y = call("RNN", {time_major, packed, state, state},
                       {{"state_size", std::to_string(h)},
                        {"num_layers", std::to_string(layers)},
                        {"mode", "lstm"},
                        {"p", "0"},
                        {"state_outputs", "False"}});
    return call("transpose", {y}, {{"axes", tuple({1, 0, 2})}});
  }

  int global_avg_pool(const dlhost_node&) override {
    departure(
        "global average pool: MXNet's mean over H and W, not Gluon's GlobalAvgPool2D (a "
        "Pooling whose oneDNN backward returns a gradient layout that sends the 9 batch norms "
        "after ResNet-56's stage-3 adds to oneDNN's reference kernel): Gluon's ResNet-56 step "
        "at b128, 1 thread, 1878 CPU ms with GlobalAvgPool2D against 885 with the mean "
        "(0.47; at b32 355 against 209; bench/probe/mx_global_pool.py). Measured 2026-12-06 on "
        "a 2-core Xeon with AVX-512 "
        "under load (bench/results/2026-12-06-fairness, docs/frameworks.md)");
    return call("mean", {in(0)}, {{"axis", tuple({2, 3})}});
  }

  // --- the Transformer's ops (ABI 1.4), as GluonNLP's BERT and GPT-2 layers call them ---

  int layer_norm(const dlhost_node&, const dlhost_layer_norm_attrs& a) override {
    return call("LayerNorm", {in(0), param(0), param(1)},
                {{"axis", "-1"}, {"eps", number(a.epsilon)}});
  }

  // LeakyReLU act_type gelu is MXNet's erf form (BERT's); the tanh form (GPT-2's, GluonNLP's
  // gelu(approximate=True)) has no operator of its own and is composed of element-wise ones.
  int gelu(const dlhost_node& n, const dlhost_gelu_attrs& a) override {
    const int32_t kind = a.approximation;
    if (kind == DLHOST_GELU_ERF) return call("LeakyReLU", {in(0)}, {{"act_type", "gelu"}});
    if (kind != DLHOST_GELU_TANH) sdk::unsupported_op(n, "approximation " + std::to_string(kind));
    const int x = in(0);
    const int cube = call("elemwise_mul", {x, call("square", {x}, {})}, {});
    const int poly =
        call("elemwise_add", {x, call("_mul_scalar", {cube}, {{"scalar", number(0.044715)}})}, {});
    const int t =
        call("tanh", {call("_mul_scalar", {poly}, {{"scalar", number(0.7978845608)}})}, {});
    return call("elemwise_mul",
                {call("_mul_scalar", {x}, {{"scalar", "0.5"}}),
                 call("_plus_scalar", {t}, {{"scalar", "1"}})},
                {});
  }

  // Heads split by Reshape + transpose into [N*H, T, d] (GluonNLP's MultiHeadAttentionCell),
  // batch_dot for Q K^T (q scaled by 1/sqrt(d) first) and P V, the causal mask a constant leaf
  // [1, T, T] (-inf above the diagonal) added by broadcast_add, softmax over the last axis, the
  // ABI's pinned dropout mask (a leaf [N*H, T, T], in the ABI's element order) multiplied in.
  int attention(const dlhost_node& op, const dlhost_attention_attrs& a) override {
    const dlhost_tensor_desc& q = tensor(op.inputs[0]);
    if (q.rank != 3)
      sdk::unsupported_op(op, "inputs of rank " + std::to_string(q.rank) + " (not [N, T, C])");
    const int64_t n = q.dims[0], t = q.dims[1], c = q.dims[2], h = a.heads, d = c / h;
    const auto heads = [&](int value) {
      const int split = call("Reshape", {value}, {{"shape", tuple({n, t, h, d})}});
      const int moved = call("transpose", {split}, {{"axes", tuple({0, 2, 1, 3})}});
      return call("Reshape", {moved}, {{"shape", tuple({n * h, t, d})}});
    };
    const int qh =
        call("_mul_scalar", {heads(in(0))}, {{"scalar", number(1.0 / std::sqrt(double(d)))}});
    int scores = call("batch_dot", {qh, heads(in(1))}, {{"transpose_b", "True"}});
    if (a.causal != 0) {
      const int mask = add_leaf(LeafKind::kConstant, "causal" + std::to_string(node_),
                                {1, uint32_t(t), uint32_t(t)});
      std::vector<float> above(size_t(t * t));
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = 0; j < t; ++j)
          above[size_t(i * t + j)] = j > i ? -std::numeric_limits<float>::infinity() : 0.0f;
      p_->leaves[size_t(leaf_of(mask))].value.copy_from(above.data(), above.size());
      scores = call("broadcast_add", {scores, mask}, {});
    }
    int probs = call("softmax", {scores}, {{"axis", "-1"}});
    if (a.dropout > 0) {
      const int mask = add_leaf(LeafKind::kConstant, "mask" + std::to_string(node_),
                                {uint32_t(n * h), uint32_t(t), uint32_t(t)});
      p_->masks.push_back({leaf_of(mask), uint32_t(node_), a.dropout});
      probs = call("elemwise_mul", {probs, mask}, {});
    }
    const int context = call("batch_dot", {probs, heads(in(2))}, {});
    const int split = call("Reshape", {context}, {{"shape", tuple({n, h, t, d})}});
    const int moved = call("transpose", {split}, {{"axes", tuple({0, 2, 1, 3})}});
    return call("Reshape", {moved}, {{"shape", tuple({n, t, c})}});
  }

  // x + table[0:T]: an Embedding lookup of the constant positions 0 .. T-1 (as [1, T], giving
  // [1, T, C]; its backward adds into those rows only), broadcast_add over N. GluonNLP's BERT
  // embeds arange(T) the same way; slice_axis would leave the table's shape to MXNet's shape
  // inference, which cannot infer it backwards from a slice.
  int position_embedding(const dlhost_node& n, const dlhost_position_embedding_attrs& a) override {
    const dlhost_tensor_desc& x = tensor(n.inputs[0]);
    if (x.rank != 3) sdk::unsupported_op(n, "an input of rank " + std::to_string(x.rank));
    const uint32_t t = uint32_t(x.dims[1]);
    const int positions =
        add_leaf(LeafKind::kConstant, "positions" + std::to_string(node_), {1, t});
    std::vector<float> ids(t);
    for (uint32_t i = 0; i < t; ++i) ids[i] = float(i);
    p_->leaves[size_t(leaf_of(positions))].value.copy_from(ids.data(), ids.size());
    const int rows = call("Embedding", {positions, param(0)},
                          {{"input_dim", std::to_string(a.max_positions)},
                           {"output_dim", std::to_string(x.dims[2])}});
    return call("broadcast_add", {in(0), rows}, {});
  }

  // FullyConnected over the last axis (flatten=False) with the embedding's own leaf as its
  // weight: MXNet's weight is [num_hidden, in] = [vocab, dim], the table as it is (Gluon ties
  // a Dense to an Embedding by sharing the Parameter the same way).
  int tied_fc(const dlhost_node&, const dlhost_tied_fc_attrs& a) override {
    const int64_t vocab = tensor(node().output).dims[tensor(node().output).rank - 1];
    std::vector<int> args{in(0), param(0)};
    if (a.has_bias != 0) args.push_back(param(1));
    return call("FullyConnected", args,
                {{"num_hidden", std::to_string(vocab)},
                 {"no_bias", flag(a.has_bias == 0)},
                 {"flatten", "False"}});
  }

  const dlhost_graph& g_;
  std::unique_ptr<Program> p_;
  std::vector<int> param_value_;  // ABI parameter id -> its leaf's value id (-1: not made yet)
  int32_t node_ = 0;
  int step_ = 0;
};

}  // namespace

std::unique_ptr<Program> lower_graph(const dlhost_graph& graph) { return Lowering(graph).run(); }

}  // namespace dlhost::cpu_mxnet
