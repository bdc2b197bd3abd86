// lenet_backend.cpp — `example_lenet`, the backend a vendor writes first: every op LeNet needs
// (2-D convolution, max and average pooling, fully connected, ReLU/sigmoid/tanh, softmax
// cross-entropy; MSE, which conform's op problems train with) as plain single-threaded float32
// loops, on the SDK's kits and nothing else:
// - backend_kit.hpp fills the C table, checks handles, turns exceptions into statuses;
// - cpu_kit.hpp's CpuModel owns every tensor and parameter in host memory and implements
//   set_input, the parameter reads and writes, the SGD update in the documented order, loss and
//   model_info;
// - graph_access.hpp reads the graph: typed attributes, inputs checked, conv/pool/fc geometry.
// What is left here is the kernels (forward and backward of each op) and a few lines of glue.
// Any other op is UNIMPLEMENTED, so `dlhost conform` reports it so rather than FAILED.
// Thread-safety: a model is used from one host thread at a time (the ABI's rule); no locks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/backend_kit.hpp"
#include "dlhost/cpu_kit.hpp"
#include "dlhost/graph_access.hpp"

namespace lenet {

namespace sdk = dlhost::sdk;

struct Node {
  int32_t op = 0;
  std::vector<int32_t> in, params;
  int32_t out = -1;
  int32_t kind = 0;             // ACTIVATION: the function; POOL2D: max or average
  bool include_pad = false;     // POOL2D average: divide by the whole window (Caffe)
  sdk::Geometry2d window;       // CONV2D, POOL2D
  sdk::FcGeometry fc;           // FC
  std::vector<int64_t> argmax;  // POOL2D max: which input element won, per output
};

class LenetModel final : public sdk::CpuModel {
 public:
  LenetModel(const dlhost_graph& g, const dlhost_optimizer_desc& opt) : CpuModel(g, opt) {
    implementation_ = "plain loops (example_lenet)";
    for (int32_t k = 0; k < g.num_nodes; ++k) lower(g, *g.nodes[k]);
  }

  void forward() override {
    for (Node& n : nodes_) switch (n.op) {
        case DLHOST_OP_FC:
          fc(n, false);
          break;
        case DLHOST_OP_CONV2D:
          conv2d(n, false);
          break;
        case DLHOST_OP_POOL2D:
          pool2d(n, false);
          break;
        case DLHOST_OP_ACTIVATION:
          activation(n, false);
          break;
        case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
          out(n).value[0] = float(cross_entropy(n, false));
          break;
        case DLHOST_OP_MSE_LOSS:
          mse(n, false);
          break;
      }
  }

  void backward(const dlhost_grad_ready* ready) override {
    begin_backward();
    for (auto n = nodes_.rbegin(); n != nodes_.rend(); ++n) {
      switch (n->op) {
        case DLHOST_OP_FC:
          fc(*n, true);
          break;
        case DLHOST_OP_CONV2D:
          conv2d(*n, true);
          break;
        case DLHOST_OP_POOL2D:
          pool2d(*n, true);
          break;
        case DLHOST_OP_ACTIVATION:
          activation(*n, true);
          break;
        case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
          cross_entropy(*n, true);
          break;
        case DLHOST_OP_MSE_LOSS:
          mse(*n, true);
          break;
      }
      grad_ready(ready, n->params);
    }
  }

 private:
  // Compile: each node's geometry, read once from the graph (the kit checks it).
  void lower(const dlhost_graph& g, const dlhost_node& d) {
    if (d.op == DLHOST_OP_INPUT) return;  // fed by set_input
    Node n;
    n.op = d.op;
    n.in.assign(d.inputs, d.inputs + d.num_inputs);
    n.params.assign(d.params, d.params + d.num_params);
    n.out = d.output;
    switch (d.op) {
      case DLHOST_OP_FC:
        n.fc = sdk::fc_geometry(g, d);
        break;
      case DLHOST_OP_CONV2D:
        n.window = sdk::conv2d_geometry(g, d);
        break;
      case DLHOST_OP_POOL2D: {
        n.window = sdk::pool2d_geometry(g, d);
        const auto& a = sdk::node_attrs<dlhost_pool2d_attrs>(d);
        if (a.kind != DLHOST_POOL_MAX && a.kind != DLHOST_POOL_AVG)
          sdk::unimplemented("example_lenet: pooling kind " + std::to_string(a.kind));
        n.kind = a.kind;
        n.include_pad = a.count_include_pad != 0;
        n.argmax.resize(size_t(out(n).count()));
        break;
      }
      case DLHOST_OP_ACTIVATION:
        sdk::expect_inputs(g, d, 1);
        n.kind = sdk::node_attrs<dlhost_activation_attrs>(d).kind;
        break;
      case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
      case DLHOST_OP_MSE_LOSS:
        sdk::expect_inputs(g, d, 2);
        break;
      default:
        sdk::unimplemented("example_lenet: " + sdk::op_name(d.op) + " (" + sdk::node_label(d) +
                           ") is not implemented");
    }
    nodes_.push_back(std::move(n));
  }

