// test_cpu_onednn.cpp — tests of the cpu_onednn backend plugin through its C table, as the host
// drives it: forward values against naive references, every op's backward against central
// finite differences (ABI 1.0 and 1.1 ops: batch norm, dropout's pinned mask, residual add, LRN,
// global average pooling, per-step FC, sequence cross-entropy, embedding, LSTM; ABI 1.4's layer
// norm, GELU, attention, position embedding and tied output layer), the SGD and AdamW updates
// against their formulas, precision bf16 against fp32 (where the CPU has bf16 products), canonical
// parameter I/O, two small learnable tasks (an MLP, a language model), and the errors compile and
// set_input must return. Only the ABI is used: batch norm's running statistics, which no ABI call
// exposes, are checked by the white-box tests/plugins/cpu_onednn/test_cpu_onednn_internals.cpp,
// built with the plugin's sources.
//
// Forward values of a hidden op are read through a "probe": the op's output feeds an FC with one
// output, zero weights and zero bias, and an MSE loss against a target of -0.5 at batch 1. Then
// dL/dy = 1 and the probe's weight gradient equals the op's output, flattened in NCHW order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "adamw_reference.h"
#include "build_plugin.h"
#include "core/graph.h"
#include "core/host_api.h"
#include "graph_attrs.h"

// The build under test: cpu_onednn (Debian's oneDNN 2.6), or cpu_onednn3 (the oneDNN 3 wheel) for
// tests/plugins/cpu_onednn3' test_cpu_onednn3, the same tests compiled a second time.
#ifndef DLHOST_TEST_ONEDNN_PLUGIN
#define DLHOST_TEST_ONEDNN_PLUGIN "cpu_onednn"
#endif

namespace dlhost {
namespace {

const dlhost_backend_api* backend() {
  return test_plugins::build_plugin(DLHOST_PLUGIN_BACKEND, DLHOST_TEST_ONEDNN_PLUGIN)
      .table->backend;
}

struct Outcome {
  int32_t code = DLHOST_CODE_OK;
  std::string message;
};
Outcome take(dlhost_status* s) {
  if (s == nullptr) return {};
  Outcome o{host_api()->status_code(s), host_api()->status_message(s)};
  host_api()->status_destroy(s);
  return o;
}

// --- attribute helpers -------------------------------------------------------------------------

using namespace dlhost::test_attrs;

std::vector<float> uniform(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Sgd {
  float lr = 0.0f, momentum = 0.0f, weight_decay = 0.0f, clip_norm = 0.0f;
};

// One compiled model: context, model, and the graph it was compiled from.
class Session {
 public:
  explicit Session(std::unique_ptr<Graph> graph, Sgd sgd = {}, int threads = 1, int64_t seed = 42)
      : Session(test_attrs::sgd(sgd.lr, sgd.momentum, sgd.weight_decay, sgd.clip_norm),
                std::move(graph), threads, seed) {}
  // Any optimizer (ABI 1.4: AdamW), a precision mode ("" leaves the option unset: fp32), and
  // the host's fused_step (ABI 1.4: nothing reads the gradients between backward and update).
  Session(const dlhost_optimizer_desc& opt, std::unique_ptr<Graph> graph, int threads = 1,
          int64_t seed = 42, const std::string& precision = "", bool fused_step = false)
      : graph_(std::move(graph)), api_(backend()) {
    dlhost_options options;
    options.values["threads"] = std::to_string(threads);
    options.values["seed"] = std::to_string(seed);
    if (!precision.empty()) options.values["precision"] = precision;
    if (fused_step) options.values["fused_step"] = "1";
    check_status(api_->context_create(0, &options, &context_), "context_create");
    Outcome o = take(api_->compile(context_, graph_->view(), &opt, &options, &model_));
    if (o.code != DLHOST_CODE_OK) {
      api_->context_destroy(context_);
      throw Error(static_cast<dlhost_code>(o.code), "compile: " + o.message);
    }
  }
  ~Session() {
    api_->model_destroy(model_);
    api_->context_destroy(context_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Graph& graph() const { return *graph_; }
  dlhost_model* model() { return model_; }
  const dlhost_backend_api* api() { return api_; }
  // model_info's implementation string ("conv fwd=..., gemm bwd + sgd=dnnl_sgemm, ...").
  std::string implementation() {
    dlhost_model_info info{};
    info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
    check_status(api_->model_info(model_, &info), "model_info");
    return info.implementation;
  }

  int32_t param_id(const std::string& name) const {
    for (int32_t i = 0; i < graph_->num_params(); ++i)
      if (graph_->param(i).name == name) return i;
    throw std::runtime_error("no parameter " + name);
  }
  int64_t count(int32_t param) const { return graph_->param(param).count; }

  void set(int32_t tensor, const std::vector<float>& v) {
    check_status(api_->set_input(model_, tensor, v.data(), v.size() * 4), "set_input");
  }
  void set_labels(int32_t tensor, const std::vector<int32_t>& v) {
    check_status(api_->set_input(model_, tensor, v.data(), v.size() * 4), "set_input");
  }
  float loss() {
    check_status(api_->forward(model_), "forward");
    float l = 0.0f;
    check_status(api_->read_loss(model_, &l), "read_loss");
    return l;
  }
  void backward(const dlhost_grad_ready* ready = nullptr) {
    check_status(api_->backward(model_, ready), "backward");
  }
  void update() { check_status(api_->update(model_), "update"); }
  float step() {
    float l = loss();
    backward();
    update();
    return l;
  }
  std::vector<float> get(int32_t param, int32_t part = DLHOST_PARAM_VALUE) {
    std::vector<float> v(count(param));
    check_status(api_->read_param(model_, param, part, v.data(), v.size() * 4), "read_param");
    return v;
  }
  void put(int32_t param, const std::vector<float>& v, int32_t part = DLHOST_PARAM_VALUE) {
    check_status(api_->write_param(model_, param, part, v.data(), v.size() * 4), "write_param");
  }
  // Xavier-like uniform values, so that activations stay in a useful range.
  void randomize(std::mt19937& rng) {
    for (int32_t p = 0; p < graph_->num_params(); ++p) {
      const auto& d = graph_->param(p);
      float a = std::sqrt(3.0f / static_cast<float>(std::max<int64_t>(d.fan_in, 1)));
      put(p, uniform(d.count, rng, -a, a));
    }
  }

 private:
  std::unique_ptr<Graph> graph_;
  const dlhost_backend_api* api_;
  dlhost_context* context_ = nullptr;
  dlhost_model* model_ = nullptr;
};

// Compares every parameter's gradient with central differences of the loss, on up to `samples`
// entries per parameter. Forward/backward run twice first: backward must overwrite gradients.
void expect_gradients_match(Session& s, float eps, float atol = 5e-4f, float rtol = 3e-2f,
                            int samples = 10) {
  s.loss();
  s.backward();
  s.loss();
  s.backward();
  std::mt19937 pick(7);
  for (int32_t p = 0; p < s.graph().num_params(); ++p) {
    const std::string name = s.graph().param(p).name;
    std::vector<float> grad = s.get(p, DLHOST_PARAM_GRAD);
    std::vector<float> w = s.get(p);
    double magnitude = 0.0;
    for (float g : grad) magnitude += std::fabs(g);
    EXPECT_GT(magnitude, 1e-6) << name << ": gradient is all zeros";
    std::vector<int64_t> idx(w.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
    std::shuffle(idx.begin(), idx.end(), pick);
    if (static_cast<int>(idx.size()) > samples) idx.resize(samples);
    for (int64_t i : idx) {
      std::vector<float> probe = w;
      probe[i] = w[i] + eps;
      s.put(p, probe);
      const double plus = s.loss();
      probe[i] = w[i] - eps;
      s.put(p, probe);
      const double minus = s.loss();
      const double fd = (plus - minus) / (2.0 * eps);
      const double tol = atol + rtol * std::max(std::fabs(fd), std::fabs(double(grad[i])));
      EXPECT_NEAR(grad[i], fd, tol) << name << "[" << i << "]";
    }
    s.put(p, w);
  }
}

// A classifier head: fc(classes) and softmax cross-entropy with labels.
std::unique_ptr<Graph> with_ce_head(GraphBuilder& b, int32_t x, int64_t classes, int32_t* labels) {
  int32_t logits = b.fc("head", x, fc(classes));
  *labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", logits, *labels);
  return b.finish();
}

// Builds data -> body -> head -> CE, randomizes everything and checks gradients.
void check_ce_gradients(const std::string& name, int64_t batch, const std::vector<int64_t>& shape,
                        const std::function<int32_t(GraphBuilder&, int32_t)>& body, float eps,
                        float atol = 5e-4f) {
  SCOPED_TRACE(name);
  GraphBuilder b(name, batch);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, shape);
  int32_t labels = -1;
  auto graph = with_ce_head(b, body(b, data), 3, &labels);
  const auto& in = graph->tensor(data);
  int64_t n = 1;
  for (int32_t i = 0; i < in.rank; ++i) n *= in.dims[i];
  Session s(std::move(graph));
  std::mt19937 rng(1234);
  s.randomize(rng);
  s.set(data, uniform(n, rng));
  std::vector<int32_t> y(batch);
  for (int64_t i = 0; i < batch; ++i) y[i] = static_cast<int32_t>(i % 3);
  s.set_labels(labels, y);
  expect_gradients_match(s, eps, atol);
}

// --- forward through a probe -------------------------------------------------------------------

// Returns the output of `body` at batch 1 (NCHW order) for `input`; `init` sets body params.
std::vector<float> probe_output(const std::vector<int64_t>& shape, const std::vector<float>& input,
                                const std::function<int32_t(GraphBuilder&, int32_t)>& body,
                                const std::function<void(Session&)>& init) {
  GraphBuilder b("probe", 1);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, shape);
  int32_t out = b.fc("probe", body(b, data), fc(1));
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {1});
  b.mse_loss("loss", out, target);
  Session s(b.finish());
  init(s);
  const int32_t w = s.param_id("probe.weight"), bias = s.param_id("probe.bias");
  s.put(w, std::vector<float>(s.count(w), 0.0f));
  s.put(bias, {0.0f});
  s.set(data, input);
  s.set(target, {-0.5f});
  EXPECT_FLOAT_EQ(s.loss(), 0.25f);
  s.backward();
  return s.get(w, DLHOST_PARAM_GRAD);
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

std::vector<double> reference_conv(const std::vector<float>& x, int64_t c, int64_t h, int64_t w,
                                   const std::vector<float>& wt, const std::vector<float>& bias,
                                   int64_t oc, int64_t k, int64_t s, int64_t p, int64_t d) {
  const int64_t oh = (h + 2 * p - (d * (k - 1) + 1)) / s + 1;
  const int64_t ow = (w + 2 * p - (d * (k - 1) + 1)) / s + 1;
  std::vector<double> y(oc * oh * ow);
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double sum = bias[o];
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t ki = 0; ki < k; ++ki)
            for (int64_t kj = 0; kj < k; ++kj) {
              const int64_t hi = i * s - p + ki * d, wj = j * s - p + kj * d;
              if (hi < 0 || hi >= h || wj < 0 || wj >= w) continue;
              sum += double(wt[((o * c + ci) * k + ki) * k + kj]) * x[(ci * h + hi) * w + wj];
            }
        y[(o * oh + i) * ow + j] = sum;
      }
  return y;
}

// Pooling as Caffe and PyTorch define it (dlhost_graph.h): ceil-mode windows clipped to the
// padded input for the include-padding divisor, to the input for max and exclude-padding.
std::vector<double> reference_pool(const std::vector<float>& x, int64_t c, int64_t h, int64_t w,
                                   const dlhost_pool2d_attrs& a) {
  auto out_size = [&](int64_t in) {
    int64_t span = in + 2 * a.pad_h - a.kernel_h;
    int64_t out = (a.ceil_mode ? (span + a.stride_h - 1) / a.stride_h : span / a.stride_h) + 1;
    if (a.ceil_mode && (out - 1) * a.stride_h >= in + a.pad_h) --out;
    return out;
  };
  const int64_t oh = out_size(h), ow = out_size(w), k = a.kernel_h, s = a.stride_h, p = a.pad_h;
  std::vector<double> y;
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int64_t h0 = i * s - p, w0 = j * s - p;
        int64_t h1 = std::min(h0 + k, h + p), w1 = std::min(w0 + k, w + p);
        const double padded_count = double((h1 - h0) * (w1 - w0));
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, h);
        w1 = std::min(w1, w);
        double acc = a.kind == DLHOST_POOL_MAX ? -1e30 : 0.0;
        for (int64_t hi = h0; hi < h1; ++hi)
          for (int64_t wj = w0; wj < w1; ++wj) {
            const double v = x[(ci * h + hi) * w + wj];
            acc = a.kind == DLHOST_POOL_MAX ? std::max(acc, v) : acc + v;
          }
        if (a.kind == DLHOST_POOL_AVG)
          acc /= a.count_include_pad ? padded_count : double((h1 - h0) * (w1 - w0));
        y.push_back(acc);
      }
  return y;
}

