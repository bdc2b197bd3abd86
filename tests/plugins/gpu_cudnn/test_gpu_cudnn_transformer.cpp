// test_gpu_cudnn_transformer.cpp — gpu_cudnn's Transformer ops, AdamW and mixed precision against
// cpu_reference, the oracle, run in the same process on the same graphs, weights and inputs:
//   - each new op between an fc (whose weight gradient carries the op's input gradient) and an MSE
//     loss: the op's output after forward, every parameter's gradient after backward;
//   - a two-block mini GPT (causal, tanh GELU) and a mini BERT (bidirectional, erf GELU, attention
//     dropout with the ABI's mask) with a tied output layer: losses, gradients and the weights
//     after AdamW (with clipping and decoupled weight decay) and after SGD with momentum;
//   - the tied table reported ready exactly once, after its owner's contribution;
//   - bf16 and fp16 (dynamic and static loss scale): gradients within the mode's tolerance of
//     fp32's, the loss falling, and fp16 dropping a step whose scaled gradients overflow.
// Every test needs a device and skips without one, with the reason; compiled into test_gpu_cudnn
// so that scripts/gpu-check.sh's bundle carries it. DLHOST_GPU_TEST_BACKEND names another backend
// to put in gpu_cudnn's place: the CPU rehearsal (ctest gpu_cudnn_transformer_harness) runs the
// fp32 tests with cpu_onednn there, so the harness and its tolerances are exercised without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/host_api.h"
#include "dlhost/dlhost_device.h"
#include "gpu_test_plugins.h"
#include "graph_attrs.h"

namespace dlhost {
namespace {

using namespace dlhost::test_attrs;

// The backend checked against cpu_reference: gpu_cudnn unless DLHOST_GPU_TEST_BACKEND says.
std::string under_test() {
  const char* name = std::getenv("DLHOST_GPU_TEST_BACKEND");
  return name != nullptr && *name != '\0' ? name : "gpu_cudnn";
}

#define REQUIRE_GPU()                                                        \
  do {                                                                       \
    const LoadedPlugin& gpu = gpu_test::backend_plugin(under_test());        \
    if (!gpu.usable) GTEST_SKIP() << "no GPU here: " << gpu.unusable_reason; \
  } while (0)

void check(dlhost_status* s, const std::string& what) {
  if (s == nullptr) return;
  const std::string message = host_api()->status_message(s);
  host_api()->status_destroy(s);
  throw std::runtime_error(what + ": " + message);
}

// --- a problem, run on both backends -------------------------------------------------------------

// A graph and everything fed to it, so that both backends see the same numbers.
struct Problem {
  std::unique_ptr<Graph> graph;
  std::vector<std::pair<int32_t, std::vector<float>>> values;  // F32 inputs
  std::vector<std::pair<int32_t, std::vector<int32_t>>> ids;   // I32 inputs
  int32_t output = -1;                                         // compared after forward
  std::vector<std::vector<float>> weights;                     // per parameter
};

// Weights as the initializers would draw them (scale near 1, shifts and biases small), inputs
// uniform in [-1, 1), ids below `id_limit`.
void fill(Problem& p, uint32_t seed, int32_t id_limit) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int32_t i = 0; i < p.graph->num_params(); ++i) {
    const dlhost_param_desc& d = p.graph->param(i);
    const float a = std::sqrt(3.0f / static_cast<float>(std::max<int64_t>(d.fan_in, 1)));
    std::vector<float> w(static_cast<size_t>(d.count));
    for (float& v : w)
      v = d.role == DLHOST_PARAM_SCALE                                  ? 1.0f + 0.1f * u(rng)
          : d.role == DLHOST_PARAM_SHIFT || d.role == DLHOST_PARAM_BIAS ? 0.1f * u(rng)
                                                                        : a * u(rng);
    p.weights.push_back(std::move(w));
  }
  for (int32_t t : std::vector<int32_t>(p.graph->view()->inputs,
                                        p.graph->view()->inputs + p.graph->view()->num_inputs)) {
    const dlhost_tensor_desc& d = p.graph->tensor(t);
    int64_t n = 1;
    for (int32_t k = 0; k < d.rank; ++k) n *= d.dims[k];
    if (d.dtype == DLHOST_DTYPE_I32) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (int32_t& x : v) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(id_limit));
      p.ids.emplace_back(t, std::move(v));
    } else {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = u(rng);
      p.values.emplace_back(t, std::move(v));
    }
  }
}

