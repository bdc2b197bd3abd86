// test_cpu_libtorch.cpp — what `dlhost conform` cannot see of the cpu_libtorch backend (conform
// compares its numbers with cpu_reference; tests/e2e/framework_e2e.sh runs that): the ABI contract
// a framework underneath could break, as every framework backend keeps it
// (framework_contract_suite.h: buffers in place, an overwriting backward, grad-ready order, the
// ABI's SGD and AdamW exactly, a Transformer block, threads, bad inputs, fp32 only), and the
// grad-ready order across branches that autograd finishes in its own order. Built once per libtorch
// flavour (tests/plugins/cpu_libtorch/CMakeLists.txt): DLHOST_TEST_TORCH_BACKEND is the plugin
// (cpu_libtorch, cpu_libtorch2) and names the test suite, the other definitions say what that
// flavour's library line and grad-ready notices must be.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "framework_contract_suite.h"

namespace dlhost {
namespace {

using namespace dlhost::test_attrs;

#define DLHOST_TEST_STRING(x) #x
#define DLHOST_TEST_NAME(x) DLHOST_TEST_STRING(x)
const char* const kBackend = DLHOST_TEST_NAME(DLHOST_TEST_TORCH_BACKEND);

// The contract every framework backend keeps (framework_contract_suite.h), AdamW and the
// Transformer block included. The device line: "libtorch 2.15.0 (ATen avx512, oneDNN 3.x,
// OpenMP 4.5, MKL 2024.2)".
framework_contract::ContractBackend contract_backend() {
  framework_contract::ContractBackend b;
  b.name = kBackend;
  b.library = {DLHOST_TEST_LIBTORCH, "oneDNN ", "OpenMP ", DLHOST_TEST_TORCH_BLAS};
  return b;
}
using framework_contract::FrameworkContract;
INSTANTIATE_TEST_SUITE_P(contract, FrameworkContract, ::testing::Values(contract_backend()),
                         framework_contract::contract_backend_name);

// data -> {fc_a, fc_b} -> add -> relu -> head -> cross-entropy: autograd finishes the branches in
// its own order, the notices still come in reverse layer order (head, fc_b, fc_a). With libtorch
// 2.x they come during backward (post-accumulate hooks), so the host's all-reduce overlaps it:
// when head's weight is announced, fc_a's gradient is still the zeroed buffer. With 1.13 they
// come after autograd returns, every gradient done.
TEST(DLHOST_TEST_TORCH_BACKEND, NotifiesInReverseLayerOrderAcrossBranches) {
  GraphBuilder b("branches", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {4});
  int32_t a = b.fc("fc_a", data, fc(5));  // apart: the order of arguments' evaluation is open
  int32_t sum = b.add("sum", a, b.fc("fc_b", data, fc(5)));
  int32_t logits = b.fc("head", b.activation("act", sum, act(DLHOST_ACTIVATION_RELU)), fc(3));
  b.softmax_cross_entropy("loss", logits, b.input("labels", DLHOST_DTYPE_I32, {}));
  framework_contract::Trainer t(kBackend, b.finish());
  struct Seen {
    std::vector<int32_t> order;
    const float* fc_a_weight_grad = nullptr;
    size_t count = 0;
    bool fc_a_done_at_head = false;
  } seen;
  const dlhost_buffer grad = t.buffer(0, true);
  seen.fc_a_weight_grad = static_cast<const float*>(grad.data);
  seen.count = grad.bytes / 4;
  dlhost_grad_ready ready{};
  ready.struct_size = DLHOST_GRAD_READY_STRUCT_SIZE;
  ready.user = &seen;
  ready.fn = [](void* user, int32_t param) {
    auto& s = *static_cast<Seen*>(user);
    s.order.push_back(param);
    if (param == 4)  // head.weight: the first notice
      for (size_t i = 0; i < s.count; ++i) s.fc_a_done_at_head |= s.fc_a_weight_grad[i] != 0.0f;
  };
  t.forward_backward(&ready);
  // fc_a 0, 1; fc_b 2, 3; head 4, 5.
  EXPECT_EQ(seen.order, (std::vector<int32_t>{4, 5, 2, 3, 0, 1}));
  EXPECT_EQ(seen.fc_a_done_at_head, !DLHOST_TEST_NOTICES_DURING_BACKWARD);
}

}  // namespace
}  // namespace dlhost
