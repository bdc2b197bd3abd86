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
// geometries and ties the networks do not all reach. The fusion plan (fusion_plan.h) is the
// backend's choice of fused nodes: which ones it planned for a network, the spans its fused
// layers build, and which fused nodes a compiled model applied or declined, is asked of the
// plan itself.
// Everything else about cpu_onednn is tested through the ABI in test_cpu_onednn.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../../plugins/cpu_onednn/fusion_plan.h"
#include "../../../plugins/cpu_onednn/model.h"
#include "../../../plugins/cpu_onednn/pooling.h"
#include "core/graph.h"
#include "core/host_api.h"  // dlhost_options, which network_plugin.h fills
#include "graph_attrs.h"
#include "network_plugin.h"

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
  context.host.threads = 1;
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

// --- the fusion plan ----------------------------------------------------------------------------

using cpu_onednn::FcStrategyKind;
using cpu_onednn::FusionPlan;
using Names = std::vector<std::string>;

// The plan of `graph` under the host's fused_step (with plain SGD, so SGD may go into the GEMMs)
// or without it: every fused node it lists, "kind label".
Names planned(const dlhost_graph* graph, bool fused_step) {
  cpu_onednn::PlanOptions o;
  o.fused_step = fused_step;
  o.sgd_in_backward = fused_step;
  return FusionPlan(graph, o).planned_list();
}

// The spans of that plan: each one fused layer's nodes.
Names spans(const dlhost_graph* graph, bool fused_step) {
  cpu_onednn::PlanOptions o;
  o.fused_step = fused_step;
  o.sgd_in_backward = fused_step;
  return FusionPlan(graph, o).span_list();
}

// The fused nodes of `kind` in `list`.
Names of_kind(const Names& list, const std::string& kind) {
  Names out;
  for (const std::string& s : list)
    if (s.rfind(kind + " ", 0) == 0) out.push_back(s.substr(kind.size() + 1));
  return out;
}

class FusionPlanOfNetworks
    : public test_networks::NetworkPluginTest<test_networks::kPaperNetworks> {};

// FCN-5: FC and sigmoid only: nothing to fuse in the split step; under fused_step every FC's
// backward applies SGD and the loss makes its gradient in forward, its column sums the last
// FC's bias gradient: fc4 and the loss are one fused layer.
TEST_F(FusionPlanOfNetworks, Fcn5) {
  const auto graph = build("fcn5");
  EXPECT_EQ(planned(graph->view(), false), Names{});
  EXPECT_EQ(spans(graph->view(), false), Names{});
  EXPECT_EQ(planned(graph->view(), true),
            (Names{"fc backward+sgd fc1", "fc backward+sgd fc2", "fc backward+sgd fc3",
                   "fc backward+sgd fc4", "xent gradient in forward loss",
                   "xent column sums -> fc bias fc4+loss"}));
  EXPECT_EQ(spans(graph->view(), true), (Names{"fc1", "fc2", "fc3", "fc4+loss"}));
}

// LeNet: its convolutions go straight into max pools and its ReLU follows an FC, which has no
// ReLU fusion here: the split step fuses nothing.
TEST_F(FusionPlanOfNetworks, LeNet) {
  const auto graph = build("lenet");
  EXPECT_EQ(planned(graph->view(), false), Names{});
  EXPECT_EQ(planned(graph->view(), true),
            (Names{"fc backward+sgd fc3", "fc backward+sgd fc4", "xent gradient in forward loss",
                   "xent column sums -> fc bias fc4+loss"}));
  EXPECT_EQ(spans(graph->view(), true), (Names{"fc3", "fc4+loss"}));
}

// AlexNet-R: conv2 and conv3 each feed only their ReLU; relu2 feeds only a max pool. relu1
// follows a pool (no producer to fuse into) and pool3 is an average pool. relu2 is in two fused
// nodes: conv2, relu2 and pool2 are one fused layer.
TEST_F(FusionPlanOfNetworks, AlexNetR) {
  const auto graph = build("alexnet_r");
  EXPECT_EQ(planned(graph->view(), false),
            (Names{"conv+relu conv2+relu2", "relu+maxpool backward relu2+pool2",
                   "conv+relu conv3+relu3"}));
  EXPECT_EQ(spans(graph->view(), false), (Names{"conv2+relu2+pool2", "conv3+relu3"}));
}

// ResNet-56 (DLBench's "BN after add"): every block's first batch norm feeds its ReLU, fused;
// the batch norm after each residual add has no ReLU behind it and stays plain.
TEST_F(FusionPlanOfNetworks, ResNet56) {
  for (const std::string variant : {"dlbench", "he"}) {
    SCOPED_TRACE(variant);
    const auto graph = build("resnet56", 1, {{"variant", variant}});
    const Names all = planned(graph->view(), false);
    const Names bn_relu = of_kind(all, "bnorm+relu");
    EXPECT_EQ(all.size(), bn_relu.size()) << "only bnorm+relu: " << testing::PrintToString(all);
    ASSERT_EQ(bn_relu.size(), 28u) << "conv1 and the 27 blocks' first batch norms";
    EXPECT_EQ(bn_relu[0], "conv1_bn+conv1_relu");
    EXPECT_EQ(bn_relu[1], "res1_1_a_bn+res1_1_a_relu");
    EXPECT_EQ(bn_relu[27], "res3_9_a_bn+res3_9_a_relu");
    EXPECT_EQ(spans(graph->view(), false), bn_relu) << "one fused layer per batch norm + ReLU";
  }
}

