// test_cpu_reference.cpp — the cpu_reference backend, the numerical oracle, through its C ABI only:
// every op's backward against central finite differences on small odd shapes, forward values
// worked out by hand (or from the header's formulas written out again here), the SGD formula with
// momentum, weight decay and clipping, the pinned dropout mask, a small network that learns, and
// run-to-run determinism.
//
// Two graph tricks make every tensor observable although the ABI only exposes parameters and the
// loss:
// - a "source" is a tensor whose every element is one parameter element (a 1-hot input through a
//   convolution, a fully connected layer or an embedding), so the gradient arriving at an op's
//   input is read as that parameter's gradient, and finite differences can perturb the input;
// - a "probe" adds a zero source to an op's output and takes the MSE against zero, so the source's
//   gradient is 2 y / n: the op's forward output, read exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "data/synthetic.h"
#include "dlhost/dlhost.h"
#include "graph_attrs.h"

namespace {

using dlhost::Graph;
using dlhost::GraphBuilder;

const dlhost_plugin* plugin() {
  // Kept in a static (plugins are never unloaded), so the leak checker sees it reachable.
  static dlhost::PluginRegistry* registry = [] {
    auto* r = new dlhost::PluginRegistry();
    r->load_file(std::string(DLHOST_TEST_PLUGIN_DIR) + "/libdlhost_cpu_reference.so");
    return r;
  }();
  const auto* found = registry->find(DLHOST_PLUGIN_BACKEND, "cpu_reference");
  return found != nullptr ? found->table : nullptr;
}

const dlhost_backend_api* api() {
  const dlhost_plugin* p = plugin();
  if (p == nullptr) throw std::runtime_error("libdlhost_cpu_reference.so did not load");
  return p->backend;
}

void ok(dlhost_status* status) { dlhost::check_status(status, "cpu_reference"); }

// The code of a status (OK when NULL), releasing it.
int32_t code_of(dlhost_status* status, std::string* message = nullptr) {
  if (status == nullptr) return DLHOST_CODE_OK;
  dlhost::StatusPtr owned(status);
  if (message != nullptr) *message = owned->message;
  return owned->code;
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * static_cast<float>(rng() >> 8) / 16777216.0f;
  return v;
}

// --- attribute helpers -----------------------------------------------------------------------

using namespace dlhost::test_attrs;

struct ConvCase {
  int64_t n, c, h, w, out, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias;
};

// The case as its test's name says it: without a printer gtest names a parameterised test by
// the struct's bytes, padding included, so the ctest names changed from build to build.
void PrintTo(const ConvCase& k, std::ostream* os) {
  *os << "n" << k.n << "c" << k.c << "h" << k.h << "w" << k.w << "o" << k.out << "k" << k.kh << "x"
      << k.kw << "s" << k.sh << "x" << k.sw << "p" << k.ph << "x" << k.pw << "d" << k.dh << "x"
      << k.dw << "g" << k.groups << (k.bias ? "b" : "");
}

dlhost_conv2d_attrs conv_attrs(const ConvCase& k) {
  dlhost_conv2d_attrs a{};
  a.struct_size = DLHOST_CONV2D_ATTRS_STRUCT_SIZE;
  a.out_channels = k.out;
  a.kernel_h = k.kh;
  a.kernel_w = k.kw;
  a.stride_h = k.sh;
  a.stride_w = k.sw;
  a.pad_h = k.ph;
  a.pad_w = k.pw;
  a.dilation_h = k.dh;
  a.dilation_w = k.dw;
  a.groups = k.groups;
  a.has_bias = k.bias;
  return a;
}

// --- sources: tensors made of parameters ------------------------------------------------------

// A tensor of any shape whose element e is exactly one element of one parameter:
//   rank 4 [N, C, H, W]: 1-hot input [N, N, 1, 1] through a conv with kernel H x W and padding
//     H-1, W-1 (no bias): y[n, c, i, j] = W[c, n, H-1-i, W-1-j];
//   rank 3 [N, T, D]: an embedding of the ids 0 .. N*T-1: y = the table itself;
//   rank 2 [N, F]: 1-hot input [N, N] through an FC without bias: y[n, f] = W[f, n].
struct Source {
  int32_t tensor = -1;
  int32_t feed = -1;  // the 1-hot or ids input
  std::vector<int64_t> dims;
};

Source source(GraphBuilder& b, const std::string& name, std::vector<int64_t> dims) {
  Source s;
  s.dims = dims;
  const int64_t n = dims[0];
  if (dims.size() == 4) {
    s.feed = b.input(name + "_onehot", DLHOST_DTYPE_F32, {n, 1, 1});
    ConvCase k{n, n,           1,           1, dims[1], dims[2], dims[3], 1,
               1, dims[2] - 1, dims[3] - 1, 1, 1,       1,       false};
    s.tensor = b.conv2d(name, s.feed, conv_attrs(k));
  } else if (dims.size() == 3) {
    s.feed = b.input(name + "_ids", DLHOST_DTYPE_I32, {dims[1]});
    s.tensor = b.embedding(name, s.feed, embedding(n * dims[1], dims[2]));
  } else {
    s.feed = b.input(name + "_onehot", DLHOST_DTYPE_F32, {n});
    s.tensor = b.fc(name, s.feed, fc(dims[1], false));
  }
  return s;
}

int64_t count_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Parameter-element index of tensor element e (row-major in the tensor's dims).
int64_t source_index(const Source& s, int64_t e) {
  const auto& d = s.dims;
  if (d.size() == 4) {
    const int64_t j = e % d[3], i = e / d[3] % d[2], c = e / (d[2] * d[3]) % d[1],
                  n = e / (d[1] * d[2] * d[3]);
    return ((c * d[0] + n) * d[2] + (d[2] - 1 - i)) * d[3] + (d[3] - 1 - j);
  }
  if (d.size() == 3) return e;
  const int64_t f = e % d[1], n = e / d[1];
  return f * d[0] + n;
}

// --- a compiled model, driven through the ABI -------------------------------------------------

class Session {
 public:
  explicit Session(std::unique_ptr<Graph> graph, dlhost_optimizer_desc opt = sgd(0.1f),
                   std::map<std::string, std::string> compile_options = {},
                   std::map<std::string, std::string> context_options = {{"seed", "42"}})
      : graph_(std::move(graph)) {
    context_opts_.values = std::move(context_options);
    compile_opts_.values = std::move(compile_options);
    ok(api()->context_create(0, &context_opts_, &context_));
    ok(api()->compile(context_, graph_->view(), &opt, &compile_opts_, &model_));
    auto init = dlhost::initial_params(*graph_, 1);
    for (int32_t p = 0; p < graph_->num_params(); ++p) write(p, init[p]);
  }
  ~Session() {
    api()->model_destroy(model_);
    api()->context_destroy(context_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Graph& graph() const { return *graph_; }
  dlhost_model* model() { return model_; }

  // Parameter `k` of the node that produced tensor `t`.
  int32_t param_of(int32_t t, int k = 0) const {
    return graph_->node(graph_->tensor(t).producer).params[k];
  }
  int64_t count(int32_t param) const { return graph_->param(param).count; }

  void set(int32_t tensor, const std::vector<float>& v) {
    ok(api()->set_input(model_, tensor, v.data(), v.size() * 4));
  }
  void set_ids(int32_t tensor, const std::vector<int32_t>& v) {
    ok(api()->set_input(model_, tensor, v.data(), v.size() * 4));
  }
  std::vector<float> read(int32_t param, int32_t part = DLHOST_PARAM_VALUE) {
    std::vector<float> v(static_cast<size_t>(count(param)));
    ok(api()->read_param(model_, param, part, v.data(), v.size() * 4));
    return v;
  }
  void write(int32_t param, const std::vector<float>& v, int32_t part = DLHOST_PARAM_VALUE) {
    ok(api()->write_param(model_, param, part, v.data(), v.size() * 4));
  }
  float forward() {
    ok(api()->forward(model_));
    float loss = 0;
    ok(api()->read_loss(model_, &loss));
    return loss;
  }
  void backward(const dlhost_grad_ready* ready = nullptr) { ok(api()->backward(model_, ready)); }
  void update() { ok(api()->update(model_)); }
  float step() {
    float loss = forward();
    backward();
    update();
    return loss;
  }

  // Feeds a source its 1-hot matrix or ids, and sets its values (zero by default).
  void init_source(const Source& s, std::vector<float> values = {}) {
    const int64_t n = s.dims[0];
    if (s.dims.size() == 3) {
      std::vector<int32_t> ids(static_cast<size_t>(n * s.dims[1]));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
      set_ids(s.feed, ids);
    } else {
      std::vector<float> onehot(static_cast<size_t>(n * n), 0.0f);
      for (int64_t i = 0; i < n; ++i) onehot[i * n + i] = 1.0f;
      set(s.feed, onehot);
    }
    if (values.empty()) values.assign(static_cast<size_t>(count_of(s.dims)), 0.0f);
    std::vector<float> w(values.size());
    for (int64_t e = 0; e < count_of(s.dims); ++e) w[source_index(s, e)] = values[e];
    write(param_of(s.tensor), w);
  }
  // The gradient arriving at a source's tensor, in the tensor's layout.
  std::vector<float> source_grad(const Source& s) {
    auto g = read(param_of(s.tensor), DLHOST_PARAM_GRAD);
    std::vector<float> out(g.size());
    for (int64_t e = 0; e < count_of(s.dims); ++e) out[e] = g[source_index(s, e)];
    return out;
  }

 private:
  std::unique_ptr<Graph> graph_;
  dlhost_options context_opts_, compile_opts_;
  dlhost_context* context_ = nullptr;
  dlhost_model* model_ = nullptr;
};

// --- finite differences ------------------------------------------------------------------------

// Every parameter's gradient (so every source's, i.e. every op input's) against the central
// difference (L(w + eps) - L(w - eps)) / 2 eps, on up to `per_param` elements of each. The
// tolerance is relative to the largest gradient element of that parameter, which must not be
// zero (a test that compares zeros proves nothing). Backward runs twice first: gradients must be
// overwritten, never accumulated across calls.
void check_gradients(Session& s, float eps, double tolerance = 2e-3, int64_t per_param = 40) {
  s.forward();
  s.backward();
  s.backward();  // overwrites: a second pass must not add to the first
  for (int32_t p = 0; p < s.graph().num_params(); ++p) {
    const std::string name = s.graph().param(p).name;
    const auto grad = s.read(p, DLHOST_PARAM_GRAD);
    auto value = s.read(p);
    double scale = 0;
    for (float g : grad) scale = std::max(scale, std::fabs(static_cast<double>(g)));
    ASSERT_GT(scale, 1e-7) << name << ": all-zero gradient";
    const int64_t n = static_cast<int64_t>(value.size());
    const int64_t stride = std::max<int64_t>(1, n / per_param);
    for (int64_t i = 0; i < n; i += stride) {
      const float original = value[i];
      value[i] = original + eps;
      s.write(p, value);
      const double plus = s.forward();
      value[i] = original - eps;
      s.write(p, value);
      const double minus = s.forward();
      value[i] = original;
      s.write(p, value);
      const double numeric = (plus - minus) / (2.0 * eps);
      EXPECT_NEAR(grad[i], numeric, tolerance * scale + 2e-6) << name << "[" << i << "]";
    }
  }
}

// MSE of `y` against a random target input of its shape; returns the loss tensor.
int32_t mse_to_random(GraphBuilder& b, int32_t y, std::vector<int64_t> per_sample,
                      int32_t* target) {
  *target = b.input("target", DLHOST_DTYPE_F32, per_sample);
  return b.mse_loss("loss", y, *target);
}

std::vector<int64_t> tail(const std::vector<int64_t>& dims) {
  return std::vector<int64_t>(dims.begin() + 1, dims.end());
}

// A graph "source -> op -> MSE against a random target", gradient-checked. `op` adds the op and
// returns its output with its per-sample dims.
template <class Op>
void check_op(const std::vector<int64_t>& in_dims, Op op, float eps, uint32_t seed,
              std::vector<float> in_values = {}, double tolerance = 2e-3) {
  GraphBuilder b("t", in_dims[0]);
  Source x = source(b, "x", in_dims);
  std::vector<int64_t> out_dims;
  int32_t y = op(b, x.tensor, &out_dims);
  int32_t target = -1;
  mse_to_random(b, y, out_dims, &target);
  Session s(b.finish());
  if (in_values.empty()) in_values = uniform(static_cast<size_t>(count_of(in_dims)), seed);
  s.init_source(x, in_values);
  s.set(target,
        uniform(static_cast<size_t>(in_dims[0] * count_of(out_dims)), seed + 1, -1.0f, 1.0f));
  // Parameters of the op itself: random, away from the initializers' zeros and ones.
  for (int32_t p = 0; p < s.graph().num_params(); ++p)
    if (p != s.param_of(x.tensor))
      s.write(p, uniform(static_cast<size_t>(s.count(p)), seed + 10 + p, -0.8f, 0.8f));
  check_gradients(s, eps, tolerance);
}

// Values spaced at least `gap` apart in a random order: max pooling and ReLU stay away from ties
// and kinks under a perturbation smaller than gap / 2.
std::vector<float> spaced(size_t n, uint32_t seed, float gap) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (static_cast<float>(i) - n / 2.0f) * gap + gap / 2;
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

// ================================================================================================
// The plugin and its device.

TEST(CpuReference, PluginTableAndDevice) {
  const dlhost_plugin* p = plugin();
  ASSERT_NE(p, nullptr);
  EXPECT_STREQ(p->name, "cpu_reference");
  EXPECT_EQ(p->kind, DLHOST_PLUGIN_BACKEND);
  EXPECT_EQ(p->abi_major, static_cast<uint32_t>(DLHOST_ABI_MAJOR));
  EXPECT_EQ(p->abi_minor, static_cast<uint32_t>(DLHOST_ABI_MINOR));
  ASSERT_EQ(api()->device_count(), 1);
  const dlhost_device_info* d = nullptr;
  ok(api()->device_info(0, &d));
  EXPECT_STREQ(d->name, "cpu0");
  EXPECT_EQ(d->kind, DLHOST_DEVICE_CPU);
  EXPECT_STREQ(d->isa, "generic");
  EXPECT_GT(d->cores, 0);
  EXPECT_GT(d->memory_bytes, 0u);
  EXPECT_NE(std::string(d->model), "");
  const std::string library = d->library;
  EXPECT_EQ(library.rfind("reference (OpenBLAS ", 0), 0u) << library;
  EXPECT_TRUE(library.size() > 20 && std::isdigit(static_cast<unsigned char>(library[20])))
      << library;
  EXPECT_EQ(code_of(api()->device_info(1, &d)), DLHOST_CODE_OUT_OF_RANGE);
}

// ================================================================================================
// Backward of every op against finite differences.

TEST(CpuReferenceGradients, FullyConnectedFlattensNchw) {
  for (int64_t n : {1, 3}) {
    check_op(
        {n, 2, 3, 2},
        [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
          *out = {5};
          return b.fc("fc", x, fc(5));
        },
        1e-2f, 10 + n);
  }
}

TEST(CpuReferenceGradients, FullyConnectedPerTimeStep) {
  check_op(
      {3, 4, 5},
      [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
        *out = {4, 3};
        return b.fc("fc", x, fc(3, true, 2));
      },
      1e-2f, 20);
}

int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// The header's pooling size rule: floor or ceil, and in ceil mode the last window must start
// inside the input or its left padding.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil) {
  const int64_t span = in + 2 * p - k;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

class ConvGradients : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGradients, MatchFiniteDifferences) {
  const ConvCase k = GetParam();
  check_op(
      {k.n, k.c, k.h, k.w},
      [&](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
        *out = {k.out, conv_out(k.h, k.kh, k.sh, k.ph, k.dh),
                conv_out(k.w, k.kw, k.sw, k.pw, k.dw)};
        return b.conv2d("conv", x, conv_attrs(k));
      },
      1e-2f, 30);
}

// {n, c, h, w, out, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias}
INSTANTIATE_TEST_SUITE_P(
    CpuReference, ConvGradients,
    ::testing::Values(ConvCase{1, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},  // plain 3x3
                      ConvCase{3, 4, 7, 6, 6, 3, 2, 2, 2, 1, 0, 1, 1, 2, true},  // stride, groups
                      ConvCase{3, 3, 9, 7, 3, 3, 3, 2, 1, 2, 2, 2, 2, 3,
                               true},  // depthwise, dilated
                      ConvCase{2, 2, 5, 5, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},   // 1x1, no bias
                      ConvCase{3, 4, 6, 5, 2, 2, 3, 3, 2, 1, 1, 2, 1, 2, true}));  // mixed

struct PoolCase {
  int64_t n, c, h, w;
  dlhost_pool_kind kind;
  int64_t k, s, p;
  bool ceil, include_pad;
};

void PrintTo(const PoolCase& k, std::ostream* os) {  // as ConvCase's
  *os << (k.kind == DLHOST_POOL_MAX ? "max" : "avg") << "_n" << k.n << "c" << k.c << "h" << k.h
      << "w" << k.w << "k" << k.k << "s" << k.s << "p" << k.p << (k.ceil ? "_ceil" : "")
      << (k.include_pad ? "_pad" : "");
}

class PoolGradients : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolGradients, MatchFiniteDifferences) {
  const PoolCase k = GetParam();
  const std::vector<int64_t> dims{k.n, k.c, k.h, k.w};
  // Spaced values: no two elements of a max window within 2 eps of each other.
  check_op(
      dims,
      [&](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
        *out = {k.c, pool_out(k.h, k.k, k.s, k.p, k.ceil), pool_out(k.w, k.k, k.s, k.p, k.ceil)};
        return b.pool2d("pool", x, pool(k.kind, k.k, k.s, k.p, k.ceil, k.include_pad));
      },
      1e-2f, 40, spaced(static_cast<size_t>(count_of(dims)), 41, 0.05f));
}

INSTANTIATE_TEST_SUITE_P(
    CpuReference, PoolGradients,
    ::testing::Values(PoolCase{1, 2, 5, 5, DLHOST_POOL_MAX, 3, 2, 1, true, true},
                      PoolCase{3, 2, 6, 5, DLHOST_POOL_MAX, 2, 2, 0, true, true},
                      PoolCase{2, 2, 7, 7, DLHOST_POOL_MAX, 3, 3, 1, false, true},
                      PoolCase{3, 2, 5, 6, DLHOST_POOL_AVG, 3, 2, 1, true, true},
                      PoolCase{3, 2, 5, 6, DLHOST_POOL_AVG, 3, 2, 1, true, false},
                      PoolCase{1, 3, 5, 5, DLHOST_POOL_AVG, 2, 1, 0, false, true},
                      PoolCase{2, 1, 4, 4, DLHOST_POOL_AVG, 2, 3, 1, true, true}));

TEST(CpuReferenceGradients, Activations) {
  for (auto kind : {DLHOST_ACTIVATION_RELU, DLHOST_ACTIVATION_SIGMOID, DLHOST_ACTIVATION_TANH}) {
    SCOPED_TRACE(kind);
    const std::vector<int64_t> dims{3, 4, 5};
    // ReLU: no element within eps of the kink at 0.
    std::vector<float> values =
        kind == DLHOST_ACTIVATION_RELU ? spaced(60, 51, 0.05f) : uniform(60, 52, -2.0f, 2.0f);
    check_op(
        dims,
        [&](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
          *out = {4, 5};
          return b.activation("act", x, act(kind));
        },
        1e-2f, 50, values);
  }
}

TEST(CpuReferenceGradients, GlobalAveragePool) {
  for (int64_t n : {1, 3}) {
    check_op(
        {n, 4, 3, 5},
        [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
          *out = {4};
          return b.global_avg_pool("gap", x);
        },
        1e-2f, 60 + n);
  }
}

TEST(CpuReferenceGradients, BatchNormRank2AndRank4) {
  check_op(
      {5, 3},
      [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
        *out = {3};
        return b.batch_norm("bn", x, {DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE, 1e-5f, 0.1f});
      },
      5e-3f, 70);
  for (int64_t n : {1, 3}) {
    check_op(
        {n, 3, 2, 3},
        [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
          *out = {3, 2, 3};
          return b.batch_norm("bn", x, {DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE, 1e-3f, 0.1f});
        },
        5e-3f, 71 + n);
  }
}

TEST(CpuReferenceGradients, LocalResponseNormalization) {
  check_op(
      {2, 5, 3, 2},
      [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
        *out = {5, 3, 2};
        return b.lrn("lrn", x, lrn(3, 0.5f, 0.75f, 2.0f));
      },
      1e-2f, 80, uniform(60, 80, -2.0f, 2.0f));
  // A window wider than the channels: every channel sees all of them.
  check_op(
      {1, 4, 2, 3},
      [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
        *out = {4, 2, 3};
        return b.lrn("lrn", x, lrn(5, 1.0f, 0.6f, 1.5f));
      },
      1e-2f, 81, uniform(24, 81, -2.0f, 2.0f));
}

TEST(CpuReferenceGradients, LstmTwoLayersAndOne) {
  check_op(
      {3, 4, 3},
      [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
        *out = {4, 3};
        return b.lstm("lstm", x, lstm(3, 2));
      },
      5e-3f, 90, {}, 4e-3);
  check_op(
      {1, 3, 2},
      [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
        *out = {3, 4};
        return b.lstm("lstm", x, lstm(4, 1));
      },
      5e-3f, 91, {}, 4e-3);
}

TEST(CpuReferenceGradients, AddIncludingATensorAddedToItself) {
  GraphBuilder b("t", 3);
  Source x = source(b, "x", {3, 2, 3, 3});
  Source y = source(b, "y", {3, 2, 3, 3});
  int32_t sum = b.add("add", x.tensor, y.tensor);
  int32_t twice = b.add("twice", sum, sum);
  int32_t target = -1;
  mse_to_random(b, twice, {2, 3, 3}, &target);
  Session s(b.finish());
  s.init_source(x, uniform(54, 100));
  s.init_source(y, uniform(54, 101));
  s.set(target, uniform(54, 102));
  check_gradients(s, 1e-2f);
}

TEST(CpuReferenceGradients, SoftmaxCrossEntropyClassifierAndSequence) {
  for (int per_step = 0; per_step < 2; ++per_step) {
    SCOPED_TRACE(per_step);
    GraphBuilder b("t", 3);
    std::vector<int64_t> dims =
        per_step ? std::vector<int64_t>{3, 4, 5} : std::vector<int64_t>{3, 5};
    Source x = source(b, "x", dims);
    int32_t labels = b.input("labels", DLHOST_DTYPE_I32,
                             per_step ? std::vector<int64_t>{4} : std::vector<int64_t>{});
    b.softmax_cross_entropy("loss", x.tensor, labels);
    Session s(b.finish());
    s.init_source(x, uniform(static_cast<size_t>(count_of(dims)), 110, -3.0f, 3.0f));
    std::vector<int32_t> ids(static_cast<size_t>(count_of(dims) / 5));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 2) % 5);
    s.set_ids(labels, ids);
    check_gradients(s, 1e-2f);
  }
}

