// test_cpu_tensorflow.cpp — what `dlhost conform` cannot see of the cpu_tensorflow backend (conform
// compares its numbers with cpu_reference; tests/e2e/framework_e2e.sh runs that): the ABI contract
// over a framework that keeps its own tensors. Gradient buffers stay put and update uses what the
// host left in them; the value buffer stages the host's broadcast into the variable; backward
// overwrites; grad-ready notices once per parameter in reverse layer order; the ABI's SGD exactly
// (momentum, weight decay, clipping by the global norm); canonical layouts survive TensorFlow's
// (HWIO filters, channels-last flattening before an FC); AdamW exactly, split and fused; a
// Transformer block trains with its tied table; the options; bad inputs; fp32 only.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework_contract_suite.h"

// Every TF_SessionRun the plugin makes, counted: this executable exports TF_SessionRun
// (ENABLE_EXPORTS), which the dynamic linker binds the plugin's calls to before TensorFlow's own
// (the executable comes first in the global scope); it forwards to TensorFlow's.
// TensorFlow's C types, only passed through (tensorflow/c/c_api.h is the plugin's include).
struct TF_Session;
struct TF_Buffer;
struct TF_Output;
struct TF_Tensor;
struct TF_Operation;
struct TF_Status;
std::atomic<int64_t> g_session_runs{0};
extern "C" __attribute__((visibility("default"))) void TF_SessionRun(
    TF_Session* session, const TF_Buffer* run_options, const TF_Output* inputs,
    TF_Tensor* const* input_values, int ninputs, const TF_Output* outputs,
    TF_Tensor** output_values, int noutputs, const TF_Operation* const* target_opers, int ntargets,
    TF_Buffer* run_metadata, TF_Status* status) {
  using Fn = decltype(&TF_SessionRun);
  static const Fn real = [] {
    void* lib = dlopen("libtensorflow_cc.so.2", RTLD_LAZY | RTLD_NOLOAD);
    return lib == nullptr ? nullptr : reinterpret_cast<Fn>(dlsym(lib, "TF_SessionRun"));
  }();
  if (real == nullptr) std::abort();  // the plugin has loaded TensorFlow before its first run
  ++g_session_runs;
  real(session, run_options, inputs, input_values, ninputs, outputs, output_values, noutputs,
       target_opers, ntargets, run_metadata, status);
}

