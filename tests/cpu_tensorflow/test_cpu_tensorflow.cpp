// test_cpu_tensorflow.cpp — what `dlhost conform` cannot see of the cpu_tensorflow backend (conform
// compares its numbers with cpu_reference; tests/framework_e2e.sh runs that): the ABI contract
// over a framework that keeps its own tensors. Gradient buffers stay put and update uses what the
// host left in them; the value buffer stages the host's broadcast into the variable; backward
// overwrites; grad-ready notices once per parameter in reverse layer order; the ABI's SGD exactly
// (momentum, weight decay, clipping by the global norm); canonical layouts survive TensorFlow's
// (HWIO filters, channels-last flattening before an FC); the options; bad inputs; fp32 only.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "framework_contract.h"

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

// A Trainer on cpu_tensorflow.
struct Trainer : framework_contract::Trainer {
  explicit Trainer(std::unique_ptr<Graph> g, const dlhost_optimizer_desc& opt = sgd(0.1f))
      : framework_contract::Trainer(kBackend, std::move(g), opt) {}
};

TEST(cpu_tensorflow, DescribesTheDeviceAndItsLibrary) {
  framework_contract::describes_the_device_and_its_libraries(kBackend,
                                                             {"TensorFlow 2.", "oneDNN ", "NHWC"});
}

TEST(cpu_tensorflow, ThreadsAndModeAreInTheModelInfo) {
  framework_contract::threads_option_sets_the_models_threads(kBackend, "graph mode");
}

TEST(cpu_tensorflow, ThreadsOutOfRangeIsRefusedNamingTheKey) {
  framework_contract::threads_out_of_range_is_refused_naming_the_key(kBackend);
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

// The buffers hold TensorFlow's layout (an FC weight transposed), so the check takes a bias,
// whose layout is the same; the value buffer stages the host's broadcast, not kept current after
// an update.
TEST(cpu_tensorflow, UpdateUsesTheGradientBuffersInPlace) {
  framework_contract::update_uses_the_gradient_buffers_in_place(kBackend, 1 /* fc1.bias */, false);
}

TEST(cpu_tensorflow, BackwardOverwritesAndNotifiesInReverseLayerOrder) {
  framework_contract::backward_overwrites_and_notifies_in_reverse_layer_order(kBackend);
}

// On the convnet: the filter and the FC after an image, whose layouts TensorFlow keeps its own way.
TEST(cpu_tensorflow, SgdIsTheAbisWithMomentumDecayAndClipping) {
  framework_contract::sgd_is_the_abis_with_momentum_decay_and_clipping(kBackend, convnet);
}

TEST(cpu_tensorflow, SetInputRejectsLabelsOutOfRangeAndWrongSizes) {
  framework_contract::set_input_rejects_labels_out_of_range_and_wrong_sizes(kBackend);
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

TEST(cpu_tensorflow, OtherPrecisionsAreUnimplemented) {
  framework_contract::other_precisions_are_unimplemented(kBackend);
}

}  // namespace
}  // namespace dlhost
