// test_cpu_onednn_internals.cpp — the one white-box test of cpu_onednn, compiled with the
// plugin's own model sources (the cpu_onednn_model library), not loaded through dlopen.
//
// Why white box: batch norm's running mean and variance are state of the backend, not
// parameters. No ABI call reads them and training never uses them (they serve inference), so
// nothing observable through the C table depends on them; only the plugin's Model can be asked.
// Likewise the reuse of activation bytes for gradients (Model::lend_value): what it must not
// change (forward results, gradients, a graph input) is checked here step by step. The step
// profile (DLHOST_CPU_ONEDNN_PROFILE) is a developer's aid of the Model, checked here as well.
// Everything else about cpu_onednn is tested through the ABI in test_cpu_onednn.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "../../plugins/cpu_onednn/model.h"
#include "../graph_attrs.h"
#include "core/graph.h"

namespace dlhost {
namespace {

using namespace dlhost::test_attrs;

// PyTorch's update of running statistics from one mini-batch [n, c, spatial]:
// running = (1 - momentum) * running + momentum * batch, the variance unbiased.
void follow_running_stats(const std::vector<float>& x, int64_t n, int64_t c, int64_t spatial,
                          double momentum, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t count = n * spatial;
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < spatial; ++k) {
        const double v = x[(i * c + ch) * spatial + k];
        sum += v;
        sum_sq += v * v;
      }
    const double batch_mean = sum / count;
    const double unbiased = (sum_sq - count * batch_mean * batch_mean) / (count - 1);
    mean[ch] = (1 - momentum) * mean[ch] + momentum * batch_mean;
    var[ch] = (1 - momentum) * var[ch] + momentum * unbiased;
  }
}

// The backend's context on one thread, and plain SGD, as a model under test gets them.
cpu_onednn::Context one_thread_context() {
  cpu_onednn::Context context;
  context.threads_requested = 1;
  context.apply_threads();
  context.engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
  context.stream = dnnl::stream(context.engine);
  return context;
}

dlhost_optimizer_desc plain_sgd() {
  auto sgd = dlhost_optimizer_desc{};
  sgd.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
  sgd.kind = DLHOST_OPTIMIZER_SGD;
  return sgd;
}

TEST(cpu_onednn_internals, BatchNormRunningStatistics) {
  cpu_onednn::Context context = one_thread_context();
  dlhost_optimizer_desc sgd = plain_sgd();

  const float momentum = 0.3f;
  const int64_t batch = 4, c = 3;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{c}, {c, 2, 2}}) {
    const int64_t spatial = shape.size() == 1 ? 1 : 4;
    SCOPED_TRACE(shape.size() + 1);
    GraphBuilder b("bn_stats", batch);
    const int32_t data = b.input("data", DLHOST_DTYPE_F32, shape);
    const int32_t logits = b.fc("head", b.batch_norm("bn", data, bn(momentum)), fc(3));
    const int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
    b.softmax_cross_entropy("loss", logits, labels);
    auto graph = b.finish();
    cpu_onednn::Model model(context, graph->view(), sgd, 42);
    const std::vector<int32_t> ids = {0, 1, 2, 0};
    model.set_input(labels, ids.data(), ids.size() * 4);

    std::mt19937 rng(22);
    std::vector<double> want_mean(c, 0.0), want_var(c, 1.0);  // PyTorch's initial state
    for (int step = 0; step < 2; ++step) {
      std::uniform_real_distribution<float> dist(-1.0f + step, 2.0f + 3 * step);
      std::vector<float> x(static_cast<size_t>(batch * c * spatial));
      for (float& v : x) v = dist(rng);
      model.set_input(data, x.data(), x.size() * 4);
      model.forward();
      model.synchronize();
      follow_running_stats(x, batch, c, spatial, momentum, want_mean, want_var);
    }
    ASSERT_EQ(model.running_stats().size(), 1u);
    const auto& stats = model.running_stats()[0];
    EXPECT_EQ(stats.node, "bn");
    ASSERT_EQ(stats.channels, c);
    for (int64_t ch = 0; ch < c; ++ch) {
      EXPECT_NEAR(stats.mean[ch], want_mean[ch], 1e-5) << "channel " << ch;
      EXPECT_NEAR(stats.variance[ch], want_var[ch], 1e-5) << "channel " << ch;
    }
  }
}

