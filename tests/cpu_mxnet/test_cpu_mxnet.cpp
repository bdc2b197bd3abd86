// test_cpu_mxnet.cpp — what `dlhost conform` cannot see of the cpu_mxnet backend (conform
// compares its numbers with cpu_reference; cpu_mxnet_e2e.sh runs that): the ABI contract a
// framework underneath could break. Parameter and gradient buffers must not move (the host
// all-reduces them in place, and an LSTM's are slices of MXNet's packed vector) and update must
// use what the host left in them; backward must overwrite (grad_req write); grad-ready notices
// once per parameter in reverse layer order; the SGD of the ABI exactly (momentum, weight decay,
// clipping by the global norm) through MXNet's optimizer operators; the imperative mode computing
// what the CachedOp computes; an LSTM trained several steps as cpu_reference trains it (MXNet's
// second bias kept at zero); the threads option, fixed per process; bad inputs; what MXNet
// computes otherwise (ceil-mode pooling) UNIMPLEMENTED. ctest runs each test in its own process,
// as MXNet's thread settings are per process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "build_plugin.h"
#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "graph_attrs.h"

namespace dlhost {
namespace {

using namespace dlhost::test_attrs;

const LoadedPlugin& plugin(const std::string& name = "cpu_mxnet") {
  return test_plugins::build_plugin(DLHOST_PLUGIN_BACKEND, name);
}
const dlhost_backend_api& api(const std::string& name = "cpu_mxnet") {
  return *plugin(name).table->backend;
}

// data [4] -> fc1 (5) -> relu -> head (3) -> cross-entropy, at batch 2.
std::unique_ptr<Graph> mlp() {
  GraphBuilder b("mlp", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {4});
  int32_t x = b.activation("act", b.fc("fc1", data, fc(5)), act(DLHOST_ACTIVATION_RELU));
  int32_t logits = b.fc("head", x, fc(3));
  b.softmax_cross_entropy("loss", logits, b.input("labels", DLHOST_DTYPE_I32, {}));
  return b.finish();
}

// Convolution, batch norm, pooling, dropout and a residual add, at batch 4.
std::unique_ptr<Graph> small_cnn() {
  GraphBuilder b("cnn", 4);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {2, 6, 6});
  int32_t x = b.conv2d("conv", data, conv(3, 3, 1, 1));
  x = b.activation("relu", b.batch_norm("bn", x, bn()), act(DLHOST_ACTIVATION_RELU));
  x = b.add("residual", x, b.conv2d("conv2", x, conv(3, 3, 1, 1)));
  x = b.pool2d("pool", x, pool(DLHOST_POOL_MAX, 2, 2, 0, false, false));
  x = b.dropout("drop", x, dropout(0.3f));
  b.softmax_cross_entropy("loss", b.fc("head", x, fc(3)), b.input("labels", DLHOST_DTYPE_I32, {}));
  return b.finish();
}

// ids [N, T] -> embedding -> 2-layer LSTM -> per-step head -> cross-entropy, at batch 2.
std::unique_ptr<Graph> language_model() {
  GraphBuilder b("lm", 2);
  int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {5});
  int32_t x = b.lstm("lstm", b.embedding("embed", ids, embedding(3, 4)), lstm(6, 2));
  b.softmax_cross_entropy("loss", b.fc("head", x, fc(3, true, 2)),
                          b.input("labels", DLHOST_DTYPE_I32, {5}));
  return b.finish();
}

// A compiled model of `graph` with seeded weights and inputs.
struct Trainer {
  std::string backend;
  std::unique_ptr<Graph> graph;
  ContextHandle context;
  ModelHandle model;