// What one backend computed.
struct Outcome {
  std::vector<float> losses;               // one per step
  std::vector<float> output;               // Problem::output after the first forward
  std::vector<std::vector<float>> grads;   // after the first backward
  std::vector<std::vector<float>> values;  // after the last update
  std::vector<int32_t> ready;              // parameters in grad-ready order, first backward
};

struct Session {
  const dlhost_backend_api* api = nullptr;
  const dlhost_plugin* table = nullptr;
  dlhost_context* context = nullptr;
  dlhost_model* model = nullptr;
  ~Session() {
    if (model != nullptr) api->model_destroy(model);
    if (context != nullptr) api->context_destroy(context);
  }
};

struct RunOptions {
  int steps = 1;
  std::string precision = "fp32";
  std::string loss_scale;  // fp16's; empty: not passed (dynamic)
};

Outcome run(const std::string& backend, const Problem& p, const dlhost_optimizer_desc& opt,
            const RunOptions& r) {
  Session s;
  s.table = gpu_test::backend_plugin(backend).table;
  s.api = s.table->backend;
  dlhost_options options;
  options.values["seed"] = "11";  // the dropout masks: the same on both backends
  options.values["precision"] = r.precision;
  if (backend == "cpu_reference") options.values["threads"] = "1";
  if (!r.loss_scale.empty()) options.values["loss_scale"] = r.loss_scale;
  check(s.api->context_create(0, &options, &s.context), backend + " context_create");
  check(s.api->compile(s.context, p.graph->view(), &opt, &options, &s.model), backend + " compile");
  for (int32_t i = 0; i < p.graph->num_params(); ++i)
    check(s.api->write_param(s.model, i, DLHOST_PARAM_VALUE, p.weights[i].data(),
                             p.weights[i].size() * 4),
          backend + " write_param");
  for (const auto& [t, v] : p.values)
    check(s.api->set_input(s.model, t, v.data(), v.size() * 4), backend + " set_input");
  for (const auto& [t, v] : p.ids)
    check(s.api->set_input(s.model, t, v.data(), v.size() * 4), backend + " set_input");
  const auto* reads = reinterpret_cast<const dlhost_tensor_read_ext*>(
      dlhost_find_extension(s.table->extensions, DLHOST_EXT_TENSOR_READ));
  Outcome o;
  dlhost_grad_ready ready{};
  ready.struct_size = DLHOST_GRAD_READY_STRUCT_SIZE;
  ready.user = &o.ready;
  ready.fn = [](void* user, int32_t param) {
    static_cast<std::vector<int32_t>*>(user)->push_back(param);
  };
  for (int step = 0; step < r.steps; ++step) {
    check(s.api->forward(s.model), backend + " forward");
    float loss = 0;
    check(s.api->read_loss(s.model, &loss), backend + " read_loss");
    o.losses.push_back(loss);
    if (step == 0 && p.output >= 0) {
      if (reads == nullptr) throw std::runtime_error(backend + " reads no tensors");
      const dlhost_tensor_desc& d = p.graph->tensor(p.output);
      int64_t n = 1;
      for (int32_t k = 0; k < d.rank; ++k) n *= d.dims[k];
      o.output.resize(static_cast<size_t>(n));
      check(reads->read_tensor(s.model, p.output, o.output.data(), o.output.size() * 4),
            backend + " read_tensor");
    }
    check(s.api->backward(s.model, step == 0 ? &ready : nullptr), backend + " backward");
    if (step == 0)
      for (int32_t i = 0; i < p.graph->num_params(); ++i) {
        std::vector<float> g(p.weights[i].size());
        check(s.api->read_param(s.model, i, DLHOST_PARAM_GRAD, g.data(), g.size() * 4),
              backend + " read_param");
        o.grads.push_back(std::move(g));
      }
    check(s.api->update(s.model), backend + " update");
  }
  for (int32_t i = 0; i < p.graph->num_params(); ++i) {
    std::vector<float> w(p.weights[i].size());
    check(s.api->read_param(s.model, i, DLHOST_PARAM_VALUE, w.data(), w.size() * 4),
          backend + " read_param");
    o.values.push_back(std::move(w));
  }
  return o;
}

