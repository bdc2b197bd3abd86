// test_graph.cpp — the host-owned graph IR: parameter counts of the seed networks (built through
// their plugin), shape inference and its error messages, FLOP counting, the C builder table.
#include <gtest/gtest.h>

#include <string>

#include "graph.h"
#include "host_api.h"
#include "networks.h"
#include "plugin_registry.h"

namespace {

using dlhost::Error;
using dlhost::GraphBuilder;

class SeedNetworks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry = new dlhost::PluginRegistry;
    registry->load_file(std::string(DLHOST_TEST_PLUGIN_DIR) + "/libdlhost_networks_paper.so");
    networks = new std::vector<dlhost::NetworkRef>(dlhost::list_networks(*registry));
  }
  std::unique_ptr<dlhost::Graph> build(const std::string& name, int64_t batch = 1) {
    const auto* ref = dlhost::find_network(*networks, name);
    if (ref == nullptr) throw std::runtime_error("no network " + name);
    dlhost_options none;
    return dlhost::build_network(*ref->plugin, ref->index, batch, &none);
  }
  static dlhost::PluginRegistry* registry;
  static std::vector<dlhost::NetworkRef>* networks;
};
dlhost::PluginRegistry* SeedNetworks::registry = nullptr;
std::vector<dlhost::NetworkRef>* SeedNetworks::networks = nullptr;

// The counts of shared/paper/NETWORKS.md.
TEST_F(SeedNetworks, ParameterCountsMatchThePaper) {
  EXPECT_EQ(build("fcn5")->param_count(), 117997696);
  EXPECT_EQ(build("fcn8")->param_count(), 130586752);
  EXPECT_EQ(build("fcnr")->param_count(), 14205962);
  EXPECT_EQ(build("lenet")->param_count(), 431080);
  EXPECT_EQ(build("autoencoder")->param_count(), 2837314);
}

TEST_F(SeedNetworks, LeNetShapesAndFlops) {
  auto g = build("lenet", 8);
  EXPECT_EQ(g->input_shape(), "1x28x28");
  const dlhost_graph* v = g->view();
  // conv1 -> 8x20x24x24, pool1 -> 12x12, conv2 -> 8x50x8x8, pool2 -> 4x4.
  int32_t conv2 = -1;
  for (int32_t i = 0; i < v->num_nodes; ++i)
    if (std::string(v->nodes[i]->name) == "conv2") conv2 = v->nodes[i]->output;
  ASSERT_GE(conv2, 0);
  const auto& t = g->tensor(conv2);
  EXPECT_EQ(t.rank, 4);
  EXPECT_EQ(t.dims[0], 8);
  EXPECT_EQ(t.dims[1], 50);
  EXPECT_EQ(t.dims[2], 8);
  EXPECT_EQ(t.dims[3], 8);
  // conv1 forward per sample: 2 * (20*24*24) * (1*5*5) multiply-adds + 20*24*24 bias adds.
  double conv1 = 2.0 * 20 * 24 * 24 * 25 + 20 * 24 * 24;
  double conv2_flops = 2.0 * 50 * 8 * 8 * 20 * 25 + 50 * 8 * 8;
  double fc3 = 2.0 * 800 * 500 + 500, fc4 = 2.0 * 500 * 10 + 10;
  EXPECT_GT(g->forward_flops_per_sample(), conv1 + conv2_flops + fc3 + fc4);
  EXPECT_LT(g->forward_flops_per_sample(), (conv1 + conv2_flops + fc3 + fc4) * 1.05);
}

TEST_F(SeedNetworks, ParamsHaveCanonicalLayouts) {
  auto g = build("lenet");
  const auto& w = g->param(0);
  EXPECT_STREQ(w.name, "conv1.weight");
  EXPECT_EQ(w.rank, 4);
  EXPECT_EQ(w.dims[0], 20);
  EXPECT_EQ(w.dims[1], 1);
  EXPECT_EQ(w.dims[2], 5);
  EXPECT_EQ(w.dims[3], 5);
  EXPECT_EQ(g->param(1).role, DLHOST_PARAM_BIAS);
  const auto& fc3 = g->param(4);
  EXPECT_STREQ(fc3.name, "fc3.weight");
  EXPECT_EQ(fc3.dims[0], 500);
  EXPECT_EQ(fc3.dims[1], 800);
}

dlhost_conv2d_attrs conv(int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  dlhost_conv2d_attrs a{};
  a.struct_size = DLHOST_CONV2D_ATTRS_STRUCT_SIZE;
  a.out_channels = out;
  a.kernel_h = a.kernel_w = k;
  a.stride_h = a.stride_w = stride;
  a.pad_h = a.pad_w = pad;
  a.dilation_h = a.dilation_w = 1;
  a.groups = 1;
  a.has_bias = 1;
  return a;
}

