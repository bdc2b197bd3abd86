// naive_backend.cpp — `example_naive`, a complete dlhost compute backend in one file: plain
// single-threaded loops in float32 (double sums), written with the SDK's backend kit. It trains
// graphs made of 2-D convolutions, fully connected layers (per-sample and per-time-step),
// ReLU/sigmoid/tanh, element-wise add, softmax cross-entropy and MSE; compile answers UNIMPLEMENTED
// for every other op, so `dlhost conform` reports those problems as UNIMPLEMENTED, not FAILED.
//
// What the kit does for it: fills the C table, checks handles and out-parameters, turns
// exceptions into statuses, describes the CPU (sdk::cpu_device) and reports the versions below.
// Thread-safety: a model is used from one host thread at a time (the ABI's rule); no locks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/backend_kit.hpp"
#include "dlhost/cpu_kit.hpp"
#include "dlhost/graph_access.hpp"

namespace naive {

namespace sdk = dlhost::sdk;

struct Context {
  int64_t seed = 42;
};

struct Tensor {
  std::vector<float> value, grad;  // F32 activations and their gradients
  std::vector<int32_t> ids;        // I32 inputs (labels)
  int64_t last_dim = 1;            // size of the innermost dimension
  int64_t dims[4] = {1, 1, 1, 1};  // N, C, H, W of an image tensor
};

struct Param {
  std::vector<float> value, grad, velocity;
};

struct Node {
  int32_t op = 0;
  std::string name;
  std::vector<int32_t> in, params;
  int32_t out = -1;
  int32_t activation = 0;  // ACTIVATION: the kind
  int64_t rows = 0;        // FC: leading dims kept; losses: positions
  sdk::Geometry2d conv;    // CONV2D: sizes, stride, padding, dilation, groups
};

class NaiveModel final : public sdk::Model {
 public:
  NaiveModel(const dlhost_graph& g, const dlhost_optimizer_desc& opt) : opt_(opt) {
    for (int32_t t = 0; t < g.num_tensors; ++t) add_tensor(*g.tensors[t]);
    for (int32_t p = 0; p < g.num_params; ++p) {
      const auto n = static_cast<size_t>(g.params[p]->count);
      params_.push_back({std::vector<float>(n), std::vector<float>(n),
                         std::vector<float>(opt.momentum != 0.0f ? n : 0)});
      param_bytes_ += n * 4 * (opt.momentum != 0.0f ? 2 : 1);
    }
    for (int32_t k = 0; k < g.num_nodes; ++k) add_node(g, *g.nodes[k]);
    inputs_.assign(g.inputs, g.inputs + g.num_inputs);
    loss_ = g.loss;
  }

  void set_input(int32_t tensor, const void* data, size_t bytes) override {
    if (std::find(inputs_.begin(), inputs_.end(), tensor) == inputs_.end())
      sdk::invalid("example_naive: tensor " + std::to_string(tensor) + " is not an input");
    Tensor& t = tensors_[static_cast<size_t>(tensor)];
    const size_t want = 4 * (t.ids.empty() ? t.value.size() : t.ids.size());
    if (bytes != want || data == nullptr)
      sdk::invalid("example_naive: input " + std::to_string(tensor) + " takes " +
                   std::to_string(want) + " bytes, got " + std::to_string(bytes));
    std::memcpy(t.ids.empty() ? static_cast<void*>(t.value.data()) : t.ids.data(), data, bytes);
  }

  void forward() override {
    for (const Node& n : nodes_) forward_node(n);
  }

  void backward(const dlhost_grad_ready* ready) override {
    for (Tensor& t : tensors_) std::fill(t.grad.begin(), t.grad.end(), 0.0f);
    tensors_[static_cast<size_t>(loss_)].grad[0] = 1.0f;
    for (auto n = nodes_.rbegin(); n != nodes_.rend(); ++n) {
      backward_node(*n);
      if (ready != nullptr && ready->fn != nullptr)
        for (int32_t p : n->params) ready->fn(ready->user, p);
    }
  }

  void update() override {
    double sum = 0;  // clipping, then weight decay and momentum (dlhost_backend.h's order)
    for (const Param& p : params_) sum += sdk::sum_of_squares(p.grad.data(), p.grad.size());
    const double scale = sdk::clip_scale(sum, opt_.clip_norm);
    for (Param& p : params_)
      sdk::sgd_step(opt_, scale, p.grad.data(), p.value.data(),
                    p.velocity.empty() ? nullptr : p.velocity.data(), p.value.size());
  }

  float loss() const override { return tensors_[static_cast<size_t>(loss_)].value[0]; }

