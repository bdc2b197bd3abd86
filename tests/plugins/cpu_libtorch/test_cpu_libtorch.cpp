// test_cpu_libtorch.cpp — what `dlhost conform` cannot see of the cpu_libtorch backend (conform
// compares its numbers with cpu_reference; tests/e2e/framework_e2e.sh runs that): the ABI contract
// a framework underneath could break, as every framework backend keeps it
// (framework_contract_suite.h: buffers in place, an overwriting backward, grad-ready order, the
// ABI's SGD and AdamW exactly, a Transformer block, threads, bad inputs, fp32 only), the
// grad-ready order across branches that autograd finishes in its own order, and an FC's weight
// gradient written without a weight-sized temporary. Built once per libtorch
// flavour (tests/plugins/cpu_libtorch/CMakeLists.txt): DLHOST_TEST_TORCH_BACKEND is the plugin
// (cpu_libtorch, cpu_libtorch2) and names the test suite, the other definitions say what that
// flavour's library line and grad-ready notices must be.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
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
// its own order, the notices still come in reverse layer order (head, fc_b, fc_a), and they come
// during backward, so the host's all-reduce overlaps it: when head's weight is announced, fc_a's
// gradient is not written yet. An FC announces its weight and bias as its backward writes them
// (ops.cpp, LinearIntoGrads), with 1.13 too; other ops' parameters come from the
// post-accumulate hooks of libtorch 2.x, or after autograd returns with 1.13, which has none.
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
  EXPECT_FALSE(seen.fc_a_done_at_head);
}

// The process's resident set: now, or its peak since the last reset_peak_rss().
size_t rss_kb(const char* field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(field, 0) == 0) return size_t(std::stoull(line.substr(std::strlen(field))));
  return 0;
}

// An FC's backward writes its weight gradient into the gradient buffer the ABI pins, as the gemm
// makes it (mm_out), instead of a fresh weight-sized tensor that autograd then adds into the
// zeroed buffer (a zero pass, an add pass and a new allocation every step: 1.5x PyTorch's own
// step on FCN-5, issue 40). Seen from outside as memory: a 64 MB weight's backward must not raise
// the peak resident set by a weight's size (glibc maps a fresh 64 MB tensor each step, in
// cpu_libtorch2's namespace too; /proc/self/clear_refs resets the peak).
TEST(DLHOST_TEST_TORCH_BACKEND, FcBackwardWritesTheWeightGradientWithoutAWeightSizedTemporary) {
  {
    std::ofstream reset("/proc/self/clear_refs");
    if (!(reset << "5" << std::flush)) GTEST_SKIP() << "cannot reset the peak RSS here";
  }
  constexpr int64_t kWidth = 4096;  // 4096 x 4096 floats: 64 MB
  GraphBuilder b("wide_fc", 2);
  int32_t logits = b.fc("wide", b.input("data", DLHOST_DTYPE_F32, {kWidth}), fc(kWidth));
  b.softmax_cross_entropy("loss", logits, b.input("labels", DLHOST_DTYPE_I32, {}));
  framework_contract::Trainer t(kBackend, b.finish());
  t.forward_backward();  // the first step's one-time allocations
  t.forward_backward();
  std::ofstream("/proc/self/clear_refs") << "5";
  const size_t before = rss_kb("VmRSS:");
  t.forward_backward();
  const size_t grown = rss_kb("VmHWM:") - before;
  EXPECT_LT(grown, size_t(kWidth * kWidth * 4 / 1024 / 2))
      << "peak RSS grew by " << grown << " kB in one step: a weight-sized temporary";
}

}  // namespace
}  // namespace dlhost