// --- device and info ---------------------------------------------------------------------------

TEST(cpu_onednn, DescribesTheDevice) {
  const dlhost_backend_api* api = backend();
  ASSERT_EQ(api->device_count(), 1);
  const dlhost_device_info* info = nullptr;
  ASSERT_EQ(take(api->device_info(0, &info)).code, DLHOST_CODE_OK);
  EXPECT_STREQ(info->name, "cpu0");
  EXPECT_EQ(info->kind, DLHOST_DEVICE_CPU);
  EXPECT_GE(info->cores, 1);
  EXPECT_GT(info->memory_bytes, 1ull << 28);
  EXPECT_STRNE(info->model, "");
  EXPECT_STRNE(info->isa, "");
  EXPECT_EQ(std::string(info->library).rfind("oneDNN ", 0), 0u) << info->library;
  EXPECT_NE(std::string(info->library).find("cpu_runtime=OMP"), std::string::npos);
  // A device index past the end is OUT_OF_RANGE in every backend on the SDK's kit.
  EXPECT_EQ(take(api->device_info(1, &info)).code, DLHOST_CODE_OUT_OF_RANGE);
}

TEST(cpu_onednn, ReportsModelInfoAndMemory) {
  GraphBuilder b("info", 4);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {3, 8, 8});
  int32_t labels = -1;
  x = b.conv2d("conv", x, conv(16, 3, 1, 1));
  Session s(with_ce_head(b, x, 3, &labels), {}, 2);
  dlhost_model_info info{};
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  check_status(s.api()->model_info(s.model(), &info), "model_info");
  EXPECT_EQ(info.threads, 2);
  EXPECT_NE(std::string(info.implementation).find("conv fwd="), std::string::npos)
      << info.implementation;
  EXPECT_NE(std::string(info.implementation).find("ip fwd="), std::string::npos);
  const int64_t params = 16 * 3 * 9 + 16 + 3 * 16 * 8 * 8 + 3;
  EXPECT_GE(info.param_bytes, uint64_t(params * 4));
  EXPECT_GT(info.workspace_bytes, uint64_t(4 * 16 * 8 * 8 * 4));
  uint64_t in_use = 0;
  check_status(s.api()->memory_in_use(s.model(), &in_use), "memory_in_use");
  EXPECT_EQ(in_use, info.param_bytes + info.workspace_bytes);
}

// --- forward values ----------------------------------------------------------------------------

TEST(cpu_onednn, ConvForwardMatchesReference) {
  std::mt19937 rng(3);
  const int64_t c = 3, h = 9, w = 7, oc = 5, k = 3;
  std::vector<float> x = uniform(c * h * w, rng), wt = uniform(oc * c * k * k, rng),
                     bias = uniform(oc, rng);
  auto got = probe_output(
      {c, h, w}, x,
      [&](GraphBuilder& b, int32_t in) { return b.conv2d("conv", in, conv(oc, k, 2, 1, 2)); },
      [&](Session& s) {
        s.put(s.param_id("conv.weight"), wt);
        s.put(s.param_id("conv.bias"), bias);
      });
  expect_close(got, reference_conv(x, c, h, w, wt, bias, oc, k, 2, 1, 2), 1e-4);
}

TEST(cpu_onednn, PoolForwardMatchesReference) {
  std::mt19937 rng(4);
  const int64_t h = 6, w = 6;
  // 9 channels: a plain input wide enough to be pooled in a channel-blocked copy (one partial
  // block); 2 channels: pooled as it is.
  for (int64_t c : {2, 9})
    for (dlhost_pool_kind kind : {DLHOST_POOL_MAX, DLHOST_POOL_AVG})
      for (bool ceil : {false, true})
        for (bool include : {false, true}) {
          if (kind == DLHOST_POOL_MAX && include) continue;
          SCOPED_TRACE(std::string(kind == DLHOST_POOL_MAX ? "max" : "avg") +
                       (ceil ? " ceil" : " floor") + (include ? " include" : " exclude") +
                       " c=" + std::to_string(c));
          std::vector<float> x = uniform(c * h * w, rng);
          // 6 + 2 - 3 = 5 is odd: ceil mode adds a window that reaches past the padding.
          auto a = pool(kind, 3, 2, 1, ceil, include);
          auto got = probe_output(
              {c, h, w}, x, [&](GraphBuilder& b, int32_t in) { return b.pool2d("pool", in, a); },
              [](Session&) {});
          expect_close(got, reference_pool(x, c, h, w, a), 1e-5);
        }
}

TEST(cpu_onednn, ActivationAndFcForwardMatchReference) {
  std::mt19937 rng(5);
  std::vector<float> x = uniform(2 * 3 * 3, rng, -3.0f, 3.0f);
  std::vector<float> wt = uniform(4 * 18, rng), bias = uniform(4, rng);
  for (auto kind : {DLHOST_ACTIVATION_RELU, DLHOST_ACTIVATION_SIGMOID, DLHOST_ACTIVATION_TANH}) {
    SCOPED_TRACE(kind);
    auto got = probe_output(
        {2, 3, 3}, x,
        [&](GraphBuilder& b, int32_t in) {
          int32_t y = b.fc("fc", in, fc(4));  // a 4-D source flattened by the inner product
          return b.activation("act", y, act(kind));
        },
        [&](Session& s) {
          s.put(s.param_id("fc.weight"), wt);
          s.put(s.param_id("fc.bias"), bias);
        });
    std::vector<double> want(4);
    for (int o = 0; o < 4; ++o) {
      double z = bias[o];
      for (int i = 0; i < 18; ++i) z += double(wt[o * 18 + i]) * x[i];
      want[o] = kind == DLHOST_ACTIVATION_RELU      ? std::max(z, 0.0)
                : kind == DLHOST_ACTIVATION_SIGMOID ? 1.0 / (1.0 + std::exp(-z))
                                                    : std::tanh(z);
    }
    expect_close(got, want, 1e-5);
  }
}

// data [2, 3, 5, 5] -> a 16-channel 3x3 convolution (blocked in oneDNN) -> [ReLU] -> FC 10 ->
// loss, trained one forward: what the read_tensor tests read back, with the convolution's
// exact values in double for comparison.
struct ReadTensorCase {
  static constexpr int64_t c = 3, h = 5, w = 5, oc = 16, k = 3;
  const dlhost_tensor_read_ext* ext = nullptr;
  std::vector<float> x, wt, bias;
  int32_t conv_out = -1, relu_out = -1, logits = -1, labels = -1;
  std::unique_ptr<Session> s;

  explicit ReadTensorCase(bool relu, unsigned seed) {
    const dlhost_extension* chain =
        test_plugins::build_plugin(DLHOST_PLUGIN_BACKEND, DLHOST_TEST_ONEDNN_PLUGIN)
            .table->extensions;
    ext = reinterpret_cast<const dlhost_tensor_read_ext*>(
        dlhost_find_extension(chain, DLHOST_EXT_TENSOR_READ));
    std::mt19937 rng(seed);
    x = uniform(2 * c * h * w, rng);
    wt = uniform(oc * c * k * k, rng);
    bias = uniform(oc, rng);
    GraphBuilder b("read", 2);
    const int32_t data = b.input("data", DLHOST_DTYPE_F32, {c, h, w});
    conv_out = b.conv2d("conv", data, conv(oc, k, 1, 1));
    if (relu) relu_out = b.activation("relu", conv_out, act(DLHOST_ACTIVATION_RELU));
    logits = b.fc("fc", relu ? relu_out : conv_out, fc(10));
    labels = b.input("labels", DLHOST_DTYPE_I32, {});
    b.softmax_cross_entropy("loss", logits, labels);
    s = std::make_unique<Session>(b.finish());
    s->put(s->param_id("conv.weight"), wt);
    s->put(s->param_id("conv.bias"), bias);
    s->set(data, x);
    s->set_labels(labels, {1, 2});
    s->loss();
  }
  Outcome read(int32_t tensor, std::vector<float>& out) const {
    return take(ext->read_tensor(s->model(), tensor, out.data(), out.size() * 4));
  }
  // The convolution's output of sample n, in double.
  std::vector<double> conv_of(int n) const {
    std::vector<float> xn(x.begin() + n * c * h * w, x.begin() + (n + 1) * c * h * w);
    return reference_conv(xn, c, h, w, wt, bias, oc, k, 1, 1, 1);
  }
};

// ABI 1.3: read_tensor hands back a tensor's value in the canonical layout, also where oneDNN
// keeps it blocked (a 16-channel convolution output), and refuses a wrong size.
TEST(cpu_onednn, ReadTensorGivesCanonicalValues) {
  ReadTensorCase t(false, 9);
  ASSERT_NE(t.ext, nullptr);
  ASSERT_GE(t.ext->struct_size, DLHOST_TENSOR_READ_EXT_STRUCT_SIZE);
  std::vector<float> got(2 * t.oc * t.h * t.w);
  ASSERT_EQ(t.read(t.conv_out, got).code, DLHOST_CODE_OK);
  for (int n = 0; n < 2; ++n) {
    const std::vector<double> want = t.conv_of(n);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[n * want.size() + i], want[i], 1e-4) << "sample " << n << " element " << i;
  }
  std::vector<float> scores(20), half(10), two(2);
  EXPECT_EQ(t.read(t.logits, scores).code, DLHOST_CODE_OK);
  EXPECT_EQ(t.read(t.logits, half).code, DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(t.read(t.labels, two).code, DLHOST_CODE_INVALID_ARGUMENT);
}

// A value an in-place successor overwrites (here the conv's, under its ReLU) is refused by
// read_tensor with a message naming that node, not handed back holding the ReLU's values; the
// ReLU's own output reads back as max(0, conv).
TEST(cpu_onednn, ReadTensorRefusesAValueOverwrittenInPlace) {
  ReadTensorCase t(true, 11);
  ASSERT_NE(t.ext, nullptr);
  std::vector<float> got(2 * t.oc * t.h * t.w);
  const Outcome refused = t.read(t.conv_out, got);
  EXPECT_EQ(refused.code, DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_NE(refused.message.find("relu writes its output over it in place"), std::string::npos)
      << refused.message;
  ASSERT_EQ(t.read(t.relu_out, got).code, DLHOST_CODE_OK);
  for (int n = 0; n < 2; ++n) {
    const std::vector<double> want = t.conv_of(n);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[n * want.size() + i], std::max(want[i], 0.0), 1e-4)
          << "sample " << n << " element " << i;
  }
}

TEST(cpu_onednn, LossValuesMatchReference) {
  std::mt19937 rng(6);
  const int64_t n = 3, f = 5, classes = 4;
  std::vector<float> x = uniform(n * f, rng), wt = uniform(classes * f, rng, -2, 2),
                     bias = uniform(classes, rng);
  std::vector<int32_t> labels = {2, 0, 3};
  std::vector<float> target = uniform(n * classes, rng);
  std::vector<double> z(n * classes);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < classes; ++o) {
      z[i * classes + o] = bias[o];
      for (int64_t j = 0; j < f; ++j) z[i * classes + o] += double(wt[o * f + j]) * x[i * f + j];
    }
  for (bool mse : {false, true}) {
    GraphBuilder b("loss", n);
    int32_t data = b.input("data", DLHOST_DTYPE_F32, {f});
    int32_t logits = b.fc("fc", data, fc(classes));
    int32_t second = mse ? b.input("target", DLHOST_DTYPE_F32, {classes})
                         : b.input("labels", DLHOST_DTYPE_I32, {});
    if (mse)
      b.mse_loss("loss", logits, second);
    else
      b.softmax_cross_entropy("loss", logits, second);
    Session s(b.finish());
    s.put(s.param_id("fc.weight"), wt);
    s.put(s.param_id("fc.bias"), bias);
    s.set(data, x);
    double want = 0.0;
    if (mse) {
      s.set(second, target);
      for (int64_t i = 0; i < n * classes; ++i) want += (z[i] - target[i]) * (z[i] - target[i]);
      want /= double(n * classes);
    } else {
      s.set_labels(second, labels);
      for (int64_t i = 0; i < n; ++i) {
        double mx = *std::max_element(z.begin() + i * classes, z.begin() + (i + 1) * classes);
        double sum = 0.0;
        for (int64_t o = 0; o < classes; ++o) sum += std::exp(z[i * classes + o] - mx);
        want += -(z[i * classes + labels[i]] - mx - std::log(sum));
      }
      want /= double(n);
    }
    EXPECT_NEAR(s.loss(), want, 1e-5 * std::max(1.0, want)) << (mse ? "mse" : "ce");
  }
}

// fc (2 features -> `classes`) then softmax cross-entropy over n rows, with its reference loss
// and gradients in double. Biases over [-60, 60] make probabilities underflow in float (the loss
// must stay finite); row 0's label is the least likely class.
struct CrossEntropyProblem {
  int64_t n = 0, f = 2, classes = 0;
  std::vector<float> x, wt, bias;
  std::vector<int32_t> labels;
  double want = 0.0;
  std::vector<double> want_bias, want_wt;