// Where a fusion must not apply the plan keeps the plain nodes: a ReLU whose output is read
// twice (by a max pool and a residual add), a convolution whose output is read besides its ReLU,
// a batch norm followed by no ReLU, a sigmoid before a max pool, a loss on logits read twice.
TEST(cpu_onednn_internals, FusionPlanKeepsPlainNodesWhereAFusionMustNotApply) {
  GraphBuilder b("no_fusion", 2);
  const int32_t data = b.input("data", DLHOST_DTYPE_F32, {4, 8, 8});
  const int32_t c1 = b.conv2d("conv1", data, conv(4, 3, 1, 1));
  const int32_t r1 = b.activation("relu1", c1, act(DLHOST_ACTIVATION_RELU));
  const int32_t p1 = b.pool2d("pool1", r1, pool(DLHOST_POOL_MAX, 1, 1, 0, false, false));
  const int32_t sum = b.add("res1", p1, r1);  // relu1 read twice
  const int32_t c2 = b.conv2d("conv2", sum, conv(4, 3, 1, 1));
  const int32_t r2 = b.activation("relu2", c2, act(DLHOST_ACTIVATION_RELU));
  const int32_t sum2 = b.add("res2", r2, c2);          // conv2 read besides relu2
  const int32_t n1 = b.batch_norm("bn1", sum2, bn());  // no ReLU behind it
  const int32_t s1 = b.activation("sig1", n1, act(DLHOST_ACTIVATION_SIGMOID));
  const int32_t p2 = b.pool2d("pool2", s1, pool(DLHOST_POOL_MAX, 2, 2, 0, false, false));
  const int32_t n2 = b.batch_norm("bn2", p2, bn());
  const int32_t r3 = b.activation("relu3", n2, act(DLHOST_ACTIVATION_RELU));
  const int32_t sum3 = b.add("res3", r3, n2);  // bn2 read besides relu3
  const int32_t logits = b.fc("head", sum3, fc(3));
  const int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", logits, labels);
  b.add("probe", logits, logits);  // the logits read twice
  auto graph = b.finish();
  // conv1 -> relu1 is the one fusion left: relu1's second reader is no obstacle to a post-op.
  EXPECT_EQ(planned(graph->view(), false), Names{"conv+relu conv1+relu1"});
  // Under fused_step the FC's SGD and the loss's gradient in forward join it; the column sums
  // need the loss to be the logits' only reader.
  EXPECT_EQ(planned(graph->view(), true), (Names{"conv+relu conv1+relu1", "fc backward+sgd head",
                                                 "xent gradient in forward loss"}));
  EXPECT_EQ(spans(graph->view(), true), (Names{"conv1+relu1", "head", "loss"}));
}

// A fused node's nodes need not be neighbours: here the labels' input node stands between the FC
// and its loss (as in test_cpu_onednn's cross-entropy problem), and the FC, its loss and the
// column sums between them are still one fused layer, which builds each node at its own place.
TEST(cpu_onednn_internals, FusedNodeOfNodesApartIsOneLayer) {
  cpu_onednn::Context context = one_thread_context();
  GraphBuilder b("apart", 64);
  const int32_t data = b.input("data", DLHOST_DTYPE_F32, {16});
  const int32_t logits = b.fc("head", data, fc(10));
  const int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", logits, labels);
  auto graph = b.finish();
  EXPECT_EQ(spans(graph->view(), true), Names{"head+loss"});
  cpu_onednn::Model model(context, graph->view(), plain_sgd(), 42, false, true);
  EXPECT_EQ(model.plan().applied_list(),
            (Names{"fc backward+sgd head", "xent gradient in forward loss",
                   "xent column sums -> fc bias head+loss"}))
      << model.plan().describe();
}