TEST(CpuReferenceGradients, MseWithAComputedTarget) {
  // Both sides are computed, so both get a gradient (opposite signs).
  GraphBuilder b("t", 3);
  Source x = source(b, "x", {3, 2, 3});
  Source t = source(b, "t", {3, 2, 3});
  b.mse_loss("loss", x.tensor, t.tensor);
  Session s(b.finish());
  s.init_source(x, uniform(18, 120));
  s.init_source(t, uniform(18, 121));
  check_gradients(s, 1e-2f);
  auto gx = s.source_grad(x), gt = s.source_grad(t);
  for (size_t i = 0; i < gx.size(); ++i) EXPECT_FLOAT_EQ(gx[i], -gt[i]);
}

TEST(CpuReferenceGradients, EmbeddingWithRepeatedIds) {
  GraphBuilder b("t", 3);
  int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {4});
  int32_t e = b.embedding("emb", ids, embedding(5, 3));
  int32_t target = -1;
  mse_to_random(b, e, {4, 3}, &target);
  Session s(b.finish());
  // Id 1 five times, 4 once, 0 and 3 never: repeated rows must accumulate, unused stay zero.
  s.set_ids(ids, {1, 2, 1, 1, 4, 2, 1, 2, 1, 2, 2, 2});
  s.set(target, uniform(36, 130));
  s.write(0, uniform(15, 131));
  check_gradients(s, 1e-2f);
  auto g = s.read(0, DLHOST_PARAM_GRAD);
  for (int64_t d = 0; d < 3; ++d) {
    EXPECT_EQ(g[0 * 3 + d], 0.0f);
    EXPECT_EQ(g[3 * 3 + d], 0.0f);
  }
}