  CrossEntropyProblem(int64_t rows, int64_t classes_) : n(rows), classes(classes_) {
    std::mt19937 rng(7);
    x = uniform(n * f, rng);
    wt = uniform(classes * f, rng, -2, 2);
    bias = uniform(classes, rng, -60, 60);
    labels.resize(n);
    for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>((i * 9973 + 11) % classes);
    labels[0] = static_cast<int32_t>(std::min_element(bias.begin(), bias.end()) - bias.begin());
    want_bias.assign(classes, 0.0);
    want_wt.assign(classes * f, 0.0);
    std::vector<double> z(classes);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t o = 0; o < classes; ++o) {
        z[o] = bias[o];
        for (int64_t j = 0; j < f; ++j) z[o] += double(wt[o * f + j]) * x[i * f + j];
      }
      const double mx = *std::max_element(z.begin(), z.end());
      double sum = 0.0;
      for (double e : z) sum += std::exp(e - mx);
      const double lse = mx + std::log(sum);
      want -= (z[labels[i]] - lse) / double(n);
      for (int64_t o = 0; o < classes; ++o) {
        const double g = (std::exp(z[o] - lse) - (o == labels[i] ? 1.0 : 0.0)) / n;
        want_bias[o] += g;
        for (int64_t j = 0; j < f; ++j) want_wt[o * f + j] += g * x[i * f + j];
      }
    }
  }

  // A session on this problem's graph with its weights and inputs set.
  std::unique_ptr<Session> session(const dlhost_optimizer_desc& opt, int threads,
                                   bool fused_step) const {
    GraphBuilder b("ce", n);
    int32_t data = b.input("data", DLHOST_DTYPE_F32, {f});
    int32_t logits = b.fc("fc", data, fc(classes));
    int32_t lab = b.input("labels", DLHOST_DTYPE_I32, {});
    b.softmax_cross_entropy("loss", logits, lab);
    auto s = std::make_unique<Session>(opt, b.finish(), threads, 42, "", fused_step);
    s->put(s->param_id("fc.weight"), wt);
    s->put(s->param_id("fc.bias"), bias);
    s->set(data, x);
    s->set_labels(lab, labels);
    return s;
  }
};

TEST(cpu_onednn, CrossEntropyOverBlocksOfRowsMatchesReference) {
  // 70000 classes: the forward's log-softmax runs on blocks of 3 rows per thread (~1 MB), so 7
  // positions make blocks 3, 3, 1 at one thread and 6, 1 at two: the last block is partial.
  const CrossEntropyProblem p(7, 70000);
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    auto s = p.session(test_attrs::sgd(0.0f, 0.0f, 0.0f, 0.0f), threads, false);
    const float loss = s->loss();
    EXPECT_TRUE(std::isfinite(loss));
    EXPECT_NEAR(loss, p.want, 1e-5 * std::max(1.0, p.want));
    s->backward();
    expect_close(s->get(s->param_id("fc.bias"), DLHOST_PARAM_GRAD), p.want_bias, 1e-6);
    expect_close(s->get(s->param_id("fc.weight"), DLHOST_PARAM_GRAD), p.want_wt, 1e-6);
  }
}

// Under the host's fused_step the loss makes its input's gradient in forward (softmax per block
// of rows) and hands its column sums to the fc's bias gradient: checked through the update, as
// the gradient buffers need not hold the gradients then (lr 100 makes (before - after) / lr
// resolve the gradients well below the tolerance). 7 rows of 70000 classes: the underflowing
// rows and partial blocks above; 300 rows of 3000 classes. Plain SGD under fused_step puts
// both on the fc's GEMM path, whose bias step then reads the column sums.
TEST(cpu_onednn, FusedStepCrossEntropyUpdatesLikeTheReference) {
  const float lr = 100.0f;
  for (const auto& [n, classes] : {std::pair<int64_t, int64_t>{7, 70000}, {300, 3000}}) {
    const CrossEntropyProblem p(n, classes);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(n) + " rows, threads " + std::to_string(threads));
      auto s = p.session(test_attrs::sgd(lr, 0.0f, 0.0f, 0.0f), threads, true);
      const std::string implementation = s->implementation();
      EXPECT_NE(implementation.find("cross-entropy=gradient in forward"), std::string::npos)
          << implementation;
      const float loss = s->step();
      EXPECT_TRUE(std::isfinite(loss));
      EXPECT_NEAR(loss, p.want, 1e-5 * std::max(1.0, p.want));
      auto grad_of = [&](const std::vector<float>& before, const std::vector<float>& after) {
        std::vector<float> g(before.size());
        for (size_t i = 0; i < g.size(); ++i)
          g[i] = static_cast<float>((double(before[i]) - after[i]) / lr);
        return g;
      };
      expect_close(grad_of(p.bias, s->get(s->param_id("fc.bias"))), p.want_bias, 1e-6);
      expect_close(grad_of(p.wt, s->get(s->param_id("fc.weight"))), p.want_wt, 1e-6);
    }
  }
}

// --- gradients by finite differences -----------------------------------------------------------

TEST(cpu_onednn, FcGradients2D) {
  for (bool bias : {true, false})
    check_ce_gradients(
        bias ? "fc2d_bias" : "fc2d_nobias", 3, {5},
        [&](GraphBuilder& b, int32_t x) {
          x = b.fc("fc1", x, fc(6, bias));
          return b.fc("fc2", x, fc(4, bias));
        },
        1e-2f);
}

TEST(cpu_onednn, FcGradientsManyRows) {
  // 300 rows take the plain-GEMM path (matmul forward, dnnl_sgemm gradients, bias column sums);
  // the tanh between the layers runs in place over fc1's output.
  for (bool bias : {true, false})
    check_ce_gradients(
        bias ? "fc_rows_bias" : "fc_rows_nobias", 300, {5},
        [&](GraphBuilder& b, int32_t x) {
          x = b.activation("tanh", b.fc("fc1", x, fc(6, bias)), act(DLHOST_ACTIVATION_TANH));
          return b.fc("fc2", x, fc(4, bias));
        },
        1e-2f);
}

TEST(cpu_onednn, FcGradients4D) {
  // The inner product reads a 4-D source: plain from the input, blocked after a convolution.
  check_ce_gradients(
      "fc4d_input", 2, {3, 4, 4},
      [](GraphBuilder& b, int32_t x) { return b.fc("fc", x, fc(5, false)); }, 1e-2f);
  check_ce_gradients(
      "fc4d_after_conv", 2, {3, 4, 4},
      [](GraphBuilder& b, int32_t x) {
        x = b.conv2d("conv", x, conv(4, 3, 1, 1));
        return b.fc("fc", x, fc(5));
      },
      1e-2f);
}

TEST(cpu_onednn, ConvGradients) {
  for (int64_t batch : {1, 3})
    for (bool bias : {true, false})
      check_ce_gradients(
          "conv_b" + std::to_string(batch) + (bias ? "_bias" : "_nobias"), batch, {3, 9, 7},
          [&](GraphBuilder& b, int32_t x) {
            x = b.conv2d("conv1", x, conv(4, 3, 1, 1, 1, bias));
            return b.conv2d("conv2", x, conv(5, 3, 2, 1, 2, bias));
          },
          1e-2f);
}

TEST(cpu_onednn, PoolGradients) {
  for (dlhost_pool_kind kind : {DLHOST_POOL_MAX, DLHOST_POOL_AVG})
    for (bool ceil : {false, true})
      for (bool include : {false, true}) {
        if (kind == DLHOST_POOL_MAX && include) continue;
        std::string name = std::string(kind == DLHOST_POOL_MAX ? "max" : "avg") +
                           (ceil ? "_ceil" : "_floor") + (include ? "_include" : "_exclude");
        check_ce_gradients(
            name, 2, {2, 6, 6},
            [&](GraphBuilder& b, int32_t x) {
              x = b.conv2d("conv", x, conv(3, 3, 1, 1));
              return b.pool2d("pool", x, pool(kind, 3, 2, 1, ceil, include));
            },
            kind == DLHOST_POOL_MAX ? 1e-3f : 1e-2f);
      }
}

TEST(cpu_onednn, ActivationGradients) {
  for (auto kind : {DLHOST_ACTIVATION_RELU, DLHOST_ACTIVATION_SIGMOID, DLHOST_ACTIVATION_TANH}) {
    check_ce_gradients(
        "act" + std::to_string(kind), 3, {5},
        [&](GraphBuilder& b, int32_t x) {
          x = b.fc("fc1", x, fc(6));
          return b.activation("act", x, act(kind));
        },
        kind == DLHOST_ACTIVATION_RELU ? 1e-3f : 1e-2f);
    // After a convolution the activation works on the blocked layout.
    check_ce_gradients(
        "conv_act" + std::to_string(kind), 2, {2, 5, 5},
        [&](GraphBuilder& b, int32_t x) {
          x = b.conv2d("conv", x, conv(3, 3));
          return b.activation("act", x, act(kind));
        },
        kind == DLHOST_ACTIVATION_RELU ? 1e-3f : 1e-2f);
  }
}

// ReLU -> max pool: the pool masks its gradient by (output > 0) and writes the ReLU input's
// gradient itself; a convolution's only-reader ReLU is its post-op. Pool -> ReLU (AlexNet-R's
// first block), a pool whose output a sigmoid overwrites and a ReLU read by two pools take the
// plain paths.
TEST(cpu_onednn, ReluAndMaxPoolGradients) {
  const auto relu = act(DLHOST_ACTIVATION_RELU);
  check_ce_gradients(
      "conv_relu_pool", 2, {3, 9, 9},
      [&](GraphBuilder& b, int32_t x) {
        x = b.activation("relu1", b.conv2d("conv1", x, conv(16, 3, 1, 1)), relu);
        x = b.pool2d("pool1", x, pool(DLHOST_POOL_MAX, 3, 2, 0, true, false));
        x = b.activation("relu2", b.conv2d("conv2", x, conv(5, 3, 1, 1)), relu);
        return b.pool2d("pool2", x, pool(DLHOST_POOL_MAX, 3, 2, 1, false, false));
      },
      1e-3f);
  check_ce_gradients(
      "conv_pool_relu", 2, {3, 9, 9},
      [&](GraphBuilder& b, int32_t x) {
        x = b.conv2d("conv1", x, conv(16, 3, 1, 1));
        x = b.activation("relu1", b.pool2d("pool1", x, pool(DLHOST_POOL_MAX, 3, 2, 0, true, false)),
                         relu);
        x = b.activation("relu2", b.conv2d("conv2", x, conv(16, 3, 1, 1)), relu);
        return b.pool2d("pool2", x, pool(DLHOST_POOL_MAX, 3, 2, 0, true, false));
      },
      1e-3f);
  // The pool's output overwritten in place by a sigmoid (positive everywhere): the pool cannot
  // mask by its output any more, and the ReLU runs its own backward.
  check_ce_gradients(
      "relu_pool_sigmoid", 2, {3, 9, 9},
      [&](GraphBuilder& b, int32_t x) {
        x = b.activation("relu", b.conv2d("conv", x, conv(16, 3, 1, 1)), relu);
        x = b.pool2d("pool", x, pool(DLHOST_POOL_MAX, 3, 2, 0, true, false));
        return b.activation("sigmoid", x, act(DLHOST_ACTIVATION_SIGMOID));
      },
      1e-3f);
  check_ce_gradients(
      "relu_two_pools", 2, {3, 6, 6},
      [&](GraphBuilder& b, int32_t x) {
        x = b.activation("relu", b.conv2d("conv", x, conv(4, 3, 1, 1)), relu);
        return b.add("add", b.pool2d("pool_a", x, pool(DLHOST_POOL_MAX, 3, 2, 1, false, false)),
                     b.pool2d("pool_b", x, pool(DLHOST_POOL_MAX, 2, 2, 0, true, false)));
      },
      1e-3f);
}

TEST(cpu_onednn, MseGradients) {
  std::mt19937 rng(8);
  {
    GraphBuilder b("mse", 3);
    int32_t data = b.input("data", DLHOST_DTYPE_F32, {4});
    int32_t target = b.input("target", DLHOST_DTYPE_F32, {5});
    b.mse_loss("loss", b.fc("fc", data, fc(5)), target);
    Session s(b.finish());
    s.randomize(rng);
    s.set(data, uniform(12, rng));
    s.set(target, uniform(15, rng));
    expect_gradients_match(s, 1e-2f);
  }
  {
    // Autoencoder: the target is the data input itself, with another shape.
    GraphBuilder b("autoencoder", 2);
    int32_t data = b.input("data", DLHOST_DTYPE_F32, {1, 3, 3});
    int32_t y = b.activation("act", b.fc("fc", data, fc(9)), act(DLHOST_ACTIVATION_SIGMOID));
    b.mse_loss("loss", y, data);
    Session s(b.finish());
    s.randomize(rng);
    s.set(data, uniform(18, rng, 0.0f, 1.0f));
    expect_gradients_match(s, 1e-2f);
  }
}