namespace dlhost {
namespace {

using namespace dlhost::test_attrs;
using framework_contract::code_of;
using framework_contract::mlp;

const char* const kBackend = "cpu_tensorflow";
const LoadedPlugin& tf_plugin() { return framework_contract::plugin(kBackend); }
const dlhost_backend_api& api() { return framework_contract::api(kBackend); }

// image [2, 5, 5] -> conv (3, 3x3) -> fc (3) -> cross-entropy: a filter and an FC over an image,
// the two parameters whose layouts TensorFlow keeps differently.
std::unique_ptr<Graph> convnet() {
  GraphBuilder b("convnet", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {2, 5, 5});
  int32_t logits = b.fc("head", b.conv2d("conv", data, conv(3, 3)), fc(3));
  b.softmax_cross_entropy("loss", logits, b.input("labels", DLHOST_DTYPE_I32, {}));
  return b.finish();
}

// The contract every framework backend keeps (framework_contract_suite.h). The model_info names
// the mode (graph mode). The buffers hold TensorFlow's layout (an FC weight transposed), so the
// in-place check takes a bias, whose layout is the same; the value buffer stages the host's
// broadcast, not kept current after an update. SGD trains the convnet: the filter and the FC
// after an image, whose layouts TensorFlow keeps its own way.
framework_contract::ContractBackend contract_backend() {
  framework_contract::ContractBackend b;
  b.name = kBackend;
  b.library = {"TensorFlow 2.", "oneDNN ", "NHWC"};
  b.implementation = "graph mode";
  b.in_place_param = 1;  // fc1.bias
  b.value_buffer_is_live = false;
  b.sgd_graph = convnet;
  return b;
}
using framework_contract::FrameworkContract;
INSTANTIATE_TEST_SUITE_P(contract, FrameworkContract, ::testing::Values(contract_backend()),
                         framework_contract::contract_backend_name);

// A Trainer on cpu_tensorflow.
struct Trainer : framework_contract::Trainer {
  explicit Trainer(std::unique_ptr<Graph> g, const dlhost_optimizer_desc& opt = sgd(0.1f))
      : framework_contract::Trainer(kBackend, std::move(g), opt) {}
};

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

// ABI 1.4: with the host's fused_step the whole step is one TF_SessionRun (forward's), and it
// trains exactly as the split step does (the optimizer on the same gradients).
void expect_fused_step_is_one_run_and_trains_like_the_split_step(
    const std::function<std::unique_ptr<Graph>()>& make_graph, const dlhost_optimizer_desc& opt) {
  dlhost_options fused_options;
  fused_options.values["fused_step"] = "1";
  Trainer split(make_graph(), opt);
  framework_contract::Trainer fused(kBackend, make_graph(), opt, fused_options);
  EXPECT_NE(std::string(fused.info().implementation).find("fused step"), std::string::npos);
  EXPECT_EQ(std::string(split.info().implementation).find("fused step"), std::string::npos);
  std::vector<float> split_loss, fused_loss;
  int64_t split_runs = 0, fused_runs = 0;
  const int kSteps = 8;
  for (int i = 0; i < kSteps; ++i) {
    int64_t before = g_session_runs;
    split.forward_backward();
    split.update();
    split_runs += g_session_runs - before;
    split_loss.push_back(split.loss());
    before = g_session_runs;
    fused.forward_backward();
    fused.update();
    fused_runs += g_session_runs - before;
    fused_loss.push_back(fused.loss());
  }
  EXPECT_EQ(split_runs, 2 * kSteps);
  EXPECT_EQ(fused_runs, kSteps);
  for (int i = 0; i < kSteps; ++i) EXPECT_NEAR(fused_loss[i], split_loss[i], 1e-4f) << "step " << i;
  EXPECT_LT(fused_loss.back(), fused_loss.front());  // it trains
  for (int32_t p = 0; p < fused.graph->num_params(); ++p) {
    std::vector<float> a = fused.get(p, DLHOST_PARAM_VALUE), b = split.get(p, DLHOST_PARAM_VALUE);
    for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-4f) << "param " << p;
  }
}

// Momentum, weight decay and clipping.
TEST(cpu_tensorflow, FusedStepIsOneRunAndTrainsLikeTheSplitStep) {
  dlhost_optimizer_desc opt = sgd(0.05f);
  opt.momentum = 0.9f;
  opt.weight_decay = 1e-3f;
  opt.clip_norm = 5.0f;
  expect_fused_step_is_one_run_and_trains_like_the_split_step(convnet, opt);
}

// AdamW's per-update scalars fed to forward's run, and its decay ordered after the forward's read
// of the weights (a decay that ran first would change the loss of the same step).
TEST(cpu_tensorflow, FusedAdamWStepTrainsLikeTheSplitStep) {
  expect_fused_step_is_one_run_and_trains_like_the_split_step(framework_contract::transformer_block,
                                                              adamw(0.02f, 0.1f, 5.0f));
}

// A ceil-mode window one past the end (AlexNet-R's 3/2 pools of 32) is TensorFlow's SAME, as
// Keras's MaxPool2D/AveragePooling2D(padding="same") run it: no Pad op, no rescale (12% of
// AlexNet-R's step, bench/probe/tf_ceil_pool.py). The implementation line says so; a window
// SAME pads otherwise (padding in front as well) keeps the Pad. The numbers: conform's pooling
// problems.
TEST(cpu_tensorflow, CeilModePoolingThatIsSameUsesTensorFlowsSamePadding) {
  const auto lowered = [](dlhost_pool_kind kind, int64_t pad) {
    GraphBuilder b("ceil_pool", 2);
    int32_t x = b.pool2d("pool", b.input("data", DLHOST_DTYPE_F32, {3, 32, 32}),
                         pool(kind, 3, 2, pad, true, true));
    b.softmax_cross_entropy("loss", b.fc("head", x, fc(3)),
                            b.input("labels", DLHOST_DTYPE_I32, {}));
    Trainer t(b.finish());
    t.forward_backward();
    return std::string(t.info().implementation);
  };
  const std::string same = "pooling: padding SAME";
  EXPECT_NE(lowered(DLHOST_POOL_MAX, 0).find(same), std::string::npos);
  EXPECT_NE(lowered(DLHOST_POOL_AVG, 0).find(same), std::string::npos);
  EXPECT_EQ(lowered(DLHOST_POOL_AVG, 1).find(same), std::string::npos);
}

// ABI 1.5 departures: cpu_tensorflow says it runs batch norm fused (Keras 3's layer does not:
// docs/frameworks.md), with its measured size, and only for a graph that has a batch norm.
TEST(cpu_tensorflow, DeclaresItsFusedBatchNormOnlyWhereTheGraphHasOne) {
  const auto declared = [](bool with_bn) {
    GraphBuilder b("bn", 2);
    int32_t x = b.conv2d("conv", b.input("data", DLHOST_DTYPE_F32, {2, 4, 4}), conv(3, 3, 1, 1));
    if (with_bn) x = b.batch_norm("bn", x, bn());
    b.softmax_cross_entropy("loss", b.fc("head", x, fc(3)),
                            b.input("labels", DLHOST_DTYPE_I32, {}));
    Trainer t(b.finish(), adamw(0.01f));  // AdamW: no SGD update line beside it
    const dlhost_model_info info = t.info();
    return std::string(info.departures ? info.departures : "(null)");
  };
  const std::string fused = declared(true);
  EXPECT_EQ(fused.rfind("batch norm: FusedBatchNormV3, which Keras 3's BatchNormalization", 0), 0u)
      << fused;
  EXPECT_NE(fused.find("CPU ms"), std::string::npos) << fused;          // its measured size
  EXPECT_EQ(std::count(fused.begin(), fused.end(), '\n'), 1) << fused;  // one line
  EXPECT_EQ(declared(false), "");
}

// cpu_tensorflow's SGD update is one fused TensorFlow kernel a variable, ResourceApplyMomentum
// with momentum and ResourceApplyGradientDescent without, where Keras 3's SGD runs separate ops
// in both cases (issue 40, rule 2): each declared where it runs, and nothing for AdamW.
TEST(cpu_tensorflow, DeclaresItsFusedSgdUpdateWhereverItRuns) {
  const auto declared = [](const dlhost_optimizer_desc& opt) {
    GraphBuilder b("fc", 2);
    b.softmax_cross_entropy("loss", b.fc("head", b.input("data", DLHOST_DTYPE_F32, {4}), fc(3)),
                            b.input("labels", DLHOST_DTYPE_I32, {}));
    Trainer t(b.finish(), opt);
    const dlhost_model_info info = t.info();
    return std::string(info.departures ? info.departures : "(null)");
  };
  const std::string momentum = declared(sgd(0.1f, 0.9f));
  EXPECT_EQ(momentum.rfind("SGD update: ResourceApplyMomentum", 0), 0u) << momentum;
  EXPECT_NE(momentum.find("Keras 3's SGD"), std::string::npos) << momentum;
  EXPECT_NE(momentum.find("CPU ms"), std::string::npos) << momentum;  // its measured size
  EXPECT_EQ(std::count(momentum.begin(), momentum.end(), '\n'), 1) << momentum;  // one line
  // Keras's plain SGD is a Mul and an AssignSubVariableOp a variable: not
  // ResourceApplyGradientDescent
  const std::string plain = declared(sgd(0.1f));
  EXPECT_EQ(plain.rfind("SGD update: ResourceApplyGradientDescent", 0), 0u) << plain;
  EXPECT_NE(plain.find("AssignSubVariableOp"), std::string::npos) << plain;
  EXPECT_NE(plain.find("CPU ms"), std::string::npos) << plain;
  EXPECT_EQ(std::count(plain.begin(), plain.end(), '\n'), 1) << plain;
  EXPECT_EQ(declared(adamw(0.01f)), "");
}

}  // namespace
}  // namespace dlhost