// ================================================================================================
// Forward values, read through a probe.

// y -> y + (zero source) -> MSE against a zero target: the source's gradient is 2 y / n.
struct Probe {
  Source zero;
  int32_t target = -1;
  int64_t n = 0;
};

Probe probe(GraphBuilder& b, int32_t y, const std::vector<int64_t>& dims) {
  Probe p;
  p.zero = source(b, "probe", dims);
  int32_t z = b.add("probe_add", y, p.zero.tensor);
  p.target = b.input("probe_target", DLHOST_DTYPE_F32, tail(dims));
  b.mse_loss("loss", z, p.target);
  p.n = count_of(dims);
  return p;
}

std::vector<float> read_probe(Session& s, const Probe& p) {
  s.init_source(p.zero);
  s.set(p.target, std::vector<float>(static_cast<size_t>(p.n), 0.0f));
  s.forward();
  s.backward();
  auto y = s.source_grad(p.zero);
  for (auto& v : y) v *= static_cast<float>(p.n) / 2.0f;
  return y;
}

void expect_values(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, std::fabs(want[i]))) << "element " << i;
}

TEST(CpuReferenceForward, Conv1x1ByHand) {
  GraphBuilder b("t", 2);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {2, 1, 2});
  ConvCase k{2, 2, 1, 2, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, true};
  int32_t y = b.conv2d("conv", x, conv_attrs(k));
  Probe p = probe(b, y, {2, 3, 1, 2});
  Session s(b.finish());
  // x[n][c][pixel]; W[o][c]; b[o].
  s.set(x, {1, 2, 3, -1, /* n = 1 */ 0.5f, 0, -2, 4});
  s.write(s.param_of(y, 0), {1, 2, -1, 0.5f, 0, 3});
  s.write(s.param_of(y, 1), {0.5f, -1, 2});
  // y[n][o][pixel] = sum_c W[o][c] x[n][c][pixel] + b[o], worked out by hand.
  expect_values(read_probe(s, p),
                {7.5, 0.5, -0.5, -3.5, 11, -1, /* n = 1 */ -3, 8.5, -2.5, 1, -4, 14});
}

