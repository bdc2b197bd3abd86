// test_cpu_libtorch.cpp — what `dlhost conform` cannot see of the cpu_libtorch backend (conform
// compares its numbers with cpu_reference; cpu_libtorch_e2e.sh runs that): the ABI contract a
// framework underneath could break. Parameter and gradient buffers must not move (the host
// all-reduces them in place) and update must use what the host left in them; backward must
// overwrite, not accumulate (autograd accumulates); grad-ready notices once per parameter in
// reverse layer order; the SGD of the ABI exactly (momentum, weight decay, clipping by the global
// norm); the threads option; and the errors of bad inputs and of what ATen cannot do.
#include <gtest/gtest.h>

#include <string>

#include "framework_contract.h"

namespace dlhost {
namespace {

using namespace dlhost::test_attrs;

const char* const kBackend = "cpu_libtorch";

TEST(cpu_libtorch, DescribesTheDeviceAndItsLibraries) {
  const dlhost_device_info* info = nullptr;
  check_status(framework_contract::api(kBackend).device_info(0, &info), "device_info");
  const std::string library = info->library;
  for (const char* part : {"libtorch 1.", "oneDNN ", "OpenMP ", "OpenBLAS "})
    EXPECT_NE(library.find(part), std::string::npos) << library;
  EXPECT_GT(std::string(info->isa).size(), 0u);
}

TEST(cpu_libtorch, ThreadsOptionSetsTheModelsThreads) {
  for (int threads : {1, 2}) {
    framework_contract::Trainer t(kBackend, framework_contract::mlp(), sgd(0.1f), threads);
    dlhost_model_info info{};
    info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
    check_status(framework_contract::api(kBackend).model_info(t.model.get(), &info), "model_info");
    EXPECT_EQ(info.threads, threads);
    EXPECT_GT(info.param_bytes, 0u);
  }
}

TEST(cpu_libtorch, UpdateUsesTheGradientBuffersInPlace) {
  framework_contract::update_uses_the_gradient_buffers_in_place(kBackend);
}
TEST(cpu_libtorch, BackwardOverwritesAndNotifiesInReverseLayerOrder) {
  framework_contract::backward_overwrites_and_notifies_in_reverse_layer_order(kBackend);
}
TEST(cpu_libtorch, SgdIsTheAbisWithMomentumDecayAndClipping) {
  framework_contract::sgd_is_the_abis_with_momentum_decay_and_clipping(kBackend);
}
TEST(cpu_libtorch, SetInputRejectsLabelsOutOfRangeAndWrongSizes) {
  framework_contract::set_input_rejects_labels_out_of_range_and_wrong_sizes(kBackend);
}
// cpu_libtorch publishes no capabilities (fp32 only): the host refuses the mode before the
// backend sees it; the backend's own refusal at compile is what a host without that check meets.
TEST(cpu_libtorch, OtherPrecisionsAreUnimplemented) {
  framework_contract::other_precisions_are_unimplemented(kBackend);
}

}  // namespace
}  // namespace dlhost