  void param_buffers(int32_t id, dlhost_buffer* value, dlhost_buffer* grad) override {
    Param& p = param(id);
    sdk::host_buffer(value, p.value.data(), p.value.size());
    sdk::host_buffer(grad, p.grad.data(), p.grad.size());
  }
  void read_param(int32_t id, int32_t part, void* data, size_t bytes) override {
    std::memcpy(data, part_of(id, part, data, bytes).data(), bytes);
  }
  void write_param(int32_t id, int32_t part, const void* data, size_t bytes) override {
    std::memcpy(part_of(id, part, data, bytes).data(), data, bytes);
  }

  sdk::ModelInfo info() const override {
    sdk::ModelInfo i;
    i.threads = 1;
    i.implementation = "naive loops";
    i.param_bytes = param_bytes_;
    i.workspace_bytes = workspace_bytes_;
    return i;
  }

 private:
  void add_tensor(const dlhost_tensor_desc& d) {
    Tensor t;
    int64_t n = 1;
    for (int32_t k = 0; k < d.rank; ++k) n *= d.dims[k];
    t.last_dim = d.rank > 0 ? d.dims[d.rank - 1] : 1;
    for (int32_t k = 0; k < d.rank && d.rank == 4; ++k) t.dims[k] = d.dims[k];
    if (d.dtype == DLHOST_DTYPE_I32) {
      t.ids.resize(static_cast<size_t>(n));
    } else if (d.dtype == DLHOST_DTYPE_F32) {
      t.value.resize(static_cast<size_t>(n));
      t.grad.resize(static_cast<size_t>(n));
    } else {
      sdk::unimplemented("example_naive: tensor '" + std::string(d.name) + "' is not F32 or I32");
    }
    workspace_bytes_ += static_cast<uint64_t>(n) * (t.ids.empty() ? 8 : 4);
    tensors_.push_back(std::move(t));
  }

  void add_node(const dlhost_graph& g, const dlhost_node& d) {
    Node n;
    n.op = d.op;
    n.name = d.name;
    n.in.assign(d.inputs, d.inputs + d.num_inputs);
    n.params.assign(d.params, d.params + d.num_params);
    n.out = d.output;
    switch (d.op) {
      case DLHOST_OP_INPUT:
        return;  // fed by set_input
      case DLHOST_OP_FC: {
        sdk::expect_inputs(g, d, 1);
        const auto& a = sdk::node_attrs<dlhost_fc_attrs>(d);
        const int32_t keep = DLHOST_HAS_FIELD(&a, dlhost_fc_attrs, batch_dims) ? a.batch_dims : 1;
        const dlhost_tensor_desc& x = sdk::input_tensor(g, d, 0);
        n.rows = 1;
        for (int32_t k = 0; k < keep; ++k) n.rows *= x.dims[k];
        break;
      }
      case DLHOST_OP_CONV2D:
        n.conv = sdk::conv2d_geometry(g, d);
        break;
      case DLHOST_OP_ACTIVATION:
        n.activation = sdk::node_attrs<dlhost_activation_attrs>(d).kind;
        break;
      case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
        n.rows = static_cast<int64_t>(tensors_[static_cast<size_t>(n.in[1])].ids.size());
        break;
      case DLHOST_OP_MSE_LOSS:
      case DLHOST_OP_ADD:
        break;
      default:
        sdk::unimplemented("example_naive: " + sdk::op_name(d.op) + " ('" + n.name +
                           "') is not implemented");
    }
    nodes_.push_back(std::move(n));
  }

  Tensor& in(const Node& n, size_t k) { return tensors_[static_cast<size_t>(n.in[k])]; }
  Tensor& out(const Node& n) { return tensors_[static_cast<size_t>(n.out)]; }
  Param& param(int32_t id) {
    if (id < 0 || static_cast<size_t>(id) >= params_.size())
      sdk::invalid("example_naive: no parameter " + std::to_string(id));
    return params_[static_cast<size_t>(id)];
  }
  std::vector<float>& part_of(int32_t id, int32_t part, const void* data, size_t bytes) {
    Param& p = param(id);
    if (data == nullptr || bytes != p.value.size() * 4)
      sdk::invalid("example_naive: parameter " + std::to_string(id) + " takes " +
                   std::to_string(p.value.size() * 4) + " bytes, got " + std::to_string(bytes));
    if (part != DLHOST_PARAM_VALUE && part != DLHOST_PARAM_GRAD)
      sdk::invalid("example_naive: unknown parameter part " + std::to_string(part));
    return part == DLHOST_PARAM_VALUE ? p.value : p.grad;
  }