  explicit Trainer(std::unique_ptr<Graph> g, const dlhost_optimizer_desc& opt = sgd(0.1f),
                   const std::string& mode = "", const std::string& name = "cpu_mxnet",
                   int threads = 1)
      : backend(name), graph(std::move(g)) {
    dlhost_options options;
    options.values["threads"] = std::to_string(threads);
    options.values["seed"] = "42";
    if (!mode.empty()) options.values["mode"] = mode;
    context = create_context(plugin(name), 0, options);
    model = compile_model(plugin(name), context.get(), graph->view(), opt, options);
    std::mt19937 rng(7);
    for (int32_t p = 0; p < graph->num_params(); ++p) put(p, DLHOST_PARAM_VALUE, random(p, rng));
    for (int32_t k = 0; k < graph->view()->num_inputs; ++k) feed(graph->view()->inputs[k], rng);
  }
  const dlhost_backend_api& table() const { return api(backend); }
  // Uniform floats, or ids 0, 1, 2, ... (3 classes or a vocabulary of 3).
  void feed(int32_t id, std::mt19937& rng) {
    const dlhost_tensor_desc& d = graph->tensor(id);
    size_t n = 1;
    for (int32_t k = 0; k < d.rank; ++k) n *= size_t(d.dims[k]);
    std::vector<float> floats = random_floats(n, rng);
    std::vector<int32_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = int32_t((i * 7 + size_t(id)) % 3);
    const void* data = d.dtype == DLHOST_DTYPE_I32 ? static_cast<const void*>(ids.data())
                                                   : static_cast<const void*>(floats.data());
    check_status(table().set_input(model.get(), id, data, n * 4), "set_input");
  }
  int32_t input(int k) const { return graph->view()->inputs[k]; }
  std::vector<float> random(int32_t p, std::mt19937& rng) const {
    return random_floats(size_t(graph->param(p).count), rng);
  }
  static std::vector<float> random_floats(size_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  }
  std::vector<float> get(int32_t p, int32_t part) {
    std::vector<float> v(size_t(graph->param(p).count));
    check_status(table().read_param(model.get(), p, part, v.data(), v.size() * 4), "read_param");
    return v;
  }
  void put(int32_t p, int32_t part, const std::vector<float>& v) {
    check_status(table().write_param(model.get(), p, part, v.data(), v.size() * 4), "write_param");
  }
  void forward_backward(const dlhost_grad_ready* ready = nullptr) {
    check_status(table().forward(model.get()), "forward");
    check_status(table().backward(model.get(), ready), "backward");
  }
  void update() { check_status(table().update(model.get()), "update"); }
  float loss() {
    float l = 0;
    check_status(table().read_loss(model.get(), &l), "read_loss");
    return l;
  }
  dlhost_buffer buffer(int32_t p, bool grad) {
    dlhost_buffer value{}, gradient{};
    value.struct_size = gradient.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
    check_status(table().param_buffers(model.get(), p, &value, &gradient), "param_buffers");
    return grad ? gradient : value;
  }
  int32_t threads() {
    dlhost_model_info info{};
    info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
    check_status(table().model_info(model.get(), &info), "model_info");
    return info.threads;
  }
};

int32_t code_of(dlhost_status* s, std::string* message) {
  if (s == nullptr) return DLHOST_CODE_OK;
  const int32_t code = host_api()->status_code(s);
  *message = host_api()->status_message(s);
  host_api()->status_destroy(s);
  return code;
}

void expect_near_all(const std::vector<float>& a, const std::vector<float>& b, float tolerance,
                     const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tolerance * std::max(1.0f, std::fabs(b[i]))) << what << "[" << i << "]";
}

TEST(cpu_mxnet, DescribesTheDeviceAndItsLibraries) {
  const dlhost_device_info* info = nullptr;
  check_status(api().device_info(0, &info), "device_info");
  const std::string library = info->library;
  for (const char* part : {"MXNet 1.9.1", "oneDNN ", "OpenBLAS ", "OpenMP"})
    EXPECT_NE(library.find(part), std::string::npos) << library;
  EXPECT_GT(std::string(info->isa).size(), 0u);
}

// MXNet fixes its OpenMP threads when it loads: the first context decides, one asking for
// another count in the same process is refused, naming both.
TEST(cpu_mxnet, ThreadsOptionIsTheModelsAndFixedPerProcess) {
  Trainer t(mlp(), sgd(0.1f), "", "cpu_mxnet", 2);
  EXPECT_EQ(t.threads(), 2);
  dlhost_options other;
  other.values["threads"] = "1";
  try {
    create_context(plugin(), 0, other);
    ADD_FAILURE() << "a context for 1 thread after one for 2";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("loaded in this process for 2 thread(s)"),
              std::string::npos)
        << e.what();
  }
}

// The host all-reduces gradients in place between backward and update, then update must step
// with what it finds there; neither buffer may move across a step.
TEST(cpu_mxnet, UpdateUsesTheGradientBuffersInPlace) {
  Trainer t(mlp(), sgd(1.0f));
  const int32_t p = 0;
  const dlhost_buffer value = t.buffer(p, false), grad = t.buffer(p, true);
  t.forward_backward();
  std::vector<float> w = t.get(p, DLHOST_PARAM_VALUE), g = t.get(p, DLHOST_PARAM_GRAD);
  auto* g_mem = static_cast<float*>(grad.data);
  ASSERT_EQ(grad.bytes, g.size() * 4);
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(g_mem[i], g[i]) << i;
    g_mem[i] *= 0.5f;  // what averaging over two ranks with a zero partner does
  }
  t.update();
  const std::vector<float> after = t.get(p, DLHOST_PARAM_VALUE);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_FLOAT_EQ(after[i], w[i] - 0.5f * g[i]) << i;
  EXPECT_EQ(t.buffer(p, false).data, value.data);
  EXPECT_EQ(t.buffer(p, true).data, grad.data);
  EXPECT_EQ(static_cast<float*>(value.data)[0], after[0]);
}