TEST(CpuReferenceForward, PoolingByHand) {
  // The 4x4 input, and each case's output worked out by hand (3x3 kernel, stride 2, padding 1,
  // ceil mode: windows over rows/cols {0,1}, {1,2,3}, {3}; the last clipped to the padded input,
  // so its full-window divisor is 2 rather than 3 along that axis).
  const std::vector<float> input{7, 2, 11, 4, 1, 15, 6, 12, 13, 3, 9, 0, 5, 14, 8, 10};
  struct Case {
    dlhost_pool2d_attrs attrs;
    int64_t out;
    std::vector<double> want;
  };
  const std::vector<Case> cases{
      {pool(DLHOST_POOL_MAX, 3, 2, 1, true, true), 3, {15, 15, 12, 15, 15, 12, 14, 14, 10}},
      {pool(DLHOST_POOL_MAX, 2, 2, 0, false, true), 2, {15, 12, 14, 10}},
      {pool(DLHOST_POOL_AVG, 3, 2, 1, true, true),
       3,
       {25 / 9.0, 50 / 9.0, 16 / 6.0, 51 / 9.0, 77 / 9.0, 22 / 6.0, 19 / 6.0, 32 / 6.0, 10 / 4.0}},
      {pool(DLHOST_POOL_AVG, 3, 2, 1, true, false),
       3,
       {25 / 4.0, 50 / 6.0, 16 / 2.0, 51 / 6.0, 77 / 9.0, 22 / 3.0, 19 / 2.0, 32 / 3.0, 10 / 1.0}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(c);
    GraphBuilder b("t", 1);
    int32_t x = b.input("x", DLHOST_DTYPE_F32, {1, 4, 4});
    int32_t y = b.pool2d("pool", x, cases[c].attrs);
    Probe p = probe(b, y, {1, 1, cases[c].out, cases[c].out});
    Session s(b.finish());
    s.set(x, input);
    expect_values(read_probe(s, p), cases[c].want);
  }
}

TEST(CpuReferenceForward, LrnByHand) {
  GraphBuilder b("t", 1);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {3, 1, 2});
  int32_t y = b.lrn("lrn", x, lrn(3, 0.3f, 0.75f, 2.0f));
  Probe p = probe(b, y, {1, 3, 1, 2});
  Session s(b.finish());
  s.set(x, {1, -1, 2, 0.5f, 3, 2});  // channel-major: c0 = (1, -1), c1 = (2, 0.5), c2 = (3, 2)
  // d = 2 + 0.3/3 * (sum of squares over the neighbouring channels); y = x d^-0.75.
  auto y_of = [](double v, double d) { return v * std::pow(d, -0.75); };
  const double a = static_cast<double>(0.3f) / 3.0;
  expect_values(read_probe(s, p),
                {y_of(1, 2 + a * (1 + 4)), y_of(-1, 2 + a * (1 + 0.25)),           // c0: c0, c1
                 y_of(2, 2 + a * (1 + 4 + 9)), y_of(0.5, 2 + a * (1 + 0.25 + 4)),  // c1: all
                 y_of(3, 2 + a * (4 + 9)), y_of(2, 2 + a * (0.25 + 4))});          // c2: c1, c2
}