TEST(cpu_onednn, SharedTensorAccumulatesGradients) {
  // h feeds two layers whose outputs are compared: fc1's gradient is the sum of both paths.
  std::mt19937 rng(9);
  GraphBuilder b("shared", 3);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {4});
  int32_t h = b.activation("act", b.fc("fc1", data, fc(5)), act(DLHOST_ACTIVATION_TANH));
  int32_t a = b.fc("fc2", h, fc(3));
  int32_t c = b.fc("fc3", h, fc(3));
  b.mse_loss("loss", a, c);
  Session s(b.finish());
  s.randomize(rng);
  s.set(data, uniform(12, rng));
  expect_gradients_match(s, 1e-2f);
}

TEST(cpu_onednn, GradReadyInReverseLayerOrder) {
  GraphBuilder b("ready", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {4});
  int32_t x = b.activation("act", b.fc("fc1", data, fc(5)), act(DLHOST_ACTIVATION_RELU));
  int32_t labels = -1;
  Session s(with_ce_head(b, x, 3, &labels));
  std::mt19937 rng(10);
  s.randomize(rng);
  s.set(data, uniform(8, rng));
  s.set_labels(labels, {0, 2});
  std::vector<int32_t> seen;
  dlhost_grad_ready ready{};
  ready.struct_size = DLHOST_GRAD_READY_STRUCT_SIZE;
  ready.user = &seen;
  ready.fn = [](void* user, int32_t param) {
    static_cast<std::vector<int32_t>*>(user)->push_back(param);
  };
  s.loss();
  s.backward(&ready);
  const std::vector<int32_t> want = {s.param_id("head.weight"), s.param_id("head.bias"),
                                     s.param_id("fc1.weight"), s.param_id("fc1.bias")};
  EXPECT_EQ(seen, want);
}

// --- parameters and the optimizer --------------------------------------------------------------

TEST(cpu_onednn, BlockedConvWeightRoundTrips) {
  GraphBuilder b("roundtrip", 2);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {16, 6, 6});
  int32_t labels = -1;
  Session s(with_ce_head(b, b.conv2d("conv", x, conv(24, 3, 1, 1)), 3, &labels));
  const int32_t w = s.param_id("conv.weight");
  std::mt19937 rng(11);
  std::vector<float> values = uniform(s.count(w), rng);
  for (int32_t part : {DLHOST_PARAM_VALUE, DLHOST_PARAM_GRAD}) {
    s.put(w, values, part);
    EXPECT_EQ(s.get(w, part), values);
  }
  dlhost_buffer value{}, grad{};
  value.struct_size = grad.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  check_status(s.api()->param_buffers(s.model(), w, &value, &grad), "param_buffers");
  ASSERT_GE(value.bytes, uint64_t(s.count(w) * 4));
  EXPECT_EQ(value.bytes, grad.bytes);
  EXPECT_EQ(value.memory_space, DLHOST_MEMORY_HOST);
  // Only meaningful when oneDNN chose a blocked layout (it does with AVX2 and AVX-512): then the
  // raw buffer is a permutation, and the round trip above went through a real reorder.
  const float* raw = static_cast<const float*>(value.data);
  const bool plain =
      value.bytes == uint64_t(s.count(w) * 4) && std::equal(values.begin(), values.end(), raw);
  RecordProperty("blocked", plain ? "no" : "yes");
  if (value.bytes == uint64_t(s.count(w) * 4) && !plain) {
    std::vector<float> a(raw, raw + s.count(w)), c = values;
    std::sort(a.begin(), a.end());
    std::sort(c.begin(), c.end());
    EXPECT_EQ(a, c);
  }
}

TEST(cpu_onednn, SgdUpdateMatchesFormula) {
  const Sgd sgd{0.1f, 0.9f, 0.01f, 0.0f};
  GraphBuilder b("sgd", 2);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {3, 5, 5});
  int32_t labels = -1;
  Session s(with_ce_head(b, b.conv2d("conv", x, conv(16, 3)), 3, &labels), sgd);
  std::mt19937 rng(12);
  const int32_t params = s.graph().num_params();
  std::vector<std::vector<float>> w(params), g(params), v(params);
  for (int32_t p = 0; p < params; ++p) {
    w[p] = uniform(s.count(p), rng);
    g[p] = uniform(s.count(p), rng);
    v[p].assign(s.count(p), 0.0f);
    s.put(p, w[p]);
    s.put(p, g[p], DLHOST_PARAM_GRAD);
  }
  for (int step = 0; step < 2; ++step) {  // the second step exercises the velocity
    s.update();
    for (int32_t p = 0; p < params; ++p) {
      for (size_t i = 0; i < w[p].size(); ++i) {
        v[p][i] = sgd.momentum * v[p][i] + (g[p][i] + sgd.weight_decay * w[p][i]);
        w[p][i] -= sgd.lr * v[p][i];
      }
      std::vector<float> got = s.get(p);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], w[p][i], 1e-6f) << s.graph().param(p).name << "[" << i << "]";
    }
  }
}

TEST(cpu_onednn, SgdClipNormScalesGradients) {
  const Sgd sgd{0.5f, 0.0f, 0.0f, 1.0f};
  GraphBuilder b("clip", 2);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {3, 5, 5});
  int32_t labels = -1;
  Session s(with_ce_head(b, b.conv2d("conv", x, conv(16, 3)), 3, &labels), sgd);
  std::mt19937 rng(13);
  const int32_t params = s.graph().num_params();
  for (float magnitude : {1.0f, 1e-3f}) {  // global norm well above, then below, clip_norm
    SCOPED_TRACE(magnitude);
    std::vector<std::vector<float>> w(params), g(params);
    double sq = 0.0;
    for (int32_t p = 0; p < params; ++p) {
      w[p] = uniform(s.count(p), rng);
      g[p] = uniform(s.count(p), rng, -magnitude, magnitude);
      for (float e : g[p]) sq += double(e) * e;
      s.put(p, w[p]);
      s.put(p, g[p], DLHOST_PARAM_GRAD);
    }
    const double scale = std::min(1.0, sgd.clip_norm / std::sqrt(sq));
    if (magnitude == 1.0f) {
      ASSERT_LT(scale, 0.1);
    } else {
      ASSERT_EQ(scale, 1.0);
    }
    s.update();
    for (int32_t p = 0; p < params; ++p) {
      std::vector<float> got = s.get(p);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], w[p][i] - sgd.lr * scale * g[p][i], 1e-6)
            << s.graph().param(p).name << "[" << i << "]";
    }
  }
}

// --- fused_step: SGD inside the FC's weight-gradient GEMM ---------------------------------------

// An MLP of `batch` rows: fc1 (bias) -> ReLU -> fc2 (no bias) -> sigmoid -> head (bias) -> CE.
std::unique_ptr<Graph> fused_mlp(int64_t batch, int32_t* data, int32_t* labels) {
  GraphBuilder b("fused_mlp", batch);
  *data = b.input("data", DLHOST_DTYPE_F32, {40});
  int32_t h = b.activation("relu", b.fc("fc1", *data, fc(48)), act(DLHOST_ACTIVATION_RELU));
  h = b.activation("sig", b.fc("fc2", h, fc(24, false)), act(DLHOST_ACTIVATION_SIGMOID));
  return with_ce_head(b, h, 10, labels);
}

struct FusedRun {
  std::vector<std::vector<float>> weights;  // every parameter after the steps
  std::string implementation;
};

// `steps` SGD steps on a fixed random batch from the same start, with or without fused_step.
FusedRun train_fused_mlp(const dlhost_optimizer_desc& opt, bool fused_step, int64_t batch,
                         const std::string& precision = "", int steps = 4) {
  int32_t data = -1, labels = -1;
  Session s(opt, fused_mlp(batch, &data, &labels), 1, 42, precision, fused_step);
  std::mt19937 rng(31);
  s.randomize(rng);
  s.set(data, uniform(batch * 40, rng));
  std::vector<int32_t> y(batch);
  for (int64_t i = 0; i < batch; ++i) y[i] = static_cast<int32_t>(rng() % 10);
  s.set_labels(labels, y);
  for (int i = 0; i < steps; ++i) s.step();
  FusedRun run;
  for (int32_t p = 0; p < s.graph().num_params(); ++p) run.weights.push_back(s.get(p));
  run.implementation = s.implementation();
  return run;
}

// Same weights within `tol` (relative to 1 + |w|); the steps moved them by far more than that.
void expect_same_training(const FusedRun& fused, const FusedRun& split, const FusedRun& start,
                          double tol) {
  ASSERT_EQ(fused.weights.size(), split.weights.size());
  for (size_t p = 0; p < split.weights.size(); ++p) {
    double moved = 0.0;
    for (size_t i = 0; i < split.weights[p].size(); ++i) {
      const double want = split.weights[p][i];
      ASSERT_NEAR(fused.weights[p][i], want, tol * (1.0 + std::fabs(want)))
          << "parameter " << p << "[" << i << "]";
      moved = std::max(moved, std::fabs(want - start.weights[p][i]));
    }
    EXPECT_GT(moved, 100 * tol) << "parameter " << p << " did not train";
  }
}

// With fused_step every plain FC (the GEMM path at any row count) applies SGD in its
// weight-gradient GEMM, and the weights follow the split step's (backward, then update) up to
// the products' rounding, for plain SGD, weight decay, momentum and both. A wrong alpha or beta
// (the decay left out: lr wd |w| ~ 1e-3 a step) or a missed update is off by orders of magnitude
// more than the tolerance.
TEST(cpu_onednn, FusedSgdTrainsLikeTheSplitStep) {
  // 16 rows: the split step takes the blocked inner product on AMX at 1 thread; 256: the GEMM.
  for (const int64_t batch : {16, 256}) {
    const FusedRun start = train_fused_mlp(test_attrs::sgd(0.0f), false, batch, "", 0);
    for (const Sgd& sgd : {Sgd{0.1f, 0.0f, 0.0f, 0.0f}, Sgd{0.1f, 0.0f, 0.01f, 0.0f},
                           Sgd{0.05f, 0.9f, 0.0f, 0.0f}, Sgd{0.05f, 0.9f, 0.01f, 0.0f}}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + " momentum " + std::to_string(sgd.momentum) +
                   " decay " + std::to_string(sgd.weight_decay));
      const auto opt = test_attrs::sgd(sgd.lr, sgd.momentum, sgd.weight_decay, sgd.clip_norm);
      const FusedRun split = train_fused_mlp(opt, false, batch);
      const FusedRun fused = train_fused_mlp(opt, true, batch);
      EXPECT_EQ(split.implementation.find("gemm bwd + sgd"), std::string::npos);
      EXPECT_NE(fused.implementation.find("gemm bwd + sgd"), std::string::npos)
          << fused.implementation;
      expect_same_training(fused, split, start, 2e-6);
    }
  }
}

// --- a learnable task --------------------------------------------------------------------------

std::vector<float> train_mlp(int steps) {
  const int64_t batch = 64, features = 64, classes = 10, batches = 4;
  std::mt19937 rng(2024);
  // A fixed random linear teacher labels the data: the task is learnable.
  std::vector<float> teacher = uniform(classes * features, rng);
  std::vector<std::vector<float>> xs(batches);
  std::vector<std::vector<int32_t>> ys(batches);
  for (int64_t k = 0; k < batches; ++k) {
    xs[k] = uniform(batch * features, rng);
    for (int64_t i = 0; i < batch; ++i) {
      int32_t best = 0;
      double best_score = -1e30;
      for (int64_t o = 0; o < classes; ++o) {
        double score = 0.0;
        for (int64_t j = 0; j < features; ++j)
          score += double(teacher[o * features + j]) * xs[k][i * features + j];
        if (score > best_score) best_score = score, best = static_cast<int32_t>(o);
      }
      ys[k].push_back(best);
    }
  }
  GraphBuilder b("mlp", batch);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {features});
  int32_t h = b.activation("sig", b.fc("fc1", data, fc(128)), act(DLHOST_ACTIVATION_SIGMOID));
  int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", b.fc("fc2", h, fc(classes)), labels);
  Session s(b.finish(), Sgd{0.1f, 0.9f, 0.0f, 0.0f}, 2);
  s.randomize(rng);
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) {
    s.set(data, xs[i % batches]);
    s.set_labels(labels, ys[i % batches]);
    losses.push_back(s.step());
  }
  return losses;
}

TEST(cpu_onednn, MlpLearnsTeacherTaskDeterministically) {
  const int steps = 200;
  std::vector<float> first = train_mlp(steps);
  const float start = (first[0] + first[1] + first[2] + first[3]) / 4;
  const float end = (first[steps - 4] + first[steps - 3] + first[steps - 2] + first[steps - 1]) / 4;
  EXPECT_GT(start, 1.5f);  // about ln(10) before training
  EXPECT_LT(end, 0.5f * start) << "start " << start << " end " << end;
  EXPECT_EQ(train_mlp(steps), first) << "same seed, same thread count: same losses";
}

