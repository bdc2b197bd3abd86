// test_cpu_onednn_internals.cpp — the one white-box test of cpu_onednn, compiled with the
// plugin's own model sources (the cpu_onednn_model library), not loaded through dlopen.
//
// Why white box: batch norm's running mean and variance are state of the backend, not
// parameters. No ABI call reads them and training never uses them (they serve inference), so
// nothing observable through the C table depends on them; only the plugin's Model can be asked.
// Everything else about cpu_onednn is tested through the ABI in test_cpu_onednn.cpp.
#include <gtest/gtest.h>

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

TEST(cpu_onednn_internals, BatchNormRunningStatistics) {
  cpu_onednn::Context context;
  context.threads_requested = 1;
  context.apply_threads();
  context.engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
  context.stream = dnnl::stream(context.engine);
  auto sgd = dlhost_optimizer_desc{};
  sgd.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
  sgd.kind = DLHOST_OPTIMIZER_SGD;

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

}  // namespace
}  // namespace dlhost