TEST(cpu_mxnet, BackwardOverwritesAndNotifiesInReverseLayerOrder) {
  Trainer t(mlp());
  std::vector<int32_t> seen;
  dlhost_grad_ready ready{};
  ready.struct_size = DLHOST_GRAD_READY_STRUCT_SIZE;
  ready.user = &seen;
  ready.fn = [](void* user, int32_t param) {
    static_cast<std::vector<int32_t>*>(user)->push_back(param);
  };
  t.forward_backward(&ready);
  const std::vector<float> first = t.get(0, DLHOST_PARAM_GRAD);
  t.forward_backward();
  EXPECT_EQ(t.get(0, DLHOST_PARAM_GRAD), first);  // not twice the gradient
  // Parameters in graph order: fc1.weight 0, fc1.bias 1, head.weight 2, head.bias 3.
  EXPECT_EQ(seen, (std::vector<int32_t>{2, 3, 0, 1}));
}

// v = momentum * v + (clip_scale * g + decay * w); w -= lr * v, over two steps.
TEST(cpu_mxnet, SgdIsTheAbisWithMomentumDecayAndClipping) {
  for (float clip : {0.0f, 0.5f}) {
    SCOPED_TRACE(clip);
    const dlhost_optimizer_desc opt = sgd(0.1f, 0.9f, 0.01f, clip);
    Trainer t(mlp(), opt);
    const int32_t n = t.graph->num_params();
    std::mt19937 rng(3);
    std::vector<std::vector<float>> w(n), v(n);
    for (int32_t p = 0; p < n; ++p) {
      w[p] = t.get(p, DLHOST_PARAM_VALUE);
      v[p].assign(w[p].size(), 0.0f);
    }
    for (int step = 0; step < 2; ++step) {
      std::vector<std::vector<float>> g(n);
      double sq = 0;
      for (int32_t p = 0; p < n; ++p) {
        g[p] = t.random(p, rng);
        for (float e : g[p]) sq += double(e) * e;
        t.put(p, DLHOST_PARAM_GRAD, g[p]);
      }
      const double scale = clip > 0 ? std::min(1.0, clip / std::sqrt(sq)) : 1.0;
      if (clip > 0) {
        ASSERT_LT(scale, 0.5);  // the clipping really acts
      }
      t.update();
      for (int32_t p = 0; p < n; ++p) {
        const std::vector<float> got = t.get(p, DLHOST_PARAM_VALUE);
        for (size_t i = 0; i < got.size(); ++i) {
          v[p][i] = opt.momentum * v[p][i] + float(scale * g[p][i]) + opt.weight_decay * w[p][i];
          w[p][i] -= opt.learning_rate * v[p][i];
          ASSERT_NEAR(got[i], w[p][i], 1e-6f)
              << "step " << step << " param " << p << "[" << i << "]";
        }
      }
    }
  }
}

// Gluon without hybridize computes what the CachedOp computes: losses, gradients and weights
// over three steps (dropout's mask and batch norm's statistics included).
TEST(cpu_mxnet, ImperativeModeMatchesTheCachedOp) {
  const dlhost_optimizer_desc opt = sgd(0.05f, 0.9f, 0.001f);
  Trainer hybrid(small_cnn(), opt, "hybridized"), imperative(small_cnn(), opt, "imperative");
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    hybrid.forward_backward();
    imperative.forward_backward();
    EXPECT_NEAR(hybrid.loss(), imperative.loss(), 1e-5f);
    for (int32_t p = 0; p < hybrid.graph->num_params(); ++p)
      expect_near_all(imperative.get(p, DLHOST_PARAM_GRAD), hybrid.get(p, DLHOST_PARAM_GRAD), 1e-4f,
                      "gradient of " + std::string(hybrid.graph->param(p).name));
    hybrid.update();
    imperative.update();
  }
}