// Every element within tol * (the largest magnitude of `want`, at least `floor`).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const std::string& what, double floor = 1e-6) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = floor;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= worst)) {  // NaN counts as the worst
      worst = std::isnan(err) ? INFINITY : err;
      at = i;
    }
  }
  EXPECT_LE(worst, tol * scale) << what << ": element " << at << " is " << got[at] << ", want "
                                << want[at] << " (largest magnitude " << scale << ")";
}

// Every gradient within tol of the reference's, measured against its own largest magnitude or a
// `floor` share of the largest over all gradients, whichever is larger: some gradients are zero
// in exact arithmetic (the key projection's bias: adding one vector to every key shifts a row of
// scores by a constant, which softmax ignores), and what both backends compute there is rounding
// noise of the other gradients' size.
void expect_grads_close(const Problem& p, const Outcome& got, const Outcome& want, double tol,
                        double floor = 1e-2) {
  double largest = 0;
  for (const auto& g : want.grads)
    for (float v : g) largest = std::max(largest, std::fabs(static_cast<double>(v)));
  for (int32_t i = 0; i < p.graph->num_params(); ++i)
    expect_close(got.grads[i], want.grads[i], tol,
                 "gradient of " + std::string(p.graph->param(i).name), floor * largest);
}

// --- one op between an fc and an MSE loss --------------------------------------------------------

struct OpCase {
  const char* name;
  // Builds the op on x [N, T, C] and returns its output tensor.
  int32_t (*build)(GraphBuilder& b, int32_t x);
};

const OpCase kOpCases[] = {
    {"layer_norm_eps1e5",
     [](GraphBuilder& b, int32_t x) { return b.layer_norm("op", x, layer_norm(1e-5f)); }},
    {"layer_norm_eps1e12",
     [](GraphBuilder& b, int32_t x) { return b.layer_norm("op", x, layer_norm(1e-12f)); }},
    {"gelu_erf", [](GraphBuilder& b, int32_t x) { return b.gelu("op", x, gelu(DLHOST_GELU_ERF)); }},
    {"gelu_tanh",
     [](GraphBuilder& b, int32_t x) { return b.gelu("op", x, gelu(DLHOST_GELU_TANH)); }},
    {"attention_causal",
     [](GraphBuilder& b, int32_t x) {
       const int32_t k = b.fc("k", x, fc(12, true, 2)), v = b.fc("v", x, fc(12, true, 2));
       return b.attention("op", x, k, v, attention(3, true, 0.0f));
     }},
    {"attention_bidirectional_dropout",
     [](GraphBuilder& b, int32_t x) {
       const int32_t k = b.fc("k", x, fc(12, true, 2)), v = b.fc("v", x, fc(12, true, 2));
       return b.attention("op", x, k, v, attention(4, false, 0.2f));
     }},
    // q, k and v one tensor: three gradients summed into it, in one step.
    {"attention_shared_qkv_causal_dropout",
     [](GraphBuilder& b, int32_t x) {
       return b.attention("op", x, x, x, attention(2, true, 0.1f));
     }},
    {"position_embedding",
     [](GraphBuilder& b, int32_t x) {
       return b.position_embedding("op", x, position_embedding(9));
     }},
};

// Printed by name, so that ctest's names are readable and the same in every build.
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

class GpuTransformerOp : public ::testing::TestWithParam<OpCase> {};