TEST(CpuReferenceForward, BatchNormByHand) {
  GraphBuilder b("t", 4);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {2});
  int32_t y = b.batch_norm("bn", x, {DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE, 0.5f, 0.1f});
  Probe p = probe(b, y, {4, 2});
  Session s(b.finish());
  // Channel 0 holds 1, 3, 5, 7 (mean 4, biased variance 5); channel 1 holds 10, 10, 12, 16
  // (mean 12, variance 6). Epsilon 0.5 makes the denominators sqrt(5.5) and sqrt(6.5).
  s.set(x, {1, 10, 3, 10, 5, 12, 7, 16});
  s.write(s.param_of(y, 0), {2.0f, -1.0f});  // scale
  s.write(s.param_of(y, 1), {0.5f, 3.0f});   // shift
  const double r0 = std::sqrt(5.5), r1 = std::sqrt(6.5);
  expect_values(read_probe(s, p), {2 * -3 / r0 + 0.5, -1 * -2 / r1 + 3,  //
                                   2 * -1 / r0 + 0.5, -1 * -2 / r1 + 3,  //
                                   2 * 1 / r0 + 0.5, -1 * 0 / r1 + 3,    //
                                   2 * 3 / r0 + 0.5, -1 * 4 / r1 + 3});
}

TEST(CpuReferenceForward, LstmTwoStepsByTheHeadersEquations) {
  const int64_t T = 2, C = 2, H = 2;
  GraphBuilder b("t", 1);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {T, C});
  int32_t y = b.lstm("lstm", x, lstm(H, 1));
  Probe p = probe(b, y, {1, T, H});
  Session s(b.finish());
  const std::vector<float> xs{0.5f, -1.0f, 1.5f, 0.25f};
  const auto w = uniform(4 * H * C, 140), wh = uniform(4 * H * H, 141), bias = uniform(4 * H, 142);
  s.set(x, xs);
  s.write(s.param_of(y, 0), w);
  s.write(s.param_of(y, 1), wh);
  s.write(s.param_of(y, 2), bias);
  // i, f, o = sigmoid(W x_t + W_h h_{t-1} + b), g = tanh(...), c_t = f c_{t-1} + i g,
  // h_t = o tanh(c_t), from zero states; gate blocks i, f, g, o of H rows.
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  std::vector<double> h(H, 0.0), c(H, 0.0), want;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> a(4 * H);
    for (int64_t k = 0; k < 4 * H; ++k) {
      a[k] = bias[k];
      for (int64_t m = 0; m < C; ++m) a[k] += w[k * C + m] * xs[t * C + m];
      for (int64_t m = 0; m < H; ++m) a[k] += wh[k * H + m] * h[m];
    }
    for (int64_t j = 0; j < H; ++j) {
      const double i = sigmoid(a[j]), f = sigmoid(a[H + j]), g = std::tanh(a[2 * H + j]),
                   o = sigmoid(a[3 * H + j]);
      c[j] = f * c[j] + i * g;
      h[j] = o * std::tanh(c[j]);
    }
    want.insert(want.end(), h.begin(), h.end());
  }
  expect_values(read_probe(s, p), want);
}

// ================================================================================================
// Dropout, the optimizer, the step protocol.