// The FC strategy rule (FcLayer's measurements): bf16 always matmuls; a plain source goes to
// the GEMMs from 256 rows, at 2+ threads where the blocked inner product does not scale, and
// under fused SGD; a blocked source stays with the inner product.
TEST(cpu_onednn_internals, FcStrategyRule) {
  cpu_onednn::FcFacts f;
  f.plain_source = true;
  f.rows = 64;
  EXPECT_EQ(choose_fc_strategy(f), FcStrategyKind::kBlockedInnerProduct);
  f.rows = cpu_onednn::kFcGemmMinRows;
  EXPECT_EQ(choose_fc_strategy(f), FcStrategyKind::kGemm);
  f.rows = 64;
  f.threads = 2;
  EXPECT_EQ(choose_fc_strategy(f), FcStrategyKind::kGemm);
  f.blocked_scales = true;
  EXPECT_EQ(choose_fc_strategy(f), FcStrategyKind::kBlockedInnerProduct);
  f.sgd_in_backward = true;
  EXPECT_EQ(choose_fc_strategy(f), FcStrategyKind::kGemm);
  f.plain_source = false;
  EXPECT_EQ(choose_fc_strategy(f), FcStrategyKind::kBlockedInnerProduct);
  f.bf16 = true;
  EXPECT_EQ(choose_fc_strategy(f), FcStrategyKind::kBf16Matmul);
}

// A compiled model's plan says what it built: under fused_step with plain SGD an MLP's FCs (a
// plain source) apply SGD in their GEMMs, the loss makes its gradient and the head's bias
// gradient in forward, update() leaves those parameters to the backward, and every FC is a
// GEMM. Without fused_step nothing is fused and the FCs of 64 rows at 1 thread keep the blocked
// inner product.
TEST(cpu_onednn_internals, CompiledModelPlanSaysWhatItBuilt) {
  cpu_onednn::Context context = one_thread_context();
  GraphBuilder b("mlp", 64);
  const int32_t data = b.input("data", DLHOST_DTYPE_F32, {16});
  const int32_t h = b.activation("act1", b.fc("fc1", data, fc(32)), act(DLHOST_ACTIVATION_SIGMOID));
  const int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", b.fc("fc2", h, fc(10)), labels);
  auto graph = b.finish();
  {
    cpu_onednn::Model model(context, graph->view(), sgd(0.1f, 0.9f), 42, false, true);
    const FusionPlan& plan = model.plan();
    EXPECT_EQ(plan.applied_list(),
              (Names{"fc backward+sgd fc1", "fc backward+sgd fc2", "xent gradient in forward loss",
                     "xent column sums -> fc bias fc2+loss"}))
        << plan.describe();
    for (int32_t p = 0; p < graph->num_params(); ++p)
      EXPECT_TRUE(plan.updated_in_backward(p)) << graph->param(p).name;
    EXPECT_NE(plan.describe().find("fc fc1: gemm\nfc fc2: gemm\n"), std::string::npos)
        << plan.describe();
  }
  {
    cpu_onednn::Model model(context, graph->view(), sgd(0.1f, 0.9f), 42);
    EXPECT_EQ(model.plan().applied_list(), Names{}) << model.plan().describe();
    EXPECT_FALSE(model.plan().updated_in_backward(0));
    EXPECT_NE(model.plan().describe().find("fc fc1: blocked inner product"), std::string::npos)
        << model.plan().describe();
  }
}

// A batch norm -> ReLU -> max pool block compiles with every planned fusion applied or declined
// with its reason (oneDNN decides whether its kernels keep the fused forms): none is left open.
// The same block trained with the ReLU's output read twice plans none of them.
TEST(cpu_onednn_internals, CompiledModelResolvesEveryPlannedFusion) {
  cpu_onednn::Context context = one_thread_context();
  for (bool read_twice : {false, true}) {
    SCOPED_TRACE(read_twice);
    GraphBuilder b("block", 4);
    const int32_t data = b.input("data", DLHOST_DTYPE_F32, {3, 8, 8});
    const int32_t c = b.conv2d("conv1", data, conv(8, 3, 1, 1));
    const int32_t r =
        b.activation("relu1", b.batch_norm("bn1", c, bn()), act(DLHOST_ACTIVATION_RELU));
    int32_t x = b.pool2d("pool1", r, pool(DLHOST_POOL_MAX, 2, 2, 0, false, false));
    if (read_twice)
      x = b.add("res", x, b.pool2d("pool2", r, pool(DLHOST_POOL_AVG, 2, 2, 0, false, false)));
    const int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
    b.softmax_cross_entropy("loss", b.fc("head", x, fc(5)), labels);
    auto graph = b.finish();
    cpu_onednn::Model model(context, graph->view(), plain_sgd(), 42);
    const FusionPlan& plan = model.plan();
    const Names want = read_twice
                           ? Names{"bnorm+relu bn1+relu1"}
                           : Names{"bnorm+relu bn1+relu1", "relu+maxpool backward relu1+pool1"};
    EXPECT_EQ(plan.planned_list(), want);
    EXPECT_EQ(plan.span_list(), read_twice ? Names{"bn1+relu1"} : Names{"bn1+relu1+pool1"});
    for (const cpu_onednn::FusedNode& f : plan.fused()) {
      EXPECT_NE(f.state, cpu_onednn::FusionState::kPlanned) << f.label;
      if (f.state == cpu_onednn::FusionState::kDeclined) {
        EXPECT_FALSE(f.why_declined.empty()) << f.label;
      }
    }
  }
}

}  // namespace
}  // namespace dlhost