dlhost_pool2d_attrs pool(int64_t k, int64_t s, bool ceil_mode, int64_t pad = 0) {
  dlhost_pool2d_attrs a{};
  a.struct_size = DLHOST_POOL2D_ATTRS_STRUCT_SIZE;
  a.kind = DLHOST_POOL_MAX;
  a.kernel_h = a.kernel_w = k;
  a.stride_h = a.stride_w = s;
  a.pad_h = a.pad_w = pad;
  a.ceil_mode = ceil_mode;
  return a;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(GraphBuilderShapes, PoolingFloorAndCeilModes) {
  GraphBuilder b("t", 2);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {3, 32, 32});
  // AlexNet-R's pools: 32 -> k3 s2: floor 15, ceil 16.
  EXPECT_EQ(b.pool2d("floor", x, pool(3, 2, false)), 1);
  EXPECT_EQ(b.pool2d("ceil", x, pool(3, 2, true)), 2);
  GraphBuilder c("t", 1);
  int32_t y = c.input("data", DLHOST_DTYPE_F32, {1, 32, 32});
  int32_t f = c.pool2d("floor", y, pool(3, 2, false));
  int32_t e = c.pool2d("ceil", y, pool(3, 2, true));
  // Ceil with padding: the last window may not start in the right padding (PyTorch's rule):
  // 6 -> k2 s2 p1 ceil gives 4, not 5.
  int32_t p =
      c.pool2d("ceil_pad", c.input("small", DLHOST_DTYPE_F32, {1, 6, 6}), pool(2, 2, true, 1));
  int32_t lbl = c.input("labels", DLHOST_DTYPE_I32, {});
  dlhost_fc_attrs fc{DLHOST_FC_ATTRS_STRUCT_SIZE, 10, 1, 1};
  c.softmax_cross_entropy("loss", c.fc("fc", e, fc), lbl);
  auto g = c.finish();
  EXPECT_EQ(g->tensor(f).dims[2], 15);
  EXPECT_EQ(g->tensor(e).dims[2], 16);
  EXPECT_EQ(g->tensor(p).dims[2], 4);
}

TEST(GraphBuilderShapes, ErrorsNameTheLayerAndShapes) {
  GraphBuilder b("t", 4);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {1, 4, 4});
  int32_t labels = b.input("labels", DLHOST_DTYPE_I32, {});
  EXPECT_EQ(error_of([&] { b.conv2d("big", x, conv(8, 7)); }),
            "layer 'big': kernel 7x7 (dilated) larger than the padded input 4x4 (input 4x1x4x4)");
  EXPECT_EQ(error_of([&] {
              b.fc("on_labels", labels, {DLHOST_FC_ATTRS_STRUCT_SIZE, 3, 1, 1});
            }),
            "layer 'on_labels': needs an F32 input of rank >= 2, got 4");
  EXPECT_EQ(error_of([&] { b.conv2d("data", x, conv(8, 3)); }),
            "layer 'data': name already used by another layer");
  EXPECT_EQ(error_of([&] { b.pool2d("p", 99, pool(2, 2, false)); }),
            "layer 'p': input tensor id 99 does not exist");
  dlhost_conv2d_attrs grouped = conv(6, 3);
  grouped.groups = 4;
  EXPECT_EQ(error_of([&] { b.conv2d("g", x, grouped); }),
            "layer 'g': groups 4 must divide input channels 1 and output channels 6");
  EXPECT_EQ(error_of([&] { b.finish(); }), "network 't' has no loss layer");
}

TEST(GraphBuilderShapes, OneLossOnly) {
  GraphBuilder b("t", 2);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {5});
  b.mse_loss("loss", x, x);
  EXPECT_EQ(error_of([&] { b.mse_loss("loss2", x, x); }),
            "layer 'loss2': the graph already has a loss");
}

TEST(GraphBuilderCTable, ErrorsComeBackAsStatus) {
  GraphBuilder b("t", 2);
  const dlhost_builder_api* api = GraphBuilder::c_api();
  int32_t x = -1;
  int64_t dims[] = {3, 8, 8};
  ASSERT_EQ(api->input(b.c_handle(), "data", DLHOST_DTYPE_F32, 3, dims, &x), nullptr);
  dlhost_conv2d_attrs old = conv(4, 3);
  old.struct_size = 8;  // an attrs struct older than v1.0 is refused, not read past its end
  int32_t out = 12345;
  dlhost::StatusPtr s(api->conv2d(b.c_handle(), "c", x, &old, &out));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->code, DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(s->message, "conv2d attrs missing or smaller than ABI 1.0's");
  EXPECT_EQ(out, 12345);  // out-parameters untouched on error
}

}  // namespace
