// test_cpu_tensorflow.cpp — what `dlhost conform` cannot see of the cpu_tensorflow backend (conform
// compares its numbers with cpu_reference; cpu_tensorflow_e2e.sh runs that): the ABI contract
// over a framework that keeps its own tensors. Gradient buffers stay put and update uses what the
// host left in them; the value buffer stages the host's broadcast into the variable; backward
// overwrites; grad-ready notices once per parameter in reverse layer order; the ABI's SGD exactly
// (momentum, weight decay, clipping by the global norm); canonical layouts survive TensorFlow's
// (HWIO filters, channels-last flattening before an FC); the options; bad inputs; fp32 only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend_contract.h"
#include "build_plugin.h"
#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "graph_attrs.h"

namespace dlhost {
namespace {

using namespace dlhost::test_attrs;

const LoadedPlugin& tf_plugin() {
  return test_plugins::build_plugin(DLHOST_PLUGIN_BACKEND, "cpu_tensorflow");
}
const dlhost_backend_api& api() { return *tf_plugin().table->backend; }

// image [2, 5, 5] -> conv (3, 3x3) -> fc (3) -> cross-entropy: a filter and an FC over an image,
// the two parameters whose layouts TensorFlow keeps differently.
std::unique_ptr<Graph> convnet() {
  GraphBuilder b("convnet", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {2, 5, 5});
  int32_t logits = b.fc("head", b.conv2d("conv", data, conv(3, 3)), fc(3));
  b.softmax_cross_entropy("loss", logits, b.input("labels", DLHOST_DTYPE_I32, {}));
  return b.finish();
}

using contract::code_of;
using contract::mlp;

// A Trainer on cpu_tensorflow.
struct Trainer : contract::Trainer {
  explicit Trainer(std::unique_ptr<Graph> g, const dlhost_optimizer_desc& opt = sgd(0.1f),
                   dlhost_options options = {})
      : contract::Trainer(tf_plugin(), std::move(g), opt, std::move(options)) {}
};

TEST(cpu_tensorflow, DescribesTheDeviceAndItsLibrary) {
  const dlhost_device_info* info = nullptr;
  check_status(api().device_info(0, &info), "device_info");
  const std::string library = info->library;
  for (const char* part : {"TensorFlow 2.", "oneDNN ", "NHWC"})
    EXPECT_NE(library.find(part), std::string::npos) << library;
}

TEST(cpu_tensorflow, ThreadsAndModeAreInTheModelInfo) {
  for (const char* threads : {"1", "2"}) {
    dlhost_options options;
    options.values["threads"] = threads;
    Trainer t(mlp(), sgd(0.1f), options);
    dlhost_model_info info{};
    info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
    check_status(api().model_info(t.model.get(), &info), "model_info");
    EXPECT_EQ(info.threads, std::stoi(threads));
    EXPECT_GT(info.param_bytes, 0u);
    EXPECT_NE(std::string(info.implementation).find("graph mode"), std::string::npos);
  }
}

TEST(cpu_tensorflow, RefusesAnUnknownMode) {
  dlhost_options options;
  options.values["mode"] = "eager";
  EXPECT_THROW(create_context(tf_plugin(), 0, options), std::exception);
}

// Canonical OIHW filters and an FC weight over a C*H*W (NCHW) flattening come back as written,
// though TensorFlow keeps HWIO and a channels-last flattening; and the network's loss is the one
// of those canonical weights (a wrong permutation would still round-trip, not agree in loss).
TEST(cpu_tensorflow, CanonicalLayoutsSurviveTensorFlows) {
  Trainer t(convnet());
  std::mt19937 rng(11);
  for (int32_t p = 0; p < t.graph->num_params(); ++p) {
    const std::vector<float> v = t.random(p, rng);
    t.put(p, DLHOST_PARAM_VALUE, v);
    EXPECT_EQ(t.get(p, DLHOST_PARAM_VALUE), v) << t.graph->param(p).name;
    t.put(p, DLHOST_PARAM_GRAD, v);
    EXPECT_EQ(t.get(p, DLHOST_PARAM_GRAD), v) << t.graph->param(p).name;
  }
}

// The host all-reduces gradients in place between backward and update, then update must step
// with what it finds there; the gradient buffer never moves. The value buffer stages what the
// host broadcasts before the first step: the next forward uses it. The buffers hold TensorFlow's
// layout (an FC weight transposed), so the check takes a bias, whose layout is the same.
TEST(cpu_tensorflow, UpdateUsesTheGradientBuffersInPlace) {
  Trainer t(mlp(), sgd(1.0f));
  const int32_t p = 1;  // fc1.bias
  const dlhost_buffer value = t.buffer(p, false), grad = t.buffer(p, true);
  std::vector<float> w = t.get(p, DLHOST_PARAM_VALUE);
  ASSERT_EQ(value.bytes, w.size() * 4);
  auto* v_mem = static_cast<float*>(value.data);
  EXPECT_EQ(std::vector<float>(v_mem, v_mem + w.size()), w);  // the variable's value, staged
  for (float& x : w) x *= 0.5f;
  std::copy(w.begin(), w.end(), v_mem);  // what a broadcast from rank 0 does
  t.forward_backward();
  EXPECT_EQ(t.get(p, DLHOST_PARAM_VALUE), w);
  const std::vector<float> g = t.get(p, DLHOST_PARAM_GRAD);
  auto* g_mem = static_cast<float*>(grad.data);
  ASSERT_EQ(grad.bytes, g.size() * 4);
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(g_mem[i], g[i]) << i;
    g_mem[i] *= 0.5f;  // what averaging over two ranks with a zero partner does
  }
  t.update();
  const std::vector<float> after = t.get(p, DLHOST_PARAM_VALUE);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_FLOAT_EQ(after[i], w[i] - 0.5f * g[i]) << i;
  EXPECT_EQ(t.buffer(p, true).data, grad.data);
  EXPECT_EQ(t.buffer(p, false).data, value.data);
}

TEST(cpu_tensorflow, BackwardOverwritesAndNotifiesInReverseLayerOrder) {
  contract::backward_overwrites_and_notifies_in_reverse_layer_order(tf_plugin());
}

// v = momentum * v + (clip_scale * g + decay * w); w -= lr * v, over two steps.
TEST(cpu_tensorflow, SgdIsTheAbisWithMomentumDecayAndClipping) {
  contract::sgd_is_the_abis(tf_plugin(), convnet);
}

TEST(cpu_tensorflow, SetInputRejectsLabelsOutOfRangeAndWrongSizes) {
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
}

// What TensorFlow cannot express is UNIMPLEMENTED at compile, naming the node and why.
TEST(cpu_tensorflow, DilationWithStrideIsUnimplemented) {
  GraphBuilder b("dilated", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {2, 9, 9});
  int32_t logits = b.fc("head", b.conv2d("wide", data, conv(3, 3, 2, 1, 2)), fc(3));
  b.softmax_cross_entropy("loss", logits, b.input("labels", DLHOST_DTYPE_I32, {}));
  std::unique_ptr<Graph> graph = b.finish();
  ContextHandle context = create_context(tf_plugin(), 0, dlhost_options{});
  dlhost_model* model = nullptr;
  std::string message;
  const dlhost_optimizer_desc opt = sgd(0.1f);
  const dlhost_options options;
  EXPECT_EQ(code_of(api().compile(context.get(), graph->view(), &opt, &options, &model), &message),
            DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_NE(message.find("conv2d 'wide': dilation with a stride"), std::string::npos) << message;
}

// Only fp32 is implemented: another precision is UNIMPLEMENTED (the host records SKIPPED).
TEST(cpu_tensorflow, OtherPrecisionsAreUnimplemented) {
  std::unique_ptr<Graph> graph = mlp();
  dlhost_options options;
  options.values["precision"] = "bf16";
  EXPECT_THROW(create_context(tf_plugin(), 0, options), std::exception);
  ContextHandle context = create_context(tf_plugin(), 0, dlhost_options{});
  dlhost_model* model = nullptr;
  std::string message;
  const dlhost_optimizer_desc opt = sgd(0.1f);
  EXPECT_EQ(code_of(api().compile(context.get(), graph->view(), &opt, &options, &model), &message),
            DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_NE(message.find("precision bf16"), std::string::npos) << message;
}

}  // namespace
}  // namespace dlhost