TEST(CpuReference, DropoutMaskIsTheHeadersFunction) {
  const float prob = 0.3f;
  GraphBuilder b("t", 3);
  Source x = source(b, "x", {3, 4, 5});
  int32_t y = b.dropout("drop", x.tensor, {DLHOST_DROPOUT_ATTRS_STRUCT_SIZE, prob});
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {4, 5});
  b.mse_loss("loss", y, target);
  // The compile call's seed wins over the context's.
  Session s(b.finish(), sgd(0.1f), {{"seed", "1234"}}, {{"seed", "99"}});
  const auto xs = uniform(60, 150, 0.5f, 1.5f);
  s.init_source(x, xs);
  s.set(target, std::vector<float>(60, 0.0f));
  const uint32_t node = static_cast<uint32_t>(s.graph().tensor(y).producer);
  for (uint64_t step = 0; step < 3; ++step) {
    const float loss = s.forward();
    s.backward();
    // y = x * mask, loss = sum y^2 / n, so d loss / dx = 2 x mask^2 / n.
    const auto g = s.source_grad(x);
    double want_loss = 0;
    int kept = 0;
    for (uint64_t i = 0; i < 60; ++i) {
      const bool keep = dlhost_dropout_keep(1234, node, step, i, prob) != 0;
      const double m = keep ? 1.0 / (1.0 - prob) : 0.0;
      kept += keep;
      want_loss += xs[i] * m * xs[i] * m / 60.0;
      EXPECT_NEAR(g[i], 2.0 * xs[i] * m * m / 60.0, 1e-6) << "step " << step << " element " << i;
    }
    EXPECT_NEAR(loss, want_loss, 1e-5);
    EXPECT_GT(kept, 20);
    EXPECT_LT(kept, 60);
  }
}

TEST(CpuReference, SgdWithMomentumWeightDecayAndClipping) {
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant);
    const float lr = 0.1f, momentum = variant ? 0.9f : 0.0f, wd = 0.01f;
    const float clip = variant ? 0.05f : 0.0f;
    GraphBuilder b("t", 2);
    int32_t x = b.input("x", DLHOST_DTYPE_F32, {3});
    int32_t y = b.fc("fc", x, fc(2));
    int32_t target = b.input("target", DLHOST_DTYPE_F32, {2});
    b.mse_loss("loss", y, target);
    Session s(b.finish(), sgd(lr, momentum, wd, clip));
    s.set(x, uniform(6, 160));
    s.set(target, uniform(4, 161, 1.0f, 2.0f));
    s.write(1, {0.3f, -0.2f});
    std::vector<std::vector<double>> velocity{std::vector<double>(6, 0.0),
                                              std::vector<double>(2, 0.0)};
    for (int step = 0; step < 3; ++step) {
      s.forward();
      s.backward();
      std::vector<std::vector<float>> w{s.read(0), s.read(1)};
      std::vector<std::vector<float>> g{s.read(0, DLHOST_PARAM_GRAD), s.read(1, DLHOST_PARAM_GRAD)};
      double norm2 = 0;
      for (const auto& gp : g)
        for (float v : gp) norm2 += static_cast<double>(v) * v;
      double scale = 1;
      if (clip > 0) {
        ASSERT_GT(std::sqrt(norm2), clip) << "the test means clipping to act";
        scale = clip / std::sqrt(norm2);
      }
      s.update();
      for (int32_t p = 0; p < 2; ++p) {
        const auto after = s.read(p);
        for (size_t i = 0; i < after.size(); ++i) {
          // v = momentum v + (scale g + wd w);  w -= lr v
          velocity[p][i] = momentum * velocity[p][i] + (scale * g[p][i] + wd * w[p][i]);
          const double want = w[p][i] - lr * velocity[p][i];
          EXPECT_NEAR(after[i], want, 1e-6) << "step " << step << " param " << p << "[" << i << "]";
        }
      }
    }
  }
}

TEST(CpuReference, BackwardOverwritesAndReportsGradientsInReverseNodeOrder) {
  GraphBuilder b("t", 3);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {4});
  int32_t h = b.fc("fc1", x, fc(5));
  h = b.activation("act", h, act(DLHOST_ACTIVATION_TANH));
  h = b.fc("fc2", h, fc(3, false));
  int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", h, labels);
  Session s(b.finish());
  s.set(x, uniform(12, 170));
  s.set_ids(labels, {0, 2, 1});
  std::vector<int32_t> calls;
  dlhost_grad_ready ready{DLHOST_GRAD_READY_STRUCT_SIZE, &calls, [](void* user, int32_t param) {
                            static_cast<std::vector<int32_t>*>(user)->push_back(param);
                          }};
  s.forward();
  s.backward(&ready);
  std::vector<int32_t> want;
  for (int32_t n = s.graph().view()->num_nodes - 1; n >= 0; --n)
    for (int32_t k = 0; k < s.graph().node(n).num_params; ++k)
      want.push_back(s.graph().node(n).params[k]);
  EXPECT_EQ(calls, want);
  EXPECT_EQ(want, (std::vector<int32_t>{2, 0, 1}));
  // A second backward gives the same gradients, not twice them.
  const auto first = s.read(0, DLHOST_PARAM_GRAD);
  s.backward();
  EXPECT_EQ(s.read(0, DLHOST_PARAM_GRAD), first);
}

// A small MLP learns a teacher network's function.
TEST(CpuReference, MlpLearnsATeacher) {
  const int64_t N = 64, D = 6, K = 2;
  GraphBuilder b("t", N);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {D});
  int32_t h = b.fc("fc1", x, fc(16));
  h = b.activation("tanh", h, act(DLHOST_ACTIVATION_TANH));
  int32_t y = b.fc("fc2", h, fc(K));
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {K});
  b.mse_loss("loss", y, target);
  Session s(b.finish(), sgd(0.1f, 0.9f));
  const auto xs = uniform(N * D, 180);
  const auto t1 = uniform(4 * D, 181, -1.5f, 1.5f), t2 = uniform(K * 4, 182, -1.5f, 1.5f);
  std::vector<float> ts(N * K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      double out = 0;
      for (int64_t j = 0; j < 4; ++j) {
        double a = 0;
        for (int64_t d = 0; d < D; ++d) a += t1[j * D + d] * xs[n * D + d];
        out += t2[k * 4 + j] * std::tanh(a);
      }
      ts[n * K + k] = static_cast<float>(out);
    }
  s.set(x, xs);
  s.set(target, ts);
  const float first = s.step();
  float last = first;
  for (int i = 0; i < 300; ++i) last = s.step();
  EXPECT_LT(last, first / 20.0f) << "first " << first << ", last " << last;
}

std::vector<float> losses_with(std::map<std::string, std::string> context_options, int steps) {
  GraphBuilder b("t", 4);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {8});
  int32_t h = b.fc("fc1", x, fc(16));
  h = b.activation("relu", h, act(DLHOST_ACTIVATION_RELU));
  h = b.dropout("drop", h, {DLHOST_DROPOUT_ATTRS_STRUCT_SIZE, 0.5f});
  h = b.fc("fc2", h, fc(3));
  int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", h, labels);
  Session s(b.finish(), sgd(0.05f, 0.9f), {}, std::move(context_options));
  s.set(x, uniform(32, 190));
  s.set_ids(labels, {0, 1, 2, 1});
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(s.step());
  return losses;
}