  void forward_node(const Node& n) {
    std::vector<float>& y = out(n).value;
    const std::vector<float>& x = in(n, 0).value;
    switch (n.op) {
      case DLHOST_OP_FC: {  // y[r, o] = sum_i x[r, i] W[o, i] + b[o]
        const std::vector<float>& w = params_[size_t(n.params[0])].value;
        const size_t rows = size_t(n.rows), ins = x.size() / rows, outs = y.size() / rows;
        for (size_t r = 0; r < rows; ++r)
          for (size_t o = 0; o < outs; ++o) {
            double sum = n.params.size() > 1 ? params_[size_t(n.params[1])].value[o] : 0.0;
            for (size_t i = 0; i < ins; ++i) sum += double(x[r * ins + i]) * w[o * ins + i];
            y[r * outs + o] = float(sum);
          }
        return;
      }
      case DLHOST_OP_CONV2D:
        return conv2d(n, false);
      case DLHOST_OP_ACTIVATION:
        for (size_t i = 0; i < y.size(); ++i)
          y[i] = n.activation == DLHOST_ACTIVATION_RELU      ? std::max(x[i], 0.0f)
                 : n.activation == DLHOST_ACTIVATION_SIGMOID ? 1.0f / (1.0f + std::exp(-x[i]))
                                                             : std::tanh(x[i]);
        return;
      case DLHOST_OP_ADD:
        for (size_t i = 0; i < y.size(); ++i) y[i] = x[i] + in(n, 1).value[i];
        return;
      case DLHOST_OP_MSE_LOSS: {  // sum((x - t)^2) / elements
        double sum = 0;
        for (size_t i = 0; i < x.size(); ++i) sum += std::pow(double(x[i]) - in(n, 1).value[i], 2);
        y[0] = float(sum / double(x.size()));
        return;
      }
      case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
        y[0] = float(cross_entropy(n, false));
        return;
    }
  }

  // Mean over positions of -log softmax(x)[label]; with `grad`, adds its gradient to dx.
  double cross_entropy(const Node& n, bool grad) {
    Tensor& x = in(n, 0);
    const std::vector<int32_t>& labels = in(n, 1).ids;
    const size_t classes = size_t(x.last_dim), positions = size_t(n.rows);
    const double dloss = grad ? out(n).grad[0] / double(positions) : 0.0;
    double total = 0;
    for (size_t r = 0; r < positions; ++r) {
      const float* row = &x.value[r * classes];
      if (labels[r] < 0 || size_t(labels[r]) >= classes)
        sdk::invalid("example_naive: label " + std::to_string(labels[r]) + " out of [0, " +
                     std::to_string(classes) + ")");
      const double top = *std::max_element(row, row + classes);
      double sum = 0;
      for (size_t c = 0; c < classes; ++c) sum += std::exp(row[c] - top);
      total += std::log(sum) + top - row[labels[r]];
      for (size_t c = 0; grad && c < classes; ++c) {
        const double p = std::exp(row[c] - top) / sum - (c == size_t(labels[r]) ? 1.0 : 0.0);
        x.grad[r * classes + c] += float(p * dloss);
      }
    }
    return total / double(positions);
  }

  void backward_node(const Node& n) {
    const std::vector<float>& dy = out(n).grad;
    Tensor& x = in(n, 0);
    switch (n.op) {
      case DLHOST_OP_FC:
        return fc_backward(n, x, dy);
      case DLHOST_OP_CONV2D:
        return conv2d(n, true);
      case DLHOST_OP_ACTIVATION:
        for (size_t i = 0; i < dy.size(); ++i) {
          const float y = out(n).value[i];
          x.grad[i] += dy[i] * (n.activation == DLHOST_ACTIVATION_RELU      ? (y > 0 ? 1.0f : 0.0f)
                                : n.activation == DLHOST_ACTIVATION_SIGMOID ? y * (1 - y)
                                                                            : 1 - y * y);
        }
        return;
      case DLHOST_OP_ADD:
        for (size_t i = 0; i < dy.size(); ++i) {
          x.grad[i] += dy[i];
          in(n, 1).grad[i] += dy[i];
        }
        return;
      case DLHOST_OP_MSE_LOSS: {
        Tensor& t = in(n, 1);
        const double scale = 2.0 * dy[0] / double(x.value.size());
        for (size_t i = 0; i < x.value.size(); ++i) {
          const float d = float(scale * (double(x.value[i]) - t.value[i]));
          x.grad[i] += d;
          t.grad[i] -= d;
        }
        return;
      }
      case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
        cross_entropy(n, true);
        return;
    }
  }