// --- ABI 1.1 ops -------------------------------------------------------------------------------

dlhost_fc_attrs fc_steps(int64_t out, bool bias = true) { return fc(out, bias, 2); }

// Per-channel statistics of an [N, C, S] tensor (S = H*W, 1 for rank 2): mean and biased
// variance.
void channel_stats(const std::vector<float>& x, int64_t n, int64_t c, int64_t spatial,
                   std::vector<double>* mean, std::vector<double>* var) {
  mean->assign(c, 0.0);
  var->assign(c, 0.0);
  const double count = double(n * spatial);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t k = 0; k < spatial; ++k) (*mean)[ch] += x[(i * c + ch) * spatial + k] / count;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t k = 0; k < spatial; ++k) {
        const double d = x[(i * c + ch) * spatial + k] - (*mean)[ch];
        (*var)[ch] += d * d / count;
      }
}

TEST(cpu_onednn, BatchNormForwardMatchesReference) {
  std::mt19937 rng(21);
  const int64_t c = 3, h = 4, w = 5;
  std::vector<float> x = uniform(c * h * w, rng, -2.0f, 3.0f);
  std::vector<float> scale = uniform(c, rng, 0.5f, 1.5f), shift = uniform(c, rng);
  auto got = probe_output(
      {c, h, w}, x, [](GraphBuilder& b, int32_t in) { return b.batch_norm("bn", in, bn()); },
      [&](Session& s) {
        s.put(s.param_id("bn.scale"), scale);
        s.put(s.param_id("bn.shift"), shift);
      });
  std::vector<double> mean, var, want(x.size());
  channel_stats(x, 1, c, h * w, &mean, &var);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t k = 0; k < h * w; ++k)
      want[ch * h * w + k] =
          scale[ch] * (x[ch * h * w + k] - mean[ch]) / std::sqrt(var[ch] + 1e-5) + shift[ch];
  expect_close(got, want, 1e-4);
}

TEST(cpu_onednn, BatchNormGradients) {
  check_ce_gradients(
      "bn_rank2", 4, {5},
      // Batch norm removes any bias in front of it: those layers have none.
      [](GraphBuilder& b, int32_t x) {
        return b.batch_norm("bn", b.fc("fc", x, fc(6, false)), bn());
      },
      1e-2f);
  // After a convolution the statistics run over a blocked layout.
  check_ce_gradients(
      "bn_rank4", 3, {2, 5, 5},
      [](GraphBuilder& b, int32_t x) {
        return b.batch_norm("bn", b.conv2d("conv", x, conv(8, 3, 1, 1, 1, false)), bn());
      },
      1e-2f);
  // On the data input: only scale and shift learn.
  check_ce_gradients(
      "bn_on_input", 4, {3, 2, 2},
      [](GraphBuilder& b, int32_t x) { return b.batch_norm("bn", x, bn()); }, 1e-2f);
}

// Batch norm -> ReLU runs as one fused_norm_relu primitive (the ReLU's mask in its workspace);
// its gradients as a ResNet block has them: into a convolution, into a max pool (which masks
// by the ReLU's output itself), the ReLU's output read by a residual add, and on rank 2. The
// batch norm's shifts are +-5 by channel (scale 1): every normalized value is then at least ~5
// from the ReLU's kink on the side its channel chose, so finite differences see no kink (with
// random shifts a crossing makes them wrong by ~1e-2, fused or not) and both sides are tested.
void check_bn_relu_gradients(const std::string& name, int64_t batch,
                             const std::vector<int64_t>& shape, int64_t channels,
                             const std::function<int32_t(GraphBuilder&, int32_t)>& body) {
  SCOPED_TRACE(name);
  GraphBuilder b(name, batch);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, shape);
  int32_t labels = -1;
  auto graph = with_ce_head(b, body(b, data), 3, &labels);
  int64_t n = batch;
  for (int64_t d : shape) n *= d;
  Session s(std::move(graph));
  const std::string implementation = s.implementation();
  EXPECT_NE(implementation.find("bnorm+relu fwd="), std::string::npos) << implementation;
  std::mt19937 rng(1234);
  s.randomize(rng);
  std::vector<float> shift(channels);
  for (int64_t c = 0; c < channels; ++c) shift[c] = c % 2 == 0 ? 5.0f : -5.0f;
  s.put(s.param_id("bn.scale"), std::vector<float>(channels, 1.0f));
  s.put(s.param_id("bn.shift"), shift);
  s.set(data, uniform(n, rng));
  std::vector<int32_t> y(batch);
  for (int64_t i = 0; i < batch; ++i) y[i] = static_cast<int32_t>(i % 3);
  s.set_labels(labels, y);
  expect_gradients_match(s, 1e-2f);
}

TEST(cpu_onednn, BatchNormReluGradients) {
  const auto relu = act(DLHOST_ACTIVATION_RELU);
  check_bn_relu_gradients("conv_bn_relu_conv", 3, {2, 6, 6}, 8, [&](GraphBuilder& b, int32_t x) {
    x = b.batch_norm("bn", b.conv2d("conv1", x, conv(8, 3, 1, 1, 1, false)), bn());
    return b.conv2d("conv2", b.activation("relu", x, relu), conv(4, 3, 1, 1));
  });
  check_bn_relu_gradients("conv_bn_relu_pool", 3, {2, 6, 6}, 16, [&](GraphBuilder& b, int32_t x) {
    x = b.batch_norm("bn", b.conv2d("conv", x, conv(16, 3, 1, 1, 1, false)), bn());
    return b.pool2d("pool", b.activation("relu", x, relu),
                    pool(DLHOST_POOL_MAX, 3, 2, 0, true, false));
  });
  check_bn_relu_gradients("bn_relu_residual", 3, {8, 5, 5}, 8, [&](GraphBuilder& b, int32_t x) {
    int32_t h = b.batch_norm("bn", b.conv2d("conv", x, conv(8, 3, 1, 1, 1, false)), bn());
    h = b.activation("relu", h, relu);
    return b.add("add", h, b.conv2d("conv2", h, conv(8, 3, 1, 1)));
  });
  check_bn_relu_gradients("fc_bn_relu", 4, {5}, 6, [&](GraphBuilder& b, int32_t x) {
    return b.activation("relu", b.batch_norm("bn", b.fc("fc", x, fc(6, false)), bn()), relu);
  });
}

bool kept(uint64_t seed, uint32_t node, uint64_t step, uint64_t index, float p) {
  return dlhost_dropout_keep(seed, node, step, index, p) != 0;
}

TEST(cpu_onednn, DropoutMaskNumbersLogicalElements) {
  // After a 16-channel convolution the tensor is blocked (nChw8c/16c): the mask must still
  // follow the plain NCHW index of dlhost_dropout_keep.
  std::mt19937 rng(23);
  const int64_t c = 2, h = 5, w = 5, oc = 16;
  const float p = 0.3f;
  std::vector<float> x = uniform(c * h * w, rng), wt = uniform(oc * c * 9, rng),
                     bias = uniform(oc, rng);
  auto got = probe_output(
      {c, h, w}, x,
      [&](GraphBuilder& b, int32_t in) {
        return b.dropout("drop", b.conv2d("conv", in, conv(oc, 3, 1, 1)), dropout(p));
      },
      [&](Session& s) {
        s.put(s.param_id("conv.weight"), wt);
        s.put(s.param_id("conv.bias"), bias);
      });
  std::vector<double> want = reference_conv(x, c, h, w, wt, bias, oc, 3, 1, 1, 1);
  int64_t dropped = 0;
  // Nodes: data 0, conv 1, drop 2; the probe's forward is the model's first (step 0).
  for (size_t i = 0; i < want.size(); ++i) {
    if (kept(42, 2, 0, i, p)) {
      want[i] /= 1.0 - p;
    } else {
      want[i] = 0.0;
      ++dropped;
    }
  }
  EXPECT_GT(dropped, 80);  // about 0.3 * 400
  EXPECT_LT(dropped, 160);
  expect_close(got, want, 1e-4);
}

TEST(cpu_onednn, DropoutBackwardUsesEachStepsMask) {
  const int64_t n = 4, f = 5, o = 6;
  const float p = 0.4f;
  const uint64_t seed = 7;
  GraphBuilder b("dropout", n);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {f});               // node 0
  int32_t y = b.dropout("drop", b.fc("fc", data, fc(o)), dropout(p));  // nodes 1, 2
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {o});
  b.mse_loss("loss", y, target);
  Session s(b.finish(), {}, 1, seed);
  std::mt19937 rng(24);
  std::vector<float> wt = uniform(o * f, rng), bias = uniform(o, rng), x = uniform(n * f, rng),
                     t = uniform(n * o, rng);
  s.put(s.param_id("fc.weight"), wt);
  s.put(s.param_id("fc.bias"), bias);
  s.set(data, x);
  s.set(target, t);
  std::vector<std::vector<bool>> masks;
  for (uint64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const float loss = s.loss();
    s.backward();
    std::vector<bool> mask(n * o);
    double want_loss = 0.0;
    std::vector<double> dz(n * o), gw(o * f, 0.0), gb(o, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < o; ++j) {
        double z = bias[j];
        for (int64_t k = 0; k < f; ++k) z += double(wt[j * f + k]) * x[i * f + k];
        mask[i * o + j] = kept(seed, 2, step, i * o + j, p);
        const double m = mask[i * o + j] ? 1.0 / (1.0 - p) : 0.0;
        const double d = m * z - t[i * o + j];
        want_loss += d * d / double(n * o);
        dz[i * o + j] = 2.0 * d / double(n * o) * m;
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < o; ++j) {
        gb[j] += dz[i * o + j];
        for (int64_t k = 0; k < f; ++k) gw[j * f + k] += dz[i * o + j] * x[i * f + k];
      }
    EXPECT_NEAR(loss, want_loss, 1e-5);
    expect_close(s.get(s.param_id("fc.weight"), DLHOST_PARAM_GRAD), gw, 1e-5);
    expect_close(s.get(s.param_id("fc.bias"), DLHOST_PARAM_GRAD), gb, 1e-5);
    masks.push_back(mask);
  }
  EXPECT_NE(masks[0], masks[1]);
  EXPECT_NE(masks[1], masks[2]);
}

TEST(cpu_onednn, AddForwardMatchesReference) {
  // The data input is plain, the convolution's output blocked: the add reorders one of them.
  std::mt19937 rng(25);
  const int64_t c = 8, h = 4, w = 4;
  std::vector<float> x = uniform(c * h * w, rng), wt = uniform(c * c * 9, rng),
                     bias = uniform(c, rng);
  auto got = probe_output(
      {c, h, w}, x,
      [&](GraphBuilder& b, int32_t in) {
        return b.add("add", b.conv2d("conv", in, conv(c, 3, 1, 1)), in);
      },
      [&](Session& s) {
        s.put(s.param_id("conv.weight"), wt);
        s.put(s.param_id("conv.bias"), bias);
      });
  std::vector<double> want = reference_conv(x, c, h, w, wt, bias, c, 3, 1, 1, 1);
  for (size_t i = 0; i < want.size(); ++i) want[i] += x[i];
  expect_close(got, want, 1e-4);
}

TEST(cpu_onednn, ResidualAddGradients) {
  // x feeds both conv2 and the add: its gradient is the sum of both paths.
  check_ce_gradients(
      "residual", 2, {3, 5, 5},
      [](GraphBuilder& b, int32_t in) {
        int32_t x = b.conv2d("conv1", in, conv(8, 3, 1, 1));
        int32_t y = b.activation("relu", b.conv2d("conv2", x, conv(8, 3, 1, 1)),
                                 act(DLHOST_ACTIVATION_RELU));
        return b.add("add", x, y);
      },
      1e-3f);
  check_ce_gradients(
      "add_input", 2, {4, 5, 5},
      [](GraphBuilder& b, int32_t in) {
        return b.add("add", b.conv2d("conv", in, conv(4, 3, 1, 1)), in);
      },
      1e-2f);
  // h feeds both adds: the second add writes its gradient, the first one adds another to it.
  check_ce_gradients(
      "add_accumulates", 3, {5},
      [](GraphBuilder& b, int32_t in) {
        int32_t h = b.fc("fc1", in, fc(6));
        int32_t a = b.add("add1", h, b.activation("tanh", h, act(DLHOST_ACTIVATION_TANH)));
        return b.add("add2", b.fc("fc2", a, fc(6)), h);
      },
      1e-2f);
  // p is plain (batch norm of the data), the convolution's output blocked: p's gradient from
  // the add goes through a reorder, and the convolution's is added to it.
  check_ce_gradients(
      "add_mixed_layouts", 2, {8, 4, 4},
      [](GraphBuilder& b, int32_t in) {
        int32_t p = b.batch_norm("bn", in, bn());
        return b.add("add", b.conv2d("conv", p, conv(8, 3, 1, 1)), p);
      },
      1e-2f);
  check_ce_gradients(
      "add_self", 3, {5},
      [](GraphBuilder& b, int32_t in) {
        int32_t h = b.fc("fc", in, fc(6));
        return b.add("add", h, h);
      },
      1e-2f);
}