  sdk::HostTensor& in(const Node& n, size_t k) { return tensor(n.in[k]); }
  sdk::HostTensor& out(const Node& n) { return tensor(n.out); }
  std::vector<float>* bias(const Node& n, bool grad) {
    if (n.params.size() < 2) return nullptr;
    return grad ? &param(n.params[1]).grad : &param(n.params[1]).value;
  }

  // y[r, o] = b[o] + sum_i x[r, i] W[o, i]. Backward: dx += dy W, dW = dy^T x, db = sum_r dy.
  void fc(const Node& n, bool grad) {
    sdk::HostTensor &x = in(n, 0), &y = out(n);
    sdk::HostParam& w = param(n.params[0]);
    const int64_t R = n.fc.rows, I = n.fc.in, O = n.fc.out;
    std::vector<float>* b = bias(n, grad);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t o = 0; o < O; ++o) {
        const float* xr = &x.value[size_t(r * I)];
        const float* wo = &w.value[size_t(o * I)];
        if (!grad) {
          double sum = b != nullptr ? (*b)[size_t(o)] : 0.0;
          for (int64_t i = 0; i < I; ++i) sum += double(xr[i]) * wo[i];
          y.value[size_t(r * O + o)] = float(sum);
          continue;
        }
        const float dy = y.grad[size_t(r * O + o)];
        float* dw = &w.grad[size_t(o * I)];
        if (r == 0) std::fill(dw, dw + I, 0.0f);
        if (b != nullptr) (*b)[size_t(o)] = (r == 0 ? 0.0f : (*b)[size_t(o)]) + dy;
        for (int64_t i = 0; i < I; ++i) {
          x.grad[size_t(r * I + i)] += dy * wo[i];
          dw[i] += dy * xr[i];
        }
      }
  }

  // Direct convolution, one output element at a time. Forward: y = b + sum x * w over the
  // window. Backward: the same loops send dy back to dx, dw and db (sums in double).
  void conv2d(const Node& n, bool grad) {
    const sdk::Geometry2d& a = n.window;
    sdk::HostTensor &x = in(n, 0), &y = out(n);
    sdk::HostParam& w = param(n.params[0]);
    const int64_t cg = a.c / a.groups, og = a.oc / a.groups;  // channels per group
    std::vector<double> dw(grad ? w.value.size() : 0), db(grad ? size_t(a.oc) : 0);
    const std::vector<float>* b = bias(n, false);
    for (int64_t s = 0; s < a.n; ++s)
      for (int64_t oc = 0; oc < a.oc; ++oc)
        for (int64_t oh = 0; oh < a.oh; ++oh)
          for (int64_t ow = 0; ow < a.ow; ++ow) {
            const size_t yi = size_t(((s * a.oc + oc) * a.oh + oh) * a.ow + ow);
            const double dy = grad ? y.grad[yi] : 0.0;
            double sum = b != nullptr ? (*b)[size_t(oc)] : 0.0;
            for (int64_t ic = 0; ic < cg; ++ic)
              for (int64_t kh = 0; kh < a.kh; ++kh)
                for (int64_t kw = 0; kw < a.kw; ++kw) {
                  const int64_t ih = oh * a.sh - a.ph + kh * a.dh,
                                iw = ow * a.sw - a.pw + kw * a.dw;
                  if (ih < 0 || ih >= a.h || iw < 0 || iw >= a.w) continue;
                  const size_t xi = size_t(((s * a.c + oc / og * cg + ic) * a.h + ih) * a.w + iw);
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
    if (std::vector<float>* dbias = bias(n, true)) std::copy(db.begin(), db.end(), dbias->begin());
  }

  // Max: the first largest element of the window (its index kept for backward). Average: the
  // sum over the valid elements over the window (count_include_pad: clipped to the padded input)
  // or over the valid ones.
  void pool2d(Node& n, bool grad) {
    const sdk::Geometry2d& a = n.window;
    sdk::HostTensor &x = in(n, 0), &y = out(n);
    for (int64_t plane = 0; plane < a.n * a.c; ++plane)
      for (int64_t oh = 0; oh < a.oh; ++oh)
        for (int64_t ow = 0; ow < a.ow; ++ow) {
          int64_t h0 = oh * a.sh - a.ph, w0 = ow * a.sw - a.pw;
          int64_t h1 = std::min(h0 + a.kh, a.h + a.ph), w1 = std::min(w0 + a.kw, a.w + a.pw);
          const int64_t window = (h1 - h0) * (w1 - w0);
          h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
          h1 = std::min(h1, a.h), w1 = std::min(w1, a.w);
          const size_t yi = size_t((plane * a.oh + oh) * a.ow + ow);
          const int64_t base = plane * a.h * a.w;
          const double divisor = double(n.include_pad ? window : (h1 - h0) * (w1 - w0));
          if (n.kind == DLHOST_POOL_MAX && grad) {
            x.grad[size_t(n.argmax[yi])] += y.grad[yi];
            continue;
          }
          double acc = n.kind == DLHOST_POOL_MAX ? -std::numeric_limits<double>::infinity() : 0.0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) {
              const int64_t xi = base + ih * a.w + iw;
              if (n.kind != DLHOST_POOL_MAX && grad)
                x.grad[size_t(xi)] += float(y.grad[yi] / divisor);
              else if (n.kind != DLHOST_POOL_MAX)
                acc += x.value[size_t(xi)];
              else if (x.value[size_t(xi)] > acc)
                acc = x.value[size_t(xi)], n.argmax[yi] = xi;
            }
          if (!grad) y.value[yi] = float(n.kind == DLHOST_POOL_MAX ? acc : acc / divisor);
        }
  }

  // relu / sigmoid / tanh; backward from the output y.
  void activation(const Node& n, bool grad) {
    sdk::HostTensor &x = in(n, 0), &y = out(n);
    for (size_t i = 0; i < y.value.size(); ++i) {
      if (!grad) {
        const float v = x.value[i];
        y.value[i] = n.kind == DLHOST_ACTIVATION_RELU      ? std::max(v, 0.0f)
                     : n.kind == DLHOST_ACTIVATION_SIGMOID ? 1.0f / (1.0f + std::exp(-v))
                                                           : std::tanh(v);
        continue;
      }
      const float v = y.value[i];
      x.grad[i] += y.grad[i] * (n.kind == DLHOST_ACTIVATION_RELU      ? (v > 0 ? 1.0f : 0.0f)
                                : n.kind == DLHOST_ACTIVATION_SIGMOID ? v * (1 - v)
                                                                      : 1 - v * v);
    }
  }

  // Mean over rows of -log softmax(x)[label]; with `grad`, adds its gradient to dx.
  double cross_entropy(const Node& n, bool grad) {
    sdk::HostTensor &x = in(n, 0), &labels = in(n, 1);
    const size_t classes = size_t(x.dims.back()), rows = labels.ids.size();
    const double dloss = grad ? out(n).grad[0] / double(rows) : 0.0;
    double total = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float* row = &x.value[r * classes];
      const int32_t label = labels.ids[r];
      if (label < 0 || size_t(label) >= classes)
        sdk::invalid("example_lenet: label " + std::to_string(label) + " out of [0, " +
                     std::to_string(classes) + ")");
      const double top = *std::max_element(row, row + classes);
      double sum = 0;
      for (size_t c = 0; c < classes; ++c) sum += std::exp(row[c] - top);
      total += std::log(sum) + top - row[label];
      for (size_t c = 0; grad && c < classes; ++c) {
        const double p = std::exp(row[c] - top) / sum - (c == size_t(label) ? 1.0 : 0.0);
        x.grad[r * classes + c] += float(p * dloss);
      }
    }
    return total / double(rows);
  }