TEST(CpuReference, SameSeedSameLossesOtherSeedOthers) {
  const auto a = losses_with({{"seed", "7"}}, 8);
  const auto b = losses_with({{"seed", "7"}}, 8);
  const auto c = losses_with({{"seed", "8"}}, 8);
  EXPECT_EQ(a, b);  // bit for bit
  EXPECT_NE(a, c);  // the seed does reach the dropout masks
  // No seed option at all: the default, 42.
  EXPECT_EQ(losses_with({}, 4), losses_with({{"seed", "42"}}, 4));
}

// ================================================================================================
// Parameters, memory, errors.

TEST(CpuReference, ParametersAreHostBuffersInTheCanonicalLayout) {
  GraphBuilder b("t", 2);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {3});
  int32_t y = b.fc("fc", x, fc(2));
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {2});
  b.mse_loss("loss", y, target);
  Session s(b.finish(), sgd(0.1f, 0.9f));
  dlhost_buffer value{}, grad{};
  value.struct_size = grad.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  ok(api()->param_buffers(s.model(), 0, &value, &grad));
  EXPECT_EQ(value.bytes, 24u);
  EXPECT_EQ(grad.bytes, 24u);
  EXPECT_EQ(value.dtype, DLHOST_DTYPE_F32);
  EXPECT_EQ(value.memory_space, DLHOST_MEMORY_HOST);
  const std::vector<float> w{1, 2, 3, 4, 5, 6};
  std::memcpy(value.data, w.data(), 24);
  EXPECT_EQ(s.read(0), w);
  // y = x W^T with x = (1, 0, 0) picks W's first column: W is [out, in].
  s.set(x, {1, 0, 0, 1, 0, 0});
  s.set(target, {0, 0, 0, 0});
  s.write(1, {0, 0});
  EXPECT_NEAR(s.forward(), (1 + 16 + 1 + 16) / 4.0, 1e-6);

  std::vector<float> wrong(5);
  EXPECT_EQ(code_of(api()->read_param(s.model(), 0, DLHOST_PARAM_VALUE, wrong.data(), 20)),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of(api()->set_input(s.model(), x, wrong.data(), 20)),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of(api()->set_input(s.model(), y, wrong.data(), 16)),
            DLHOST_CODE_INVALID_ARGUMENT);

  uint64_t bytes = 0;
  ok(api()->memory_in_use(s.model(), &bytes));
  dlhost_model_info info{};
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  ok(api()->model_info(s.model(), &info));
  EXPECT_EQ(info.param_bytes, 32u);
  EXPECT_GE(info.workspace_bytes, 64u);  // gradients and velocities at least
  EXPECT_EQ(bytes, info.param_bytes + info.workspace_bytes);
  EXPECT_GE(info.threads, 1);
  EXPECT_NE(std::string(info.implementation), "");
}

TEST(CpuReference, BadLabelsAndUnknownOpsAreRefused) {
  {
    GraphBuilder b("t", 2);
    int32_t x = b.input("x", DLHOST_DTYPE_F32, {3});
    int32_t y = b.fc("fc", x, fc(4));
    int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
    b.softmax_cross_entropy("loss", y, labels);
    Session s(b.finish());
    s.set_ids(labels, {1, 4});
    std::string message;
    EXPECT_EQ(code_of(api()->forward(s.model()), &message), DLHOST_CODE_INVALID_ARGUMENT);
    EXPECT_NE(message.find("label 4"), std::string::npos) << message;
  }
  // A graph whose fc node claims an op from the future.
  GraphBuilder b("t", 2);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {3});
  int32_t y = b.fc("future", x, fc(3));
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {3});
  b.mse_loss("loss", y, target);
  auto graph = b.finish();
  dlhost_graph view = *graph->view();
  std::vector<const dlhost_node*> nodes(view.nodes, view.nodes + view.num_nodes);
  dlhost_node changed = *nodes[1];
  changed.op = 99;
  nodes[1] = &changed;
  view.nodes = nodes.data();
  dlhost_options options;
  dlhost_context* context = nullptr;
  ok(api()->context_create(0, &options, &context));
  dlhost_model* model = nullptr;
  const auto opt = sgd(0.1f);
  std::string message;
  EXPECT_EQ(code_of(api()->compile(context, &view, &opt, &options, &model), &message),
            DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_EQ(model, nullptr);
  EXPECT_NE(message.find("op 99"), std::string::npos) << message;
  EXPECT_NE(message.find("future"), std::string::npos) << message;
  api()->context_destroy(context);
}

// ================================================================================================
// ABI 1.4: the Transformer's ops and AdamW.

TEST(CpuReferenceGradients, LayerNormAndGelu) {
  const std::vector<int64_t> dims{2, 3, 6};  // [N, T, C]: the source is an embedding
  check_op(
      dims,
      [](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
        *out = {3, 6};
        return b.layer_norm("ln", x, {DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE, 1e-5f});
      },
      1e-2f, 300, uniform(36, 301, -2.0f, 2.0f));
  for (auto kind : {DLHOST_GELU_ERF, DLHOST_GELU_TANH}) {
    SCOPED_TRACE(kind);
    check_op(
        dims,
        [&](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
          *out = {3, 6};
          return b.gelu("gelu", x, {DLHOST_GELU_ATTRS_STRUCT_SIZE, kind});
        },
        1e-2f, 310, uniform(36, 311, -3.0f, 3.0f));
  }
}

// q is the source itself, k and v go through per-step layers of their own: the source's gradient
// sums three paths, and the layers' weights see the key and value gradients.
TEST(CpuReferenceGradients, AttentionCausalBidirectionalAndDropped) {
  struct Case {
    bool causal;
    float dropout;
    int64_t heads;
  };
  // (Dropout changes its mask every forward, so finite differences cannot see it: the forward
  // test below checks the mask.)
  for (const Case& c : {Case{true, 0.0f, 2}, Case{false, 0.0f, 3}, Case{true, 0.0f, 1}}) {
    SCOPED_TRACE(std::to_string(c.causal) + " " + std::to_string(c.dropout));
    check_op(
        {2, 4, 6},
        [&](GraphBuilder& b, int32_t x, std::vector<int64_t>* out) {
          *out = {4, 6};
          // No bias on k: q . b is the same for every key, softmax cancels it (gradient 0).
          int32_t k = b.fc("k", x, fc(6, false, 2));
          int32_t v = b.fc("v", x, fc(6, true, 2));
          return b.attention(
              "attention", x, k, v,
              {DLHOST_ATTENTION_ATTRS_STRUCT_SIZE, c.heads, c.causal ? 1 : 0, c.dropout});
        },
        1e-2f, 320, uniform(48, 321, -1.5f, 1.5f));
  }
}