// Backward reuses the bytes of activations past their last reader for gradients: a second
// forward must give the same activations and loss, a second backward the same gradients, the
// graph input must survive, and a lent activation is refused after backward, not returned stale.
TEST(cpu_onednn_internals, LentActivationsHoldGradientsOnlyDuringBackward) {
  cpu_onednn::Context context = one_thread_context();
  dlhost_optimizer_desc sgd = plain_sgd();
  sgd.learning_rate = 0.1f;

  const int64_t batch = 4;
  GraphBuilder b("lend", batch);
  const int32_t data = b.input("data", DLHOST_DTYPE_F32, {6});
  const int32_t h1 = b.activation("act1", b.fc("fc1", data, fc(8)), act(DLHOST_ACTIVATION_SIGMOID));
  const int32_t h2 = b.activation("act2", b.fc("fc2", h1, fc(8)), act(DLHOST_ACTIVATION_SIGMOID));
  const int32_t sum = b.add("res", h2, h1);  // h1 has two readers: its gradient accumulates
  const int32_t logits = b.fc("head", sum, fc(3));
  const int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", logits, labels);
  auto graph = b.finish();
  cpu_onednn::Model model(context, graph->view(), sgd, 42);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int32_t p = 0; p < graph->num_params(); ++p) {
    std::vector<float> w(static_cast<size_t>(graph->param(p).count));
    for (float& v : w) v = dist(rng);
    model.write_param(p, DLHOST_PARAM_VALUE, w.data(), w.size() * 4);
  }
  std::vector<float> x(batch * 6);
  for (float& v : x) v = dist(rng);
  model.set_input(data, x.data(), x.size() * 4);
  const std::vector<int32_t> ids = {0, 1, 2, 0};
  model.set_input(labels, ids.data(), ids.size() * 4);

  auto read = [&](int32_t t, size_t n) {
    std::vector<float> v(n);
    model.read_tensor(t, v.data(), n * 4);
    return v;
  };
  auto grads = [&] {
    std::vector<std::vector<float>> g;
    for (int32_t p = 0; p < graph->num_params(); ++p) {
      g.emplace_back(static_cast<size_t>(graph->param(p).count));
      model.read_param(p, DLHOST_PARAM_GRAD, g.back().data(), g.back().size() * 4);
    }
    return g;
  };
  model.forward();
  const float loss = model.loss();
  const auto h1_first = read(h1, batch * 8), logits_first = read(logits, batch * 3);
  model.backward(nullptr);
  const auto grads_first = grads();
  EXPECT_EQ(read(data, x.size()), x);  // a graph input is never lent
  try {
    read(logits, batch * 3);
    ADD_FAILURE() << "read_tensor of a lent activation after backward returned";
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_UNIMPLEMENTED);
    EXPECT_NE(std::string(e.what()).find("after backward"), std::string::npos) << e.what();
  }
  model.forward();  // no update in between: the same numbers
  EXPECT_EQ(model.loss(), loss);
  EXPECT_EQ(read(h1, batch * 8), h1_first);
  EXPECT_EQ(read(logits, batch * 3), logits_first);
  model.backward(nullptr);
  EXPECT_EQ(grads(), grads_first);
  float total = 0;
  for (const auto& g : grads_first)
    for (float v : g) total += std::abs(v);
  EXPECT_GT(total, 0.0f);
}

// DLHOST_CPU_ONEDNN_PROFILE: the model times its steps and prints them when it goes, per step
// of the run, the update included; without the variable it prints nothing.
TEST(cpu_onednn_internals, StepProfileOnRequest) {
  cpu_onednn::Context context = one_thread_context();
  const dlhost_optimizer_desc sgd = plain_sgd();
  const int64_t batch = 2;
  GraphBuilder b("profile", batch);
  const int32_t data = b.input("data", DLHOST_DTYPE_F32, {4});
  const int32_t logits = b.fc("head", data, fc(3));
  const int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", logits, labels);
  auto graph = b.finish();
  auto train = [&](int steps) {
    cpu_onednn::Model model(context, graph->view(), sgd, 42);
    const std::vector<float> x(batch * 4, 0.5f);
    const std::vector<int32_t> ids = {0, 2};
    model.set_input(data, x.data(), x.size() * 4);
    model.set_input(labels, ids.data(), ids.size() * 4);
    for (int i = 0; i < steps; ++i) {
      model.forward();
      model.backward(nullptr);
      model.update();
    }
  };
  unsetenv("DLHOST_CPU_ONEDNN_PROFILE");
  testing::internal::CaptureStderr();
  train(1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");

  setenv("DLHOST_CPU_ONEDNN_PROFILE", "1", 1);
  testing::internal::CaptureStderr();
  train(3);
  const std::string printed = testing::internal::GetCapturedStderr();
  unsetenv("DLHOST_CPU_ONEDNN_PROFILE");
  EXPECT_NE(printed.find("cpu_onednn profile: "), std::string::npos) << printed;
  EXPECT_NE(printed.find(" over 3 steps, 1 thread(s)"), std::string::npos) << printed;
  for (const char* step : {"head: ", "loss: log-softmax forward", "update (clipping, optimizer)"})
    EXPECT_NE(printed.find(step), std::string::npos) << step << " missing in\n" << printed;
}

}  // namespace
}  // namespace dlhost