TEST_P(GpuTransformerOp, ForwardAndGradientsMatchTheReference) {
  REQUIRE_GPU();
  Problem p;
  GraphBuilder b(GetParam().name, 3);
  const int32_t data = b.input("data", DLHOST_DTYPE_F32, {7, 12});
  const int32_t x = b.fc("in", data, fc(12, true, 2));
  p.output = GetParam().build(b, x);
  const int32_t target = b.input("target", DLHOST_DTYPE_F32, {7, 12});
  b.mse_loss("loss", p.output, target);
  p.graph = b.finish();
  fill(p, 5, 1);
  const dlhost_optimizer_desc opt = sgd(0.1f);
  const Outcome want = run("cpu_reference", p, opt, {});
  const Outcome got = run(under_test(), p, opt, {});
  expect_close(got.output, want.output, 1e-5, "output");
  EXPECT_NEAR(got.losses[0], want.losses[0], 1e-5 * std::fabs(want.losses[0]));
  expect_grads_close(p, got, want, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Ops, GpuTransformerOp, ::testing::ValuesIn(kOpCases),
                         [](const auto& test) { return std::string(test.param.name); });

// --- a mini GPT / BERT with a tied output layer --------------------------------------------------

constexpr int32_t kVocab = 13;

Problem mini_transformer(bool causal, float dropout, int32_t gelu_kind) {
  Problem p;
  GraphBuilder b(causal ? "mini_gpt" : "mini_bert", 2);
  const int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {6});
  const int32_t e = b.embedding("wte", ids, embedding(kVocab, 12));
  int32_t x = b.position_embedding("wpe", e, position_embedding(8));
  for (int block = 0; block < 2; ++block) {
    const std::string at = "b" + std::to_string(block) + ".";
    int32_t h = b.layer_norm(at + "ln1", x, layer_norm(1e-5f));
    const int32_t q = b.fc(at + "q", h, fc(12, true, 2)), k = b.fc(at + "k", h, fc(12, true, 2)),
                  v = b.fc(at + "v", h, fc(12, true, 2));
    h = b.attention(at + "attn", q, k, v, attention(3, causal, dropout));
    x = b.add(at + "res1", x, b.fc(at + "proj", h, fc(12, true, 2)));
    h = b.layer_norm(at + "ln2", x, layer_norm(1e-5f));
    h = b.gelu(at + "gelu", b.fc(at + "up", h, fc(24, true, 2)), gelu(gelu_kind));
    x = b.add(at + "res2", x, b.fc(at + "down", h, fc(12, true, 2)));
  }
  x = b.layer_norm("ln_f", x, layer_norm(1e-5f));
  p.output = b.tied_fc("head", x, e, tied_fc(true));
  const int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {6});
  b.softmax_cross_entropy("loss", p.output, labels);
  p.graph = b.finish();
  fill(p, causal ? 21 : 22, kVocab);
  return p;
}

// A large epsilon keeps AdamW from turning rounding noise in near-zero gradients into full steps
// (m / sqrt(v) is +-1 for any gradient, however small): what differs then is of the noise's size.
dlhost_optimizer_desc adamw_for_comparison() {
  return adamw(1e-2f, 0.01f, 1.0f, 0.9f, 0.99f, 1e-2f);
}

struct MiniCase {
  const char* name;
  bool causal;
  float dropout;
  int32_t gelu_kind;
};
const MiniCase kMiniCases[] = {{"gpt", true, 0.0f, DLHOST_GELU_TANH},
                               {"gpt_dropout", true, 0.1f, DLHOST_GELU_TANH},
                               {"bert_dropout", false, 0.1f, DLHOST_GELU_ERF}};

void PrintTo(const MiniCase& c, std::ostream* os) { *os << c.name; }

class GpuMiniTransformer : public ::testing::TestWithParam<MiniCase> {
 protected:
  Problem problem() const {
    return mini_transformer(GetParam().causal, GetParam().dropout, GetParam().gelu_kind);
  }
};

TEST_P(GpuMiniTransformer, AdamWStepsMatchTheReference) {
  REQUIRE_GPU();
  const Problem p = problem();
  RunOptions r;
  r.steps = 4;
  const Outcome want = run("cpu_reference", p, adamw_for_comparison(), r);
  const Outcome got = run(under_test(), p, adamw_for_comparison(), r);
  expect_close(got.output, want.output, 1e-5, "logits");
  expect_grads_close(p, got, want, 2e-4);
  expect_close(got.losses, want.losses, 1e-4, "losses");
  for (int32_t i = 0; i < p.graph->num_params(); ++i)
    expect_close(got.values[i], want.values[i], 1e-3,
                 "value after AdamW of " + std::string(p.graph->param(i).name), 1.0);
  EXPECT_LT(got.losses.back(), got.losses.front());
}

TEST_P(GpuMiniTransformer, SgdWithMomentumAndClippingMatchesTheReference) {
  REQUIRE_GPU();
  const Problem p = problem();
  RunOptions r;
  r.steps = 3;
  const dlhost_optimizer_desc opt = sgd(0.1f, 0.9f, 1e-3f, 0.5f);
  const Outcome want = run("cpu_reference", p, opt, r);
  const Outcome got = run(under_test(), p, opt, r);
  expect_close(got.losses, want.losses, 1e-4, "losses");
  for (int32_t i = 0; i < p.graph->num_params(); ++i)
    expect_close(got.values[i], want.values[i], 1e-4,
                 "value after SGD of " + std::string(p.graph->param(i).name));
}