  // sum((x - t)^2) / elements; backward: 2 (x - t) / elements to x, its negation to t.
  void mse(const Node& n, bool grad) {
    sdk::HostTensor &x = in(n, 0), &t = in(n, 1);
    const double scale = grad ? 2.0 * out(n).grad[0] / double(x.value.size()) : 0.0;
    double sum = 0;
    for (size_t i = 0; i < x.value.size(); ++i) {
      const double d = double(x.value[i]) - t.value[i];
      sum += d * d;
      if (grad) x.grad[i] += float(scale * d), t.grad[i] -= float(scale * d);
    }
    if (!grad) out(n).value[0] = float(sum / double(x.value.size()));
  }

  std::vector<Node> nodes_;
};

class LenetBackend final : public sdk::Backend<sdk::NoContext> {
 public:
  sdk::Device device(int32_t) const override { return sdk::cpu_device("generic"); }
  std::string library() const override { return "plain loops (example_lenet 1.0.0)"; }
  int32_t query() const override { return -200; }  // never the host's own choice
  std::optional<std::vector<sdk::OptionSpec>> options() const override { return sdk::no_options(); }
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities c;
    c.ops = {DLHOST_OP_INPUT,   DLHOST_OP_FC,         DLHOST_OP_CONV2D,
             DLHOST_OP_POOL2D,  DLHOST_OP_ACTIVATION, DLHOST_OP_SOFTMAX_CROSS_ENTROPY,
             DLHOST_OP_MSE_LOSS};
    return c;
  }
  bool reads_tensors() const override { return true; }  // CpuModel keeps every tensor

  std::unique_ptr<sdk::NoContext> open(int32_t, const sdk::Options&) override {
    return std::make_unique<sdk::NoContext>();
  }
  std::unique_ptr<sdk::Model> compile(sdk::NoContext&, const dlhost_graph& graph,
                                      const dlhost_optimizer_desc& optimizer,
                                      const sdk::Options&) override {
    return std::make_unique<LenetModel>(graph, optimizer);
  }
};

}  // namespace lenet

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<lenet::LenetBackend>(
      host, {"example_lenet", "1.0.0", "example backend: LeNet's ops as plain float32 loops"});
}