// dlhost_graph.h's LRN: y = x / (k + alpha / size * sum of x^2 over the window)^beta.
std::vector<double> reference_lrn(const std::vector<double>& x, int64_t c, int64_t hw,
                                  const dlhost_lrn_attrs& a) {
  std::vector<double> y(x.size());
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t k = 0; k < hw; ++k) {
      double sum = 0.0;
      for (int64_t o = ch - a.size / 2; o <= ch + a.size / 2; ++o)
        if (o >= 0 && o < c) sum += x[o * hw + k] * x[o * hw + k];
      y[ch * hw + k] = x[ch * hw + k] / std::pow(a.k + a.alpha / a.size * sum, a.beta);
    }
  return y;
}

TEST(cpu_onednn, LrnForwardMatchesReference) {
  std::mt19937 rng(26);
  const int64_t c = 7, h = 3, w = 3;
  // A large alpha, so that dividing it by the size (or not) shows.
  const dlhost_lrn_attrs a = lrn(5, 0.8f, 0.75f, 2.0f);
  std::vector<float> x = uniform(c * h * w, rng, -2.0f, 2.0f);
  auto got = probe_output(
      {c, h, w}, x, [&](GraphBuilder& b, int32_t in) { return b.lrn("lrn", in, a); },
      [](Session&) {});
  expect_close(got, reference_lrn(std::vector<double>(x.begin(), x.end()), c, h * w, a), 1e-5);
  // After a convolution: a blocked layout with channel padding (7 of 8).
  std::vector<float> wt = uniform(c * c * 9, rng), bias = uniform(c, rng);
  got = probe_output(
      {c, h, w}, x,
      [&](GraphBuilder& b, int32_t in) {
        return b.lrn("lrn", b.conv2d("conv", in, conv(c, 3, 1, 1)), a);
      },
      [&](Session& s) {
        s.put(s.param_id("conv.weight"), wt);
        s.put(s.param_id("conv.bias"), bias);
      });
  expect_close(got, reference_lrn(reference_conv(x, c, h, w, wt, bias, c, 3, 1, 1, 1), c, h * w, a),
               1e-4);
}

TEST(cpu_onednn, LrnGradients) {
  check_ce_gradients(
      "lrn", 2, {3, 5, 5},
      [](GraphBuilder& b, int32_t x) {
        return b.lrn("lrn", b.conv2d("conv", x, conv(7, 3, 1, 1)), lrn(5, 0.8f, 0.75f, 2.0f));
      },
      1e-2f);
}

TEST(cpu_onednn, GlobalAvgPoolForwardAndGradients) {
  std::mt19937 rng(27);
  const int64_t c = 3, h = 4, w = 5;
  std::vector<float> x = uniform(c * h * w, rng);
  auto got = probe_output(
      {c, h, w}, x, [](GraphBuilder& b, int32_t in) { return b.global_avg_pool("gap", in); },
      [](Session&) {});
  std::vector<double> want(c, 0.0);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t k = 0; k < h * w; ++k) want[ch] += x[ch * h * w + k] / double(h * w);
  expect_close(got, want, 1e-6);
  check_ce_gradients(
      "gap", 2, {3, 5, 4},
      [](GraphBuilder& b, int32_t in) {
        return b.global_avg_pool("gap", b.conv2d("conv", in, conv(12, 3, 1, 1)));
      },
      1e-2f);
}

TEST(cpu_onednn, PerStepFcAndSequenceCrossEntropy) {
  const int64_t n = 2, t = 3, c = 4, v = 5;
  std::mt19937 rng(28);
  std::vector<float> x = uniform(n * t * c, rng), wt = uniform(v * c, rng, -2, 2),
                     bias = uniform(v, rng);
  const std::vector<int32_t> y = {0, 4, 2, 1, 1, 3};
  GraphBuilder b("steps", n);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {t, c});
  int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {t});
  b.softmax_cross_entropy("loss", b.fc("fc", data, fc_steps(v)), labels);
  Session s(b.finish());
  EXPECT_EQ(s.count(s.param_id("fc.weight")), v * c);
  s.put(s.param_id("fc.weight"), wt);
  s.put(s.param_id("fc.bias"), bias);
  s.set(data, x);
  s.set_labels(labels, y);
  double want = 0.0;
  for (int64_t p = 0; p < n * t; ++p) {
    std::vector<double> z(v);
    for (int64_t o = 0; o < v; ++o) {
      z[o] = bias[o];
      for (int64_t k = 0; k < c; ++k) z[o] += double(wt[o * c + k]) * x[p * c + k];
    }
    double mx = *std::max_element(z.begin(), z.end()), sum = 0.0;
    for (double e : z) sum += std::exp(e - mx);
    want -= (z[y[p]] - mx - std::log(sum)) / double(n * t);
  }
  EXPECT_NEAR(s.loss(), want, 1e-5);
  expect_gradients_match(s, 1e-2f);
  // Two per-step layers: the first one's gradient passes through the second's data gradient.
  GraphBuilder b2("steps2", n);
  data = b2.input("data", DLHOST_DTYPE_F32, {t, c});
  labels = b2.input("labels", DLHOST_DTYPE_I32, {t});
  int32_t hidden =
      b2.activation("tanh", b2.fc("fc1", data, fc_steps(6)), act(DLHOST_ACTIVATION_TANH));
  b2.softmax_cross_entropy("loss", b2.fc("fc2", hidden, fc_steps(v)), labels);
  Session s2(b2.finish());
  s2.randomize(rng);
  s2.set(data, x);
  s2.set_labels(labels, y);
  expect_gradients_match(s2, 1e-2f);
}

TEST(cpu_onednn, EmbeddingGathersAndScatterAdds) {
  const int64_t n = 2, t = 4, vocab = 6, dim = 3;
  // Ids 1 and 4 repeat (within and across sequences); 3 and 5 are never used.
  const std::vector<int32_t> ids = {1, 4, 1, 0, 4, 4, 2, 1};
  std::mt19937 rng(29);
  std::vector<float> table = uniform(vocab * dim, rng), target = uniform(n * t * dim, rng);
  GraphBuilder b("embedding", n);
  int32_t in = b.input("ids", DLHOST_DTYPE_I32, {t});
  int32_t tgt = b.input("target", DLHOST_DTYPE_F32, {t, dim});
  b.mse_loss("loss", b.embedding("emb", in, embedding(vocab, dim)), tgt);
  Session s(b.finish());
  const int32_t table_id = s.param_id("emb.table");
  s.put(table_id, table);
  s.set_labels(in, ids);
  s.set(tgt, target);
  double want_loss = 0.0;
  std::vector<double> want_grad(vocab * dim, 0.0);
  const double count = double(n * t * dim);
  for (int64_t p = 0; p < n * t; ++p)
    for (int64_t j = 0; j < dim; ++j) {
      const double d = table[ids[p] * dim + j] - target[p * dim + j];
      want_loss += d * d / count;
      want_grad[ids[p] * dim + j] += 2.0 * d / count;
    }
  for (int rep = 0; rep < 2; ++rep) {  // the second backward must overwrite, not add
    EXPECT_NEAR(s.loss(), want_loss, 1e-6);
    s.backward();
  }
  std::vector<float> grad = s.get(table_id, DLHOST_PARAM_GRAD);
  expect_close(grad, want_grad, 1e-6);
  for (int64_t j = 0; j < dim; ++j) {
    EXPECT_EQ(grad[3 * dim + j], 0.0f);
    EXPECT_EQ(grad[5 * dim + j], 0.0f);
  }
  const std::vector<int32_t> bad = {1, 4, 1, 0, 4, 6, 2, 1};  // 6 is not in [0, 6)
  EXPECT_EQ(take(s.api()->set_input(s.model(), in, bad.data(), bad.size() * 4)).code,
            DLHOST_CODE_INVALID_ARGUMENT);

  // Through a per-step classifier, every table entry against finite differences.
  GraphBuilder b2("embedding_ce", n);
  in = b2.input("ids", DLHOST_DTYPE_I32, {t});
  int32_t labels = b2.input("labels", DLHOST_DTYPE_I32, {t});
  b2.softmax_cross_entropy(
      "loss", b2.fc("fc", b2.embedding("emb", in, embedding(vocab, dim)), fc_steps(4)), labels);
  Session s2(b2.finish());
  s2.randomize(rng);
  s2.set_labels(in, ids);
  s2.set_labels(labels, {0, 1, 2, 3, 3, 2, 1, 0});
  expect_gradients_match(s2, 1e-2f, 5e-4f, 3e-2f, int(vocab * dim));
}

// --- LSTM ---

struct LstmWeights {
  std::vector<float> w, u, b;  // canonical: [4H, C_l], [4H, H], [4H], gates i, f, g, o
};

// dlhost_graph.h's equations over x [N, T, C]; returns the last layer's h [N, T, H].
std::vector<double> reference_lstm(const std::vector<float>& x, int64_t n, int64_t t, int64_t c,
                                   int64_t h, const std::vector<LstmWeights>& layers) {
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  std::vector<double> seq(x.begin(), x.end());
  int64_t in = c;
  for (const LstmWeights& l : layers) {
    std::vector<double> out(n * t * h);
    for (int64_t s = 0; s < n; ++s) {
      std::vector<double> hs(h, 0.0), cs(h, 0.0), g(4 * h);
      for (int64_t step = 0; step < t; ++step) {
        const double* xt = &seq[(s * t + step) * in];
        for (int64_t r = 0; r < 4 * h; ++r) {
          g[r] = l.b[r];
          for (int64_t k = 0; k < in; ++k) g[r] += double(l.w[r * in + k]) * xt[k];
          for (int64_t k = 0; k < h; ++k) g[r] += double(l.u[r * h + k]) * hs[k];
        }
        for (int64_t j = 0; j < h; ++j) {
          const double i = sigmoid(g[j]), f = sigmoid(g[h + j]), cand = std::tanh(g[2 * h + j]),
                       o = sigmoid(g[3 * h + j]);
          cs[j] = f * cs[j] + i * cand;
          hs[j] = o * std::tanh(cs[j]);
          out[(s * t + step) * h + j] = hs[j];
        }
      }
    }
    seq = out;
    in = h;
  }
  return seq;
}

std::vector<LstmWeights> random_lstm(Session& s, const std::string& node, int64_t c, int64_t h,
                                     int64_t layers, std::mt19937& rng) {
  std::vector<LstmWeights> out;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string prefix = node + ".l" + std::to_string(l) + ".";
    LstmWeights wl{uniform(4 * h * (l == 0 ? c : h), rng, -0.8f, 0.8f),
                   uniform(4 * h * h, rng, -0.8f, 0.8f), uniform(4 * h, rng, -0.8f, 0.8f)};
    s.put(s.param_id(prefix + "weight"), wl.w);
    s.put(s.param_id(prefix + "weight_iter"), wl.u);
    s.put(s.param_id(prefix + "bias"), wl.b);
    out.push_back(wl);
  }
  return out;
}

TEST(cpu_onednn, LstmForwardMatchesReference) {
  const int64_t t = 3, c = 3, h = 4;
  for (int64_t layers : {1, 2}) {
    SCOPED_TRACE(layers);
    std::mt19937 rng(30 + layers);
    // Batch 1 through the probe: every output value.
    std::vector<float> x1 = uniform(t * c, rng, -2.0f, 2.0f);
    std::vector<LstmWeights> weights;
    auto got = probe_output(
        {t, c}, x1,
        [&](GraphBuilder& b, int32_t in) { return b.lstm("lstm", in, lstm(h, layers)); },
        [&](Session& s) { weights = random_lstm(s, "lstm", c, h, layers, rng); });
    expect_close(got, reference_lstm(x1, 1, t, c, h, weights), 1e-5);
    // Batch 2 (batch-first [N, T, C] against oneDNN's [T, N, C]): the MSE against targets.
    const int64_t n = 2;
    GraphBuilder b("lstm_mse", n);
    int32_t data = b.input("data", DLHOST_DTYPE_F32, {t, c});
    int32_t target = b.input("target", DLHOST_DTYPE_F32, {t, h});
    b.mse_loss("loss", b.lstm("lstm", data, lstm(h, layers)), target);
    Session s(b.finish());
    weights = random_lstm(s, "lstm", c, h, layers, rng);
    std::vector<float> x = uniform(n * t * c, rng, -2.0f, 2.0f);
    s.set(data, x);
    const std::vector<double> want = reference_lstm(x, n, t, c, h, weights);
    for (int k = 0; k < 3; ++k) {
      std::vector<float> tg = uniform(n * t * h, rng);
      s.set(target, tg);
      double mse = 0.0;
      for (size_t i = 0; i < want.size(); ++i) mse += (want[i] - tg[i]) * (want[i] - tg[i]);
      EXPECT_NEAR(s.loss(), mse / double(want.size()), 1e-6);
    }
  }
}