// The header's formula written out in double: per head, softmax(q k^T / sqrt(d)) with the
// causal mask, dropped with dlhost_dropout_keep(seed, node, step 0, ((n H + h) T + i) T + j),
// times v; read through a probe.
TEST(CpuReferenceForward, AttentionByTheHeadersFormula) {
  const int64_t n_ = 2, t_ = 3, heads = 2, d = 2, c = heads * d;
  const float p_drop = 0.4f;
  GraphBuilder b("t", n_);
  Source x = source(b, "x", {n_, t_, c});
  int32_t y = b.attention("attention", x.tensor, x.tensor, x.tensor,
                          {DLHOST_ATTENTION_ATTRS_STRUCT_SIZE, heads, 1, p_drop});
  Probe pr = probe(b, y, {n_, t_, c});
  auto graph = b.finish();
  const uint32_t node = static_cast<uint32_t>(graph->tensor(y).producer);
  Session s(std::move(graph));
  const auto in = uniform(static_cast<size_t>(n_ * t_ * c), 370);
  s.init_source(x, in);
  const auto got = read_probe(s, pr);
  std::vector<double> want(got.size(), 0.0);
  int dropped = 0;
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < t_; ++i) {
        auto at = [&](int64_t pos, int64_t k) { return in[(n * t_ + pos) * c + h * d + k]; };
        std::vector<double> w(static_cast<size_t>(t_), 0.0);
        double top = -1e300, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t k = 0; k < d; ++k) w[j] += at(i, k) * at(j, k) / std::sqrt(double(d));
          top = std::max(top, w[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(w[j] - top);
        for (int64_t j = 0; j <= i; ++j) {
          const uint64_t e = static_cast<uint64_t>(((n * heads + h) * t_ + i) * t_ + j);
          const bool keep = dlhost_dropout_keep(42, node, 0, e, p_drop) != 0;
          dropped += keep ? 0 : 1;
          const double pij = std::exp(w[j] - top) / sum * (keep ? 1.0 / (1.0 - p_drop) : 0.0);
          for (int64_t k = 0; k < d; ++k) want[(n * t_ + i) * c + h * d + k] += pij * at(j, k);
        }
      }
  EXPECT_GT(dropped, 0) << "the test means dropout to act";
  expect_values(got, want);
}

TEST(CpuReferenceGradients, PositionEmbeddingRowsBeyondTheSequenceGetZero) {
  GraphBuilder b("t", 2);
  Source x = source(b, "x", {2, 3, 4});
  int32_t y =
      b.position_embedding("wpe", x.tensor, {DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE, 5});
  int32_t target = -1;
  mse_to_random(b, y, {3, 4}, &target);
  Session s(b.finish());
  s.init_source(x, uniform(24, 340));
  s.set(target, uniform(24, 341));
  s.write(s.param_of(y), uniform(20, 342));
  check_gradients(s, 1e-2f);
  const auto g = s.read(s.param_of(y), DLHOST_PARAM_GRAD);
  for (int i = 12; i < 20; ++i) EXPECT_EQ(g[i], 0.0f) << i;
}

// The tied table's gradient is the sum of the embedding's and the output layer's; the table is
// reported ready once, after the embedding's backward.
TEST(CpuReferenceGradients, TiedOutputLayerSumsBothUses) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias);
    GraphBuilder b("t", 2);
    int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {3});
    int32_t e = b.embedding("wte", ids, embedding(7, 4));
    int32_t h = b.fc("h", e, fc(4, true, 2));
    int32_t y = b.tied_fc("head", h, e, {DLHOST_TIED_FC_ATTRS_STRUCT_SIZE, -1, bias ? 1 : 0});
    int32_t target = -1;
    mse_to_random(b, y, {3, 7}, &target);
    Session s(b.finish());
    s.set_ids(ids, {0, 3, 3, 6, 1, 0});
    s.set(target, uniform(42, 350));
    for (int32_t p = 0; p < s.graph().num_params(); ++p)
      s.write(p, uniform(static_cast<size_t>(s.count(p)), 351 + p, -0.8f, 0.8f));
    check_gradients(s, 1e-2f);
    std::vector<int32_t> order;
    dlhost_grad_ready ready{DLHOST_GRAD_READY_STRUCT_SIZE, &order, [](void* user, int32_t p) {
                              static_cast<std::vector<int32_t>*>(user)->push_back(p);
                            }};
    s.forward();
    s.backward(&ready);
    ASSERT_EQ(static_cast<int32_t>(order.size()), s.graph().num_params());
    EXPECT_EQ(order.back(), 0);  // the table, last and once
    EXPECT_EQ(std::count(order.begin(), order.end(), 0), 1);
  }
}

// dlhost_backend.h's AdamW, written out again in double, three steps, with and without clipping.
TEST(CpuReference, AdamWWithDecoupledWeightDecayBiasCorrectionAndClipping) {
  for (float clip : {0.0f, 0.05f}) {
    SCOPED_TRACE(clip);
    const float lr = 0.01f, wd = 0.1f, b1 = 0.8f, b2 = 0.95f, eps = 1e-6f;
    GraphBuilder b("t", 2);
    int32_t x = b.input("x", DLHOST_DTYPE_F32, {3});
    int32_t y = b.fc("fc", x, fc(2));
    int32_t target = b.input("target", DLHOST_DTYPE_F32, {2});
    b.mse_loss("loss", y, target);
    Session s(b.finish(), adamw(lr, wd, clip, b1, b2, eps));
    s.set(x, uniform(6, 360));
    s.set(target, uniform(4, 361, 1.0f, 2.0f));
    s.write(1, {0.3f, -0.2f});
    std::vector<std::vector<double>> m{std::vector<double>(6, 0.0), std::vector<double>(2, 0.0)};
    auto v = m;
    for (int t = 1; t <= 3; ++t) {
      s.forward();
      s.backward();
      std::vector<std::vector<float>> w{s.read(0), s.read(1)};
      std::vector<std::vector<float>> g{s.read(0, DLHOST_PARAM_GRAD), s.read(1, DLHOST_PARAM_GRAD)};
      double norm2 = 0;
      for (const auto& gp : g)
        for (float gi : gp) norm2 += static_cast<double>(gi) * gi;
      double scale = 1;
      if (clip > 0) {
        ASSERT_GT(std::sqrt(norm2), clip) << "the test means clipping to act";
        scale = clip / std::sqrt(norm2);
      }
      s.update();
      for (int32_t p = 0; p < 2; ++p) {
        const auto after = s.read(p);
        for (size_t i = 0; i < after.size(); ++i) {
          const double gi = scale * g[p][i];
          m[p][i] = b1 * m[p][i] + (1 - b1) * gi;
          v[p][i] = b2 * v[p][i] + (1 - b2) * gi * gi;
          double want = w[p][i] - lr * wd * w[p][i];
          want -= lr * (m[p][i] / (1 - std::pow(b1, t))) /
                  (std::sqrt(v[p][i] / (1 - std::pow(b2, t))) + eps);
          EXPECT_NEAR(after[i], want, 1e-6) << "step " << t << " param " << p << "[" << i << "]";
        }
      }
    }
  }
}

}  // namespace
