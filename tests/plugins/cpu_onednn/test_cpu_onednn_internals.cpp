// test_cpu_onednn_internals.cpp — the one white-box test of cpu_onednn, compiled with the
// plugin's own model sources (the cpu_onednn_model library), not loaded through dlopen.
//
// Why white box: batch norm's running mean and variance are state of the backend, not
// parameters. No ABI call reads them and training never uses them (they serve inference), so
// nothing observable through the C table depends on them; only the plugin's Model can be asked.
// Likewise the reuse of activation bytes for gradients (Model::lend_value): what it must not
// change (forward results, gradients, a graph input) is checked here step by step. The step
// profile (DLHOST_CPU_ONEDNN_PROFILE) is a developer's aid of the Model, checked here as well,
// and so are the plugin's own pooling kernels (pooling.h), against oneDNN's pooling on
// geometries and ties the networks do not all reach.
// Everything else about cpu_onednn is tested through the ABI in test_cpu_onednn.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "../../../plugins/cpu_onednn/model.h"
#include "../../../plugins/cpu_onednn/pooling.h"
#include "core/graph.h"
#include "graph_attrs.h"

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

// pooling.h against oneDNN's pooling (forward training; backward, for max with its workspace) on
// the same channel-blocked or channels-last tensors. Max: the outputs bit for bit, and the input
// gradients, which differ only in the order of a few additions; inputs of few distinct values
// make ties in most windows, so a gradient sent to another tied element than oneDNN's first
// maximum fails the test. Average (padding excluded from the count): both within rounding.
TEST(cpu_onednn_internals, OwnPoolingMatchesOneDnn) {
  using dnnl::memory;
  using tag = memory::format_tag;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  struct Geometry {
    int64_t channels, in_h, in_w, kernel, stride, pad, out_h, out_w;
  };
  const Geometry geometries[] = {
      {32, 13, 13, 3, 2, 0, 6, 6},  // floor mode
      {20, 14, 12, 3, 2, 0, 7, 6},  // ceil mode: the last windows clipped; 20 = 16 + 4 lanes
      {16, 9, 9, 3, 2, 1, 5, 5},    // symmetric padding
      {8, 8, 10, 2, 2, 0, 4, 5},    // LeNet's 2x2/2: windows that do not overlap
      {25, 7, 7, 3, 1, 1, 7, 7},    // stride 1: each input under nine windows; 16 + 8 + 1
      {16, 11, 11, 5, 3, 2, 4, 4},  // a wider window
      {3, 6, 6, 2, 2, 0, 3, 3},     // fewer channels than a vector
  };
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> level(-2, 2);
  std::uniform_real_distribution<float> grad(-1.0f, 1.0f);
  for (const bool average : {false, true})
    for (const Geometry& g : geometries)
      for (int64_t block : {8, 16, 0}) {  // 0: channels last
        SCOPED_TRACE(std::string(average ? "average, " : "max, ") + "channels " +
                     std::to_string(g.channels) + ", " + std::to_string(g.in_h) + "x" +
                     std::to_string(g.in_w) + " kernel " + std::to_string(g.kernel) + " stride " +
                     std::to_string(g.stride) + " pad " + std::to_string(g.pad) +
                     (block == 0 ? ", channels last" : ", block " + std::to_string(block)));
        const int64_t n = 3;
        const tag layout = block == 16 ? tag::aBcd16b : block == 8 ? tag::aBcd8b : tag::acdb;
        const memory::desc src_md({n, g.channels, g.in_h, g.in_w}, memory::data_type::f32, layout);
        const memory::desc dst_md({n, g.channels, g.out_h, g.out_w}, memory::data_type::f32,
                                  layout);
        const memory::dims strides{g.stride, g.stride}, kernel{g.kernel, g.kernel},
            pad_l{g.pad, g.pad},
            pad_r{(g.out_h - 1) * g.stride + g.kernel - g.in_h - g.pad,
                  (g.out_w - 1) * g.stride + g.kernel - g.in_w - g.pad};
        const dnnl::algorithm alg =
            average ? dnnl::algorithm::pooling_avg_exclude_padding : dnnl::algorithm::pooling_max;
        dnnl::pooling_forward::primitive_desc fwd(
            dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, alg, src_md, dst_md,
                                        strides, kernel, pad_l, pad_r),
            engine);
        dnnl::pooling_backward::primitive_desc bwd(
            dnnl::pooling_backward::desc(alg, src_md, dst_md, strides, kernel, pad_l, pad_r),
            engine, fwd);
        memory src(src_md, engine), dst(dst_md, engine), ws(fwd.workspace_desc(), engine),
            diff_dst(dst_md, engine), diff_src(src_md, engine);
        // Every byte, channel padding included (zero, as oneDNN keeps it).
        const size_t in_size = src_md.get_size() / 4, out_size = dst_md.get_size() / 4;
        float* x = static_cast<float*>(src.get_data_handle());
        float* dy = static_cast<float*>(diff_dst.get_data_handle());
        std::vector<float> logical(n * g.channels * g.in_h * g.in_w);
        for (float& v : logical) v = static_cast<float>(level(rng));
        memory plain({{n, g.channels, g.in_h, g.in_w}, memory::data_type::f32, tag::nchw}, engine,
                     logical.data());
        dnnl::reorder(plain, src).execute(stream, plain, src);
        std::vector<float> dy_logical(n * g.channels * g.out_h * g.out_w);
        for (float& v : dy_logical) v = grad(rng);
        memory dy_plain({{n, g.channels, g.out_h, g.out_w}, memory::data_type::f32, tag::nchw},
                        engine, dy_logical.data());
        dnnl::reorder(dy_plain, diff_dst).execute(stream, dy_plain, diff_dst);
        dnnl::pooling_forward(fwd).execute(
            stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_WORKSPACE, ws}});
        dnnl::pooling_backward(bwd).execute(stream, {{DNNL_ARG_DIFF_DST, diff_dst},
                                                     {DNNL_ARG_DIFF_SRC, diff_src},
                                                     {DNNL_ARG_WORKSPACE, ws}});
        stream.wait();

        cpu_onednn::PoolShape shape;
        shape.batch = n;
        shape.channels_last = block == 0;
        shape.channels = g.channels;
        shape.block = block;
        shape.channel_blocks = block == 0 ? 1 : (g.channels + block - 1) / block;
        shape.in_h = g.in_h;
        shape.in_w = g.in_w;
        shape.out_h = g.out_h;
        shape.out_w = g.out_w;
        shape.kernel_h = shape.kernel_w = g.kernel;
        shape.stride_h = shape.stride_w = g.stride;
        shape.pad_top = shape.pad_left = g.pad;
        ASSERT_TRUE(cpu_onednn::pool_supported(shape));
        std::vector<float> y(out_size), dx(in_size, std::nanf(""));
        std::vector<uint8_t> argmax(out_size);
        if (average) {
          cpu_onednn::avg_pool_forward(shape, x, y.data());
          cpu_onednn::avg_pool_backward(shape, dy, dx.data());
        } else {
          cpu_onednn::max_pool_forward(shape, x, y.data(), argmax.data());
          cpu_onednn::max_pool_backward(shape, dy, argmax.data(), dx.data());
        }

        const float* want_y = static_cast<const float*>(dst.get_data_handle());
        const float* want_dx = static_cast<const float*>(diff_src.get_data_handle());
        for (size_t i = 0; i < out_size; ++i)
          if (average)
            ASSERT_NEAR(y[i], want_y[i], 1e-6f) << "output " << i;
          else
            ASSERT_EQ(y[i], want_y[i]) << "output " << i;
        for (size_t i = 0; i < in_size; ++i)
          ASSERT_NEAR(dx[i], want_dx[i], 1e-5f) << "input gradient " << i;
      }

  // What the kernels refuse, and the layer leaves to oneDNN.
  cpu_onednn::PoolShape s;
  s.batch = s.channel_blocks = 1;
  s.block = 16;
  s.in_h = s.in_w = 20;
  s.kernel_h = s.kernel_w = 3;
  s.stride_h = s.stride_w = 1;
  s.out_h = s.out_w = 18;
  EXPECT_TRUE(cpu_onednn::pool_supported(s));
  s.block = 4;
  EXPECT_FALSE(cpu_onednn::pool_supported(s)) << "a block of 4 lanes";
  s.block = 16;
  s.kernel_h = s.kernel_w = 17;  // 289 window elements: no byte index
  s.out_h = s.out_w = 4;
  EXPECT_FALSE(cpu_onednn::pool_supported(s)) << "a window of 289 elements";
  s.kernel_h = s.kernel_w = 3;
  s.pad_top = 3;  // the first window all padding
  s.out_h = 24;
  EXPECT_FALSE(cpu_onednn::pool_supported(s)) << "padding as wide as the window";
}

}  // namespace
}  // namespace dlhost