  // Direct convolution, one output element at a time. Forward: y = b + sum x * w over the
  // window. Backward (`grad`): the same loops send dy back to dx, dw and db (sums in double).
  void conv2d(const Node& n, bool grad) {
    const sdk::Geometry2d& a = n.conv;
    Tensor &x = in(n, 0), &y = out(n);
    const int64_t N = a.n, C = a.c, H = a.h, W = a.w, OC = a.oc, OH = a.oh, OW = a.ow;
    const int64_t cg = C / a.groups, og = OC / a.groups;  // channels per group
    Param& w = params_[size_t(n.params[0])];
    std::vector<double> dw(grad ? w.value.size() : 0), db(grad ? size_t(OC) : 0);
    for (int64_t b = 0; b < N; ++b)
      for (int64_t oc = 0; oc < OC; ++oc)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const size_t yi = size_t(((b * OC + oc) * OH + oh) * OW + ow);
            const double dy = grad ? y.grad[yi] : 0.0;
            double sum = n.params.size() > 1 ? params_[size_t(n.params[1])].value[oc] : 0.0;
            for (int64_t ic = 0; ic < cg; ++ic)
              for (int64_t kh = 0; kh < a.kh; ++kh)
                for (int64_t kw = 0; kw < a.kw; ++kw) {
                  const int64_t ih = oh * a.sh - a.ph + kh * a.dh;
                  const int64_t iw = ow * a.sw - a.pw + kw * a.dw;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const size_t xi = size_t(((b * C + oc / og * cg + ic) * H + ih) * W + iw);
                  const size_t wi = size_t(((oc * cg + ic) * a.kh + kh) * a.kw + kw);
                  if (!grad) {
                    sum += double(x.value[xi]) * w.value[wi];
                  } else {
                    x.grad[xi] += float(dy * w.value[wi]);
                    dw[wi] += dy * x.value[xi];
                  }
                }
            if (!grad) y.value[yi] = float(sum);
            if (grad) db[size_t(oc)] += dy;
          }
    if (!grad) return;
    std::copy(dw.begin(), dw.end(), w.grad.begin());
    if (n.params.size() > 1)
      std::copy(db.begin(), db.end(), params_[size_t(n.params[1])].grad.begin());
  }

  // dx[r, i] += sum_o dy[r, o] W[o, i]; dW[o, i] = sum_r dy[r, o] x[r, i]; db[o] = sum_r dy[r, o]
  void fc_backward(const Node& n, Tensor& x, const std::vector<float>& dy) {
    Param& w = params_[size_t(n.params[0])];
    const size_t rows = size_t(n.rows), ins = x.value.size() / rows, outs = dy.size() / rows;
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < ins; ++i) {
        double sum = 0;
        for (size_t o = 0; o < outs; ++o) sum += double(dy[r * outs + o]) * w.value[o * ins + i];
        x.grad[r * ins + i] += float(sum);
      }
    for (size_t o = 0; o < outs; ++o) {
      for (size_t i = 0; i < ins; ++i) {
        double sum = 0;
        for (size_t r = 0; r < rows; ++r) sum += double(dy[r * outs + o]) * x.value[r * ins + i];
        w.grad[o * ins + i] = float(sum);
      }
      if (n.params.size() > 1) {
        double sum = 0;
        for (size_t r = 0; r < rows; ++r) sum += dy[r * outs + o];
        params_[size_t(n.params[1])].grad[o] = float(sum);
      }
    }
  }

  dlhost_optimizer_desc opt_;
  std::vector<Tensor> tensors_;
  std::vector<Param> params_;
  std::vector<Node> nodes_;
  std::vector<int32_t> inputs_;
  int32_t loss_ = -1;
  uint64_t param_bytes_ = 0, workspace_bytes_ = 0;
};

class NaiveBackend final : public sdk::Backend<Context> {
 public:
  sdk::Device device(int32_t) const override { return sdk::cpu_device("generic"); }
  std::string library() const override { return "naive loops (example_naive 1.0.0)"; }
  int32_t query() const override { return -200; }  // never the host's own choice

  std::unique_ptr<Context> open(int32_t, const sdk::Options& options) override {
    auto c = std::make_unique<Context>();
    c->seed = options.get_int("seed", c->seed);
    return c;
  }
  std::unique_ptr<sdk::Model> compile(Context&, const dlhost_graph& graph,
                                      const dlhost_optimizer_desc& optimizer,
                                      const sdk::Options&) override {
    if (optimizer.kind != DLHOST_OPTIMIZER_SGD)
      sdk::unimplemented("example_naive: only SGD is implemented");
    return std::make_unique<NaiveModel>(graph, optimizer);
  }
};

}  // namespace naive

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<naive::NaiveBackend>(
      host, {"example_naive", "1.0.0", "example out-of-tree backend: naive float32 loops"});
}
