// test_cpu_mxnet.cpp — what `dlhost conform` cannot see of the cpu_mxnet backend (conform
// compares its numbers with cpu_reference; tests/e2e/framework_e2e.sh runs that): the ABI contract
// a framework underneath could break. Parameter and gradient buffers must not move (the host
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
#include <string>
#include <vector>

#include "framework_contract_suite.h"

namespace dlhost {
namespace {

using namespace dlhost::test_attrs;
using framework_contract::code_of;

const char* const kBackend = "cpu_mxnet";
const dlhost_backend_api& api() { return framework_contract::api(kBackend); }

// A cpu_mxnet model (`mode` hybridized or imperative), or one on another backend.
struct Trainer : framework_contract::Trainer {
  Trainer(std::unique_ptr<Graph> g, const dlhost_optimizer_desc& opt = sgd(0.1f),
          const std::string& mode = "hybridized", const std::string& on = kBackend, int threads = 1)
      : framework_contract::Trainer(
            on, std::move(g), opt,
            framework_contract::threads_options(threads, options(on, mode))) {}
  static dlhost_options options(const std::string& on, const std::string& mode) {
    dlhost_options o;
    if (on == kBackend) o.values["mode"] = mode;
    return o;
  }
};

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

void expect_near_all(const std::vector<float>& a, const std::vector<float>& b, float tolerance,
                     const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tolerance * std::max(1.0f, std::fabs(b[i]))) << what << "[" << i << "]";
}

// The contract every framework backend keeps (framework_contract_suite.h), but the threads
// check, which opens models of 1 and 2 threads in one process: MXNet refuses the second (the
// test below checks that refusal instead).
framework_contract::ContractBackend contract_backend() {
  framework_contract::ContractBackend b;
  b.name = kBackend;
  b.library = {"MXNet 1.9.1", "oneDNN ", "OpenBLAS ", "OpenMP"};
  b.opt_outs["ThreadsOptionSetsTheModelsThreads"] =
      "MXNet fixes its OpenMP threads per process when it loads, so a second model of another "
      "count is refused (cpu_mxnet.ThreadsOptionIsTheModelsAndFixedPerProcess checks that)";
  return b;
}
using framework_contract::FrameworkContract;
INSTANTIATE_TEST_SUITE_P(contract, FrameworkContract, ::testing::Values(contract_backend()),
                         framework_contract::contract_backend_name);

// MXNet fixes its OpenMP threads when it loads: the first context decides, one asking for
// another count in the same process is refused, naming both.
TEST(cpu_mxnet, ThreadsOptionIsTheModelsAndFixedPerProcess) {
  Trainer t(framework_contract::mlp(), sgd(0.1f), "hybridized", kBackend, 2);
  EXPECT_EQ(t.threads(), 2);
  dlhost_options other;
  other.values["threads"] = "1";
  try {
    create_context(framework_contract::plugin(kBackend), 0, other);
    ADD_FAILURE() << "a context for 1 thread after one for 2";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("loaded in this process for 2 thread(s)"),
              std::string::npos)
        << e.what();
  }
}

// The Transformer block (attention's constant causal mask and dropout mask leaves, the tied
// table) with AdamW: the imperative mode computes what the CachedOp computes.
TEST(cpu_mxnet, ImperativeTransformerBlockMatchesTheCachedOp) {
  const dlhost_optimizer_desc opt = adamw(0.02f, 0.01f);
  Trainer hybrid(framework_contract::transformer_block(), opt, "hybridized"),
      imperative(framework_contract::transformer_block(), opt, "imperative");
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    hybrid.forward_backward();
    imperative.forward_backward();
    EXPECT_NEAR(hybrid.loss(), imperative.loss(), 1e-5f);
    hybrid.update();
    imperative.update();
  }
  for (int32_t p = 0; p < hybrid.graph->num_params(); ++p)
    expect_near_all(imperative.get(p, DLHOST_PARAM_VALUE), hybrid.get(p, DLHOST_PARAM_VALUE), 1e-4f,
                    "value of " + std::string(hybrid.graph->param(p).name));
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