// The LSTM's weight, weight_iter and bias are slices of MXNet's packed vector: the buffers stay
// put, and four steps with momentum, decay and clipping train as cpu_reference trains (which
// would drift if MXNet's second bias moved off zero).
TEST(cpu_mxnet, LstmTrainsAsTheReferenceOnSlicesOfThePackedVector) {
  const dlhost_optimizer_desc opt = sgd(0.5f, 0.9f, 0.01f, 0.5f);
  Trainer mx(language_model(), opt), ref(language_model(), opt, "", "cpu_reference");
  std::vector<void*> buffers;
  for (int32_t p = 0; p < mx.graph->num_params(); ++p) buffers.push_back(mx.buffer(p, false).data);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(step);
    mx.forward_backward();
    ref.forward_backward();
    EXPECT_NEAR(mx.loss(), ref.loss(), 1e-5f);
    for (int32_t p = 0; p < mx.graph->num_params(); ++p) {
      expect_near_all(mx.get(p, DLHOST_PARAM_GRAD), ref.get(p, DLHOST_PARAM_GRAD), 1e-4f,
                      "gradient of " + std::string(mx.graph->param(p).name));
      EXPECT_EQ(mx.buffer(p, false).data, buffers[size_t(p)]);
    }
    mx.update();
    ref.update();
  }
  for (int32_t p = 0; p < mx.graph->num_params(); ++p)
    expect_near_all(mx.get(p, DLHOST_PARAM_VALUE), ref.get(p, DLHOST_PARAM_VALUE), 1e-4f,
                    "weights of " + std::string(mx.graph->param(p).name));
}

TEST(cpu_mxnet, SetInputRejectsIdsOutOfRangeAndWrongSizes) {
  Trainer t(mlp());
  std::string message;
  const int32_t bad[] = {0, 3};  // 3 classes
  EXPECT_EQ(code_of(api().set_input(t.model.get(), t.input(1), bad, sizeof bad), &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'labels'"), std::string::npos) << message;
  EXPECT_NE(message.find("id 3 at position 1"), std::string::npos) << message;
  const float data[3] = {};
  EXPECT_EQ(code_of(api().set_input(t.model.get(), t.input(0), data, sizeof data), &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("takes 32 bytes, got 12"), std::string::npos) << message;
  Trainer lm(language_model());
  const int32_t token[10] = {0, 1, 2, -1};  // a vocabulary of 3
  EXPECT_EQ(code_of(api().set_input(lm.model.get(), lm.input(0), token, sizeof token), &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'ids': id -1 at position 3"), std::string::npos) << message;
}

// MXNet's ceil-mode pooling (pooling_convention full) keeps a last window the ABI drops: the
// node is UNIMPLEMENTED with both shapes, never run with another output.
TEST(cpu_mxnet, PoolingMxnetShapesOtherwiseIsUnimplemented) {
  GraphBuilder b("pool", 2);
  int32_t x = b.pool2d("pool", b.input("data", DLHOST_DTYPE_F32, {1, 6, 8}),
                       pool(DLHOST_POOL_AVG, 3, 3, 1, true, true));
  b.softmax_cross_entropy("loss", b.fc("head", x, fc(3)), b.input("labels", DLHOST_DTYPE_I32, {}));
  std::unique_ptr<Graph> graph = b.finish();
  ContextHandle context = create_context(plugin(), 0, dlhost_options{});
  dlhost_model* model = nullptr;
  std::string message;
  const dlhost_optimizer_desc opt = sgd(0.1f);
  EXPECT_EQ(code_of(api().compile(context.get(), graph->view(), &opt, nullptr, &model), &message),
            DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_NE(message.find("pool2d 'pool': MXNet's Pooling gives shape [2, 1, 3, 4] where the "
                         "graph has [2, 1, 3, 3]"),
            std::string::npos)
      << message;
}

// Only fp32 is implemented: another precision is UNIMPLEMENTED (the host then records the case
// SKIPPED), never silently run in fp32.
TEST(cpu_mxnet, OtherPrecisionsAreUnimplemented) {
  std::unique_ptr<Graph> graph = mlp();
  dlhost_options options;
  options.values["precision"] = "bf16";
  EXPECT_THROW(create_context(plugin(), 0, options), std::exception);  // the capabilities say so
  ContextHandle context = create_context(plugin(), 0, dlhost_options{});
  dlhost_model* model = nullptr;
  std::string message;
  const dlhost_optimizer_desc opt = sgd(0.1f);
  EXPECT_EQ(code_of(api().compile(context.get(), graph->view(), &opt, &options, &model), &message),
            DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_NE(message.find("precision bf16"), std::string::npos) << message;
}

}  // namespace
}  // namespace dlhost