// The tied table is listed by tied_fc and by its owner, the embedding: one notice, after the
// owner's backward (the embedding is the first node, so its table comes last).
TEST_P(GpuMiniTransformer, TiedTableIsReadyOnceAfterItsOwner) {
  REQUIRE_GPU();
  const Problem p = problem();
  const Outcome got = run(under_test(), p, adamw_for_comparison(), {});
  std::vector<int> seen(static_cast<size_t>(p.graph->num_params()), 0);
  for (int32_t id : got.ready) ++seen[static_cast<size_t>(id)];
  for (int32_t i = 0; i < p.graph->num_params(); ++i)
    EXPECT_EQ(seen[i], 1) << p.graph->param(i).name;
  ASSERT_FALSE(got.ready.empty());
  // Parameters are numbered in node order: 0 is the first node's, the token table.
  ASSERT_EQ(p.graph->param(0).role, DLHOST_PARAM_EMBEDDING);
  EXPECT_EQ(got.ready.back(), 0) << p.graph->param(got.ready.back()).name;
}

// bf16 and fp16: the first gradients within the mode's tolerance of fp32's, and training works.
TEST_P(GpuMiniTransformer, MixedPrecisionGradientsAreCloseAndTheLossFalls) {
  REQUIRE_GPU();
  const Problem p = problem();
  RunOptions fp32;
  const Outcome want = run("cpu_reference", p, adamw_for_comparison(), fp32);
  struct Mode {
    const char* precision;
    const char* loss_scale;
    double tol;
  };
  for (const Mode& mode :
       {Mode{"bf16", "", 5e-2}, Mode{"fp16", "", 1e-2}, Mode{"fp16", "1024", 1e-2}}) {
    SCOPED_TRACE(std::string(mode.precision) + " loss_scale '" + mode.loss_scale + "'");
    RunOptions r;
    r.precision = mode.precision;
    r.loss_scale = mode.loss_scale;
    r.steps = 30;
    const Outcome got = run(under_test(), p, adamw(1e-2f), r);
    expect_grads_close(p, got, want, mode.tol, 0.1);
    EXPECT_NEAR(got.losses[0], want.losses[0], mode.tol * std::fabs(want.losses[0]));
    EXPECT_LT(got.losses.back(), 0.9f * got.losses.front());
  }
}

INSTANTIATE_TEST_SUITE_P(Mini, GpuMiniTransformer, ::testing::ValuesIn(kMiniCases),
                         [](const auto& test) { return std::string(test.param.name); });

// A loss scale that makes the scaled gradients overflow fp32 itself (inputs of 1e4, an MSE of
// about 1e8, gradients of 1e8 * 1e36): every step is dropped and the weights stay as written, as
// PyTorch's GradScaler drops them; the loss read back is the unscaled one.
TEST(GpuMixedPrecision, Fp16DropsAStepWhoseScaledGradientsOverflow) {
  REQUIRE_GPU();
  Problem p;
  GraphBuilder b("overflow", 4);
  const int32_t data = b.input("data", DLHOST_DTYPE_F32, {8});
  const int32_t y = b.fc("fc", data, fc(8));
  b.mse_loss("loss", y, b.input("target", DLHOST_DTYPE_F32, {8}));
  p.graph = b.finish();
  fill(p, 3, 1);
  for (auto& [t, v] : p.values)
    if (t == data)
      for (float& x : v) x *= 1e4f;
  RunOptions r;
  r.precision = "fp16";
  r.loss_scale = "1e36";
  r.steps = 2;
  const Outcome got = run(under_test(), p, adamw(1e-2f), r);
  for (int32_t i = 0; i < p.graph->num_params(); ++i)
    EXPECT_EQ(got.values[i], p.weights[i]) << p.graph->param(i).name << " changed";
  EXPECT_EQ(got.losses[0], got.losses[1]);
  EXPECT_TRUE(std::isfinite(got.losses[0]));
  EXPECT_GT(got.losses[0], 1e4f);
  // The same problem at a modest static scale trains: the skip is the overflow's doing.
  r.loss_scale = "8";
  const Outcome trained = run(under_test(), p, adamw(1e-2f), r);
  EXPECT_NE(trained.values[0], p.weights[0]);
}

}  // namespace
}  // namespace dlhost