TEST(cpu_onednn, LstmGradients) {
  const int64_t n = 2, t = 3, c = 3, h = 4, v = 3;
  for (int64_t layers : {1, 2}) {
    SCOPED_TRACE(layers);
    GraphBuilder b("lstm_ce", n);
    const int32_t data = b.input("data", DLHOST_DTYPE_F32, {t, c});
    // With two layers an FC in front checks the LSTM's data gradient too.
    const int32_t x = layers == 2 ? b.fc("in", data, fc_steps(5)) : data;
    int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {t});
    b.softmax_cross_entropy("loss", b.fc("head", b.lstm("lstm", x, lstm(h, layers)), fc_steps(v)),
                            labels);
    Session s(b.finish());
    std::mt19937 rng(32);
    s.randomize(rng);
    s.set(data, uniform(n * t * c, rng, -2.0f, 2.0f));
    s.set_labels(labels, {0, 2, 1, 1, 0, 2});
    expect_gradients_match(s, 1e-2f, 5e-4f, 3e-2f, 16);
  }
}

TEST(cpu_onednn, LstmWeightsRoundTripInCanonicalLayout) {
  const int64_t c = 3, h = 4;
  GraphBuilder b("lstm_io", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {3, c});
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {3, h});
  b.mse_loss("loss", b.lstm("lstm", data, lstm(h, 2)), target);
  Session s(b.finish());
  std::mt19937 rng(33);
  for (int32_t p = 0; p < s.graph().num_params(); ++p) {
    SCOPED_TRACE(s.graph().param(p).name);
    for (int32_t part : {DLHOST_PARAM_VALUE, DLHOST_PARAM_GRAD}) {
      std::vector<float> values = uniform(s.count(p), rng);
      s.put(p, values, part);
      EXPECT_EQ(s.get(p, part), values);
    }
  }
  // Internally oneDNN's ldigo: [input][gate][output] against the canonical [gate*H +
  // output][input].
  const int32_t w = s.param_id("lstm.l0.weight");
  std::vector<float> canonical(4 * h * c);
  for (size_t i = 0; i < canonical.size(); ++i) canonical[i] = float(i);
  s.put(w, canonical);
  dlhost_buffer value{};
  value.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  check_status(s.api()->param_buffers(s.model(), w, &value, nullptr), "param_buffers");
  ASSERT_EQ(value.bytes, canonical.size() * 4);
  const float* raw = static_cast<const float*>(value.data);
  for (int64_t i = 0; i < c; ++i)
    for (int64_t g = 0; g < 4; ++g)
      for (int64_t o = 0; o < h; ++o)
        ASSERT_EQ(raw[(i * 4 + g) * h + o], canonical[(g * h + o) * c + i])
            << "input " << i << " gate " << g << " unit " << o;
}

// Embedding 16 -> LSTM 16 x 2 -> per-step FC -> CE on "the next token is this one + 1 mod V".
std::vector<float> train_language_model(int steps) {
  const int64_t vocab = 8, n = 16, t = 8;
  GraphBuilder b("lm", n);
  int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {t});
  int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {t});
  int32_t e = b.embedding("emb", ids, embedding(vocab, 16));
  int32_t hs = b.lstm("lstm", e, lstm(16, 2));
  b.softmax_cross_entropy("loss", b.fc("head", hs, fc_steps(vocab)), labels);
  Session s(b.finish(), Sgd{0.5f, 0.9f, 0.0f, 5.0f}, 2);
  std::mt19937 rng(2025);
  s.randomize(rng);
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  std::vector<float> losses;
  std::vector<int32_t> x(n * t), y(n * t);
  for (int i = 0; i < steps; ++i) {
    for (int64_t k = 0; k < n * t; ++k) {
      x[k] = token(rng);  // random tokens: only the current one predicts the next
      y[k] = (x[k] + 1) % vocab;
    }
    s.set_labels(ids, x);
    s.set_labels(labels, y);
    losses.push_back(s.step());
  }
  return losses;
}

TEST(cpu_onednn, LanguageModelLearnsNextToken) {
  const int steps = 100;
  std::vector<float> losses = train_language_model(steps);
  const float start = (losses[0] + losses[1] + losses[2]) / 3;
  const float end = (losses[steps - 3] + losses[steps - 2] + losses[steps - 1]) / 3;
  EXPECT_GT(start, 1.5f);  // about ln(8) before training
  // It reaches ~0.003 here; a wrong gradient anywhere in the stack stalls it far above.
  EXPECT_LT(end, 0.05f * start) << "start " << start << " end " << end;
  EXPECT_EQ(train_language_model(steps), losses) << "same seed, same threads: same losses";
}

// --- errors ------------------------------------------------------------------------------------

TEST(cpu_onednn, GroupedConvIsUnimplemented) {
  GraphBuilder b("groups", 1);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {4, 5, 5});
  int32_t labels = -1;
  auto graph = with_ce_head(b, b.conv2d("conv", x, conv(4, 3, 1, 0, 1, true, 2)), 3, &labels);
  const dlhost_backend_api* api = backend();
  dlhost_context* context = nullptr;
  ASSERT_EQ(take(api->context_create(0, nullptr, &context)).code, DLHOST_CODE_OK);
  dlhost_optimizer_desc opt{};
  opt.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
  opt.kind = DLHOST_OPTIMIZER_SGD;
  dlhost_model* model = nullptr;
  Outcome o = take(api->compile(context, graph->view(), &opt, nullptr, &model));
  EXPECT_EQ(o.code, DLHOST_CODE_UNIMPLEMENTED) << o.message;
  EXPECT_NE(o.message.find("groups=2"), std::string::npos) << o.message;
  EXPECT_EQ(model, nullptr);
  api->context_destroy(context);
}

TEST(cpu_onednn, SetInputRejectsBadData) {
  GraphBuilder b("inputs", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {4});
  int32_t labels = -1;
  Session s(with_ce_head(b, data, 3, &labels));
  const std::vector<int32_t> bad_label = {1, 3};  // 3 classes: 3 is out of range
  Outcome o = take(s.api()->set_input(s.model(), labels, bad_label.data(), 8));
  EXPECT_EQ(o.code, DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("labels[1] = 3"), std::string::npos) << o.message;
  const std::vector<int32_t> negative = {-1, 0};
  EXPECT_EQ(take(s.api()->set_input(s.model(), labels, negative.data(), 8)).code,
            DLHOST_CODE_INVALID_ARGUMENT);
  const std::vector<int32_t> good = {2, 0};
  EXPECT_EQ(take(s.api()->set_input(s.model(), labels, good.data(), 8)).code, DLHOST_CODE_OK);
  const std::vector<float> x(8, 1.0f);
  EXPECT_EQ(take(s.api()->set_input(s.model(), data, x.data(), 28)).code,
            DLHOST_CODE_INVALID_ARGUMENT);
  const int32_t logits = s.graph().node(1).output;  // the logits: not an input
  EXPECT_EQ(take(s.api()->set_input(s.model(), logits, x.data(), 24)).code,
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(take(s.api()->set_input(s.model(), data, x.data(), 32)).code, DLHOST_CODE_OK);
}

// The parameter calls and compile refuse as the framework backends do, through the SDK's
// framework kit (issue 44): the same checks, order and words, naming this build's plugin.
TEST(cpu_onednn, ParameterCallsAndCompileRefuseInTheFrameworkKitsWords) {
  auto graph = [] {
    GraphBuilder b("kit_checks", 2);
    int32_t labels = -1;
    return with_ce_head(b, b.input("data", DLHOST_DTYPE_F32, {4}), 3, &labels);
  };
  Session s(graph());
  const std::string who = std::string(DLHOST_TEST_ONEDNN_PLUGIN) + ": ";
  const int32_t n = s.graph().num_params();
  std::vector<float> w(static_cast<size_t>(s.count(0)));
  const size_t bytes = w.size() * 4;
  auto refusal = [](dlhost_status* status) {
    Outcome o = take(status);
    EXPECT_EQ(o.code, DLHOST_CODE_INVALID_ARGUMENT) << o.message;
    return o.message;
  };
  const auto* api = s.api();
  EXPECT_EQ(
      refusal(api->read_param(s.model(), n, DLHOST_PARAM_VALUE, w.data(), bytes)),
      who + "no parameter " + std::to_string(n) + " (the graph has " + std::to_string(n) + ")");
  EXPECT_EQ(refusal(api->read_param(s.model(), -1, DLHOST_PARAM_GRAD, w.data(), bytes)),
            who + "no parameter -1 (the graph has " + std::to_string(n) + ")");
  EXPECT_EQ(refusal(api->write_param(s.model(), 0, DLHOST_PARAM_VALUE, w.data(), 4)),
            who + "parameter 0 takes " + std::to_string(bytes) + " bytes, got 4");
  EXPECT_EQ(refusal(api->read_param(s.model(), 0, DLHOST_PARAM_VALUE, nullptr, bytes)),
            who + "parameter 0 takes " + std::to_string(bytes) + " bytes, got NULL");
  EXPECT_EQ(refusal(api->write_param(s.model(), 0, 7, w.data(), bytes)),
            who + "unknown parameter part 7");
  EXPECT_EQ(take(api->read_param(s.model(), 0, DLHOST_PARAM_GRAD, w.data(), bytes)).code,
            DLHOST_CODE_OK);
  auto compile_error = [&](const dlhost_optimizer_desc& opt) -> std::pair<int32_t, std::string> {
    try {
      Session bad(opt, graph());
    } catch (const Error& e) {
      return {e.code(), e.what()};
    }
    return {DLHOST_CODE_OK, "compiled"};
  };
  dlhost_optimizer_desc unknown = test_attrs::sgd(0.1f);
  unknown.kind = 7;
  EXPECT_EQ(compile_error(unknown),
            std::make_pair(int32_t{DLHOST_CODE_UNIMPLEMENTED},
                           "compile: " + who + "optimizer kind 7 (unknown) not supported"));
  EXPECT_EQ(compile_error(test_attrs::sgd(0.1f, 0.0f, -0.5f)),
            std::make_pair(int32_t{DLHOST_CODE_INVALID_ARGUMENT},
                           "compile: " + who + "negative momentum, weight_decay or clip_norm"));
}

// --- ABI 1.4: the Transformer's ops and AdamW --------------------------------------------------

// [N, T, C] data -> a per-step FC (so a parameter lies upstream) -> body -> CE over the samples.
void check_sequence_gradients(const std::string& name,
                              const std::function<int32_t(GraphBuilder&, int32_t)>& body) {
  check_ce_gradients(
      name, 2, {5, 8},
      [&](GraphBuilder& b, int32_t x) { return body(b, b.fc("in", x, fc(8, true, 2))); }, 1e-2f);
}

TEST(cpu_onednn, LayerNormAndGeluGradients) {
  check_sequence_gradients("layer_norm", [](GraphBuilder& b, int32_t x) {
    return b.layer_norm("ln", x, {DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE, 1e-5f});
  });
  for (int32_t kind : {DLHOST_GELU_ERF, DLHOST_GELU_TANH})
    check_sequence_gradients("gelu", [kind](GraphBuilder& b, int32_t x) {
      return b.gelu("gelu", x, {DLHOST_GELU_ATTRS_STRUCT_SIZE, kind});
    });
}

// Causal with q, k, v from layers of their own; then one tensor as q, k and v at once, whose
// gradient must sum the three paths.
TEST(cpu_onednn, AttentionGradients) {
  check_sequence_gradients("causal", [](GraphBuilder& b, int32_t x) {
    return b.attention("attn", b.fc("q", x, fc(8, true, 2)), b.fc("k", x, fc(8, false, 2)),
                       b.fc("v", x, fc(8, true, 2)), {DLHOST_ATTENTION_ATTRS_STRUCT_SIZE, 2, 1, 0});
  });
  check_sequence_gradients("self", [](GraphBuilder& b, int32_t x) {
    return b.attention("attn", x, x, x, {DLHOST_ATTENTION_ATTRS_STRUCT_SIZE, 4, 0, 0});
  });
}

// Causal attention: position 0 sees only itself, so its output is v's row 0 whatever q and k
// are; the last position mixes every row.
TEST(cpu_onednn, CausalAttentionSeesOnlyThePast) {
  const int64_t t = 4, c = 2;
  GraphBuilder b("causal", 1);
  int32_t q = b.input("q", DLHOST_DTYPE_F32, {t, c});
  int32_t v = b.input("v", DLHOST_DTYPE_F32, {t, c});
  int32_t y = b.attention("attn", q, q, v, {DLHOST_ATTENTION_ATTRS_STRUCT_SIZE, 1, 1, 0});
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {t, c});
  b.mse_loss("loss", y, target);
  Session s(b.finish());
  std::mt19937 rng(3);
  const std::vector<float> qv = uniform(t * c, rng), vv = uniform(t * c, rng);
  s.set(q, qv);
  s.set(v, vv);
  s.set(target, std::vector<float>(t * c, 0.0f));
  s.loss();
  std::vector<float> out(t * c);
  const auto* read = reinterpret_cast<const dlhost_tensor_read_ext*>(dlhost_find_extension(
      test_plugins::build_plugin(DLHOST_PLUGIN_BACKEND, DLHOST_TEST_ONEDNN_PLUGIN)
          .table->extensions,
      DLHOST_EXT_TENSOR_READ));
  ASSERT_NE(read, nullptr);
  check_status(read->read_tensor(s.model(), y, out.data(), out.size() * 4), "read_tensor");
  // Reference in double: softmax over j <= i of q_i . q_j / sqrt(c).
  for (int64_t i = 0; i < t; ++i) {
    std::vector<double> w(i + 1);
    double sum = 0.0;
    for (int64_t j = 0; j <= i; ++j) {
      double dot = 0.0;
      for (int64_t e = 0; e < c; ++e) dot += double(qv[i * c + e]) * qv[j * c + e];
      w[j] = std::exp(dot / std::sqrt(double(c)));
      sum += w[j];
    }
    for (int64_t e = 0; e < c; ++e) {
      double o = 0.0;
      for (int64_t j = 0; j <= i; ++j) o += w[j] / sum * vv[j * c + e];
      EXPECT_NEAR(out[i * c + e], o, 1e-5) << "position " << i;
    }
  }
}