// Token ids as labels are (the contract's SetInputRejectsLabelsOutOfRangeAndWrongSizes): an id
// below the vocabulary refused, naming the input and the position.
TEST(cpu_mxnet, SetInputRejectsIdsOutOfRange) {
  std::string message;
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
  ContextHandle context = create_context(framework_contract::plugin(kBackend), 0, dlhost_options{});
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

// ABI 1.5 departures: cpu_mxnet says it lowers a global average pool as `mean` (faster than
// Gluon's GlobalAvgPool2D: docs/frameworks.md), and only for a graph that has one.
TEST(cpu_mxnet, DeclaresItsGlobalPoolAsMeanOnlyWhereTheGraphHasOne) {
  GraphBuilder b("gap", 2);
  int32_t x = b.conv2d("conv", b.input("data", DLHOST_DTYPE_F32, {2, 4, 4}), conv(3, 3, 1, 1));
  x = b.global_avg_pool("gap", x);
  b.softmax_cross_entropy("loss", b.fc("head", x, fc(3)), b.input("labels", DLHOST_DTYPE_I32, {}));
  Trainer pooled(b.finish(), adamw(0.01f));  // AdamW: no SGD update line beside it
  const dlhost_model_info info = pooled.info();
  ASSERT_NE(info.departures, nullptr);
  const std::string declared = info.departures;
  EXPECT_EQ(declared.rfind("global average pool: MXNet's mean", 0), 0u) << declared;
  EXPECT_NE(declared.find("GlobalAvgPool2D"), std::string::npos) << declared;
  EXPECT_NE(declared.find("CPU ms"), std::string::npos) << declared;  // its measured size
  EXPECT_EQ(std::count(declared.begin(), declared.end(), '\n'), 1) << declared;  // one line
  // batch norm, max pooling: nothing Gluon's layers do otherwise
  Trainer plain(small_cnn(), adamw(0.01f));
  ASSERT_NE(plain.info().departures, nullptr);
  EXPECT_STREQ(plain.info().departures, "");
}

// cpu_mxnet's SGD update is MXNet's per-array operator, sgd_mom_update with momentum and
// sgd_update without, where Gluon Trainer.step aggregates the arrays into multi_sgd_mom_update or
// multi_sgd_update calls at about twice the CPU time (issue 40, rule 2): each declared where it
// runs, and nothing for AdamW.
TEST(cpu_mxnet, DeclaresItsPerArraySgdUpdateWhereverItRuns) {
  const auto declared = [](const dlhost_optimizer_desc& opt) {
    Trainer t(small_cnn(), opt);
    const dlhost_model_info info = t.info();
    return std::string(info.departures ? info.departures : "(null)");
  };
  const std::string momentum = declared(sgd(0.1f, 0.9f));
  EXPECT_EQ(momentum.rfind("SGD update: one sgd_mom_update per array", 0), 0u) << momentum;
  EXPECT_NE(momentum.find("multi_sgd_mom_update"), std::string::npos) << momentum;
  EXPECT_NE(momentum.find("CPU ms"), std::string::npos) << momentum;  // its measured size
  EXPECT_EQ(std::count(momentum.begin(), momentum.end(), '\n'), 1) << momentum;  // one line
  const std::string plain = declared(sgd(0.1f));
  EXPECT_EQ(plain.rfind("SGD update: one sgd_update per array", 0), 0u) << plain;
  EXPECT_NE(plain.find("multi_sgd_update"), std::string::npos) << plain;
  EXPECT_NE(plain.find("CPU ms"), std::string::npos) << plain;
  EXPECT_EQ(std::count(plain.begin(), plain.end(), '\n'), 1) << plain;
  EXPECT_EQ(declared(adamw(0.01f)), "");
}

}  // namespace
}  // namespace dlhost