// ids -> embedding -> positions -> tied output layer -> CE per position: the table's gradient
// is the sum of the lookup's and the output layer's (checked against finite differences of the
// loss), and the rows of the position table past T get none.
TEST(cpu_onednn, TiedOutputLayerAndPositionsGradients) {
  const int64_t n = 2, t = 3, vocab = 7, dim = 4, max_positions = 5;
  GraphBuilder b("tied", n);
  int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {t});
  int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {t});
  int32_t words = b.embedding("wte", ids, embedding(vocab, dim));
  int32_t x = b.position_embedding("wpe", words,
                                   {DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE, max_positions});
  x = b.layer_norm("ln", x, {DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE, 1e-5f});
  b.softmax_cross_entropy(
      "loss", b.tied_fc("head", x, words, {DLHOST_TIED_FC_ATTRS_STRUCT_SIZE, -1, 1}), labels);
  Session s(b.finish());
  std::mt19937 rng(41);
  s.randomize(rng);
  s.set_labels(ids, {1, 4, 1, 0, 6, 2});
  s.set_labels(labels, {4, 1, 0, 6, 2, 3});
  expect_gradients_match(s, 1e-2f);
  const std::vector<float> dpos = s.get(s.param_id("wpe.table"), DLHOST_PARAM_GRAD);
  for (int64_t i = t * dim; i < max_positions * dim; ++i) EXPECT_EQ(dpos[i], 0.0f) << i;
}

// AdamW against dlhost_backend.h's formula in double, three steps (the bias corrections change
// with t), with decoupled weight decay and clipping.
TEST(cpu_onednn, AdamWUpdateMatchesFormula) {
  const dlhost_optimizer_desc opt = test_attrs::adamw(0.01f, 0.1f, 0.5f, 0.8f, 0.95f, 1e-6f);
  GraphBuilder b("adamw", 2);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {3, 5, 5});
  int32_t labels = -1;
  Session s(opt, with_ce_head(b, b.conv2d("conv", x, conv(16, 3)), 3, &labels));
  std::mt19937 rng(13);
  const int32_t params = s.graph().num_params();
  std::vector<test_adamw::Reference> want;
  std::vector<std::vector<float>> g(params);
  double sum = 0.0;
  for (int32_t p = 0; p < params; ++p) {
    std::vector<float> wf = uniform(s.count(p), rng);
    g[p] = uniform(s.count(p), rng);
    for (float e : g[p]) sum += double(e) * e;
    s.put(p, wf);
    want.emplace_back(wf);
  }
  const double scale = std::min(1.0, opt.clip_norm / std::sqrt(sum));
  ASSERT_LT(scale, 1.0);  // clipping takes part
  for (int step = 1; step <= 3; ++step) {
    for (int32_t p = 0; p < params; ++p) s.put(p, g[p], DLHOST_PARAM_GRAD);
    s.update();
    for (int32_t p = 0; p < params; ++p) {
      want[p].update(opt, step, g[p], scale);
      std::vector<float> got = s.get(p);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[p].w[i], 2e-6)
            << s.graph().param(p).name << "[" << i << "] step " << step;
    }
  }
}

}  // namespace
}  // namespace dlhost

namespace dlhost {
namespace {

// --- precision bf16 ----------------------------------------------------------------------------

// Whether the plugin's capabilities list bf16 (they follow the ISA oneDNN dispatches here).
bool backend_offers_bf16() {
  const auto* ext = reinterpret_cast<const dlhost_backend_caps_ext*>(dlhost_find_extension(
      test_plugins::build_plugin(DLHOST_PLUGIN_BACKEND, DLHOST_TEST_ONEDNN_PLUGIN)
          .table->extensions,
      DLHOST_EXT_BACKEND_CAPS));
  if (ext == nullptr) return false;
  dlhost_backend_caps caps{};
  caps.struct_size = DLHOST_BACKEND_CAPS_STRUCT_SIZE;
  if (take(ext->capabilities(&caps)).code != DLHOST_CODE_OK) return false;
  return (caps.precisions & (1u << DLHOST_PRECISION_BF16)) != 0;
}

// A one-block GPT: token and position embeddings, q/k/v FCs over [N, T, C], causal attention
// with two heads, an output FC, layer norm and the tied output layer: every bf16 product of the
// plugin (FC forward and both gradients, the four attention matmuls, the tied layer's three).
std::unique_ptr<Graph> tiny_gpt(int32_t* ids, int32_t* labels) {
  const int64_t n = 2, t = 6, vocab = 13, dim = 16;
  GraphBuilder b("tiny_gpt", n);
  *ids = b.input("ids", DLHOST_DTYPE_I32, {t});
  *labels = b.input("labels", DLHOST_DTYPE_I32, {t});
  int32_t words = b.embedding("wte", *ids, embedding(vocab, dim));
  int32_t x = b.position_embedding("wpe", words, {DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE, t});
  int32_t y =
      b.attention("attn", b.fc("q", x, fc(dim, true, 2)), b.fc("k", x, fc(dim, false, 2)),
                  b.fc("v", x, fc(dim, true, 2)), {DLHOST_ATTENTION_ATTRS_STRUCT_SIZE, 2, 1, 0});
  y = b.layer_norm("ln", b.fc("proj", y, fc(dim, true, 2)),
                   {DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE, 1e-5f});
  b.softmax_cross_entropy(
      "loss", b.tied_fc("head", y, words, {DLHOST_TIED_FC_ATTRS_STRUCT_SIZE, -1, 1}), *labels);
  return b.finish();
}

// A small CNN: conv (-> ReLU, fused) -> max pool -> conv -> FC over the blocked output ->
// cross-entropy: the convolution's bf16 products (forward, both gradients) and an FC after a
// blocked layout.
std::unique_ptr<Graph> tiny_cnn(int32_t* data, int32_t* labels) {
  GraphBuilder b("tiny_cnn", 4);
  *data = b.input("data", DLHOST_DTYPE_F32, {3, 12, 12});
  int32_t x = b.activation("relu1", b.conv2d("conv1", *data, conv(16, 3, 1, 1)),
                           act(DLHOST_ACTIVATION_RELU));
  x = b.pool2d("pool1", x, pool(DLHOST_POOL_MAX, 2, 2, 0, false, false));
  x = b.conv2d("conv2", x, conv(32, 3, 1, 1));
  return with_ce_head(b, x, 5, labels);
}

// The loss and every parameter gradient of one forward/backward in fp32 and in bf16 (same
// weights and batch, set by `feed`): within bf16's rounding (norm-wise relative error under
// `rtol`), and apart by more than fp32's (1e-4): the products really read bf16. A wrong layout
// or operand is off by O(1).
void expect_bf16_near_fp32(const std::function<std::unique_ptr<Graph>()>& make,
                           const std::function<void(Session&)>& feed, double rtol) {
  std::vector<std::vector<float>> grads[2];
  float losses[2] = {0, 0};
  const char* modes[2] = {"fp32", "bf16"};
  for (int i = 0; i < 2; ++i) {
    Session s(test_attrs::sgd(0.0f), make(), 1, 42, modes[i]);
    std::mt19937 rng(7);
    s.randomize(rng);
    feed(s);
    losses[i] = s.loss();
    s.backward();
    for (int32_t p = 0; p < s.graph().num_params(); ++p)
      grads[i].push_back(s.get(p, DLHOST_PARAM_GRAD));
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-2 * std::abs(losses[0]));
  double largest = 0.0;
  for (size_t p = 0; p < grads[0].size(); ++p) {
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < grads[0][p].size(); ++i) {
      diff += std::pow(double(grads[1][p][i]) - grads[0][p][i], 2);
      norm += std::pow(double(grads[0][p][i]), 2);
    }
    ASSERT_GT(norm, 0.0) << "parameter " << p << " has no gradient";
    const double rel = std::sqrt(diff / norm);
    EXPECT_LT(rel, rtol) << "parameter " << p;
    largest = std::max(largest, rel);
  }
  EXPECT_GT(largest, 1e-4) << "bf16 gradients equal fp32's: the products did not read bf16";
}

TEST(cpu_onednn, Bf16TransformerMatchesFp32WithinBf16Rounding) {
  if (!backend_offers_bf16())
    GTEST_SKIP() << "this CPU has no bf16 products for oneDNN (needs avx512_core_bf16 or AMX)";
  int32_t ids = -1, labels = -1;
  expect_bf16_near_fp32([&] { return tiny_gpt(&ids, &labels); },
                        [&](Session& s) {
                          s.set_labels(ids, {1, 4, 12, 0, 6, 2, 3, 3, 9, 11, 5, 7});
                          s.set_labels(labels, {4, 12, 0, 6, 2, 3, 3, 9, 11, 5, 7, 1});
                        },
                        // 8 x bf16's unit roundoff 2^-8; measured at most 0.007.
                        1.0 / 32);
}

TEST(cpu_onednn, Bf16ConvolutionMatchesFp32WithinBf16Rounding) {
  if (!backend_offers_bf16())
    GTEST_SKIP() << "this CPU has no bf16 products for oneDNN (needs avx512_core_bf16 or AMX)";
  int32_t data = -1, labels = -1;
  expect_bf16_near_fp32([&] { return tiny_cnn(&data, &labels); },
                        [&](Session& s) {
                          std::mt19937 rng(11);
                          s.set(data, uniform(4 * 3 * 12 * 12, rng));
                          s.set_labels(labels, {0, 3, 4, 1});
                        },
                        // conv1's gradients sum 576 products of both signs, whose cancellation
                        // magnifies the rounding of dY: measured 0.055 on its weights, 0.033 on
                        // its bias, under 0.01 elsewhere.
                        1.0 / 8);
}

// In bf16 an op without a bf16 path (the LSTM) refuses to compile, naming itself, instead of
// running fp32 under a bf16 label.
TEST(cpu_onednn, Bf16RefusesTheLstm) {
  if (!backend_offers_bf16())
    GTEST_SKIP() << "this CPU has no bf16 products for oneDNN (needs avx512_core_bf16 or AMX)";
  GraphBuilder b("lstm_bf16", 2);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {3, 4});
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {3, 5});
  b.mse_loss("loss", b.lstm("lstm", x, lstm(5, 1)), target);
  try {
    Session s(test_attrs::sgd(0.0f), b.finish(), 1, 42, "bf16");
    FAIL() << "compiled an LSTM in bf16";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_UNIMPLEMENTED) << e.what();
    EXPECT_NE(std::string(e.what()).find("op lstm (node lstm)"), std::string::npos) << e.what();
  }
}

// Where the step cannot go into the GEMM, fused_step keeps the split step and trains the same:
// clipping (its scale needs every gradient first), AdamW (not linear in the gradient) and bf16
// (matmul gradients).
TEST(cpu_onednn, FusedStepKeepsTheSplitStepWhereItCannotFuse) {
  struct Case {
    const char* what;
    dlhost_optimizer_desc opt;
    std::string precision;
  };
  std::vector<Case> cases = {{"clip_norm", test_attrs::sgd(0.1f, 0.9f, 0.01f, 0.5f), ""},
                             {"adamw", test_attrs::adamw(0.01f, 0.01f), ""}};
  if (backend_offers_bf16()) cases.push_back({"bf16", test_attrs::sgd(0.1f, 0.9f, 0.01f), "bf16"});
  const int64_t batch = 256;
  const FusedRun start = train_fused_mlp(test_attrs::sgd(0.0f), false, batch, "", 0);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const FusedRun split = train_fused_mlp(c.opt, false, batch, c.precision);
    const FusedRun fused = train_fused_mlp(c.opt, true, batch, c.precision);
    EXPECT_EQ(fused.implementation.find("+ sgd"), std::string::npos) << fused.implementation;
    expect_same_training(fused, split, start, 2e-6);
  }
}

}  // namespace
}  // namespace dlhost
