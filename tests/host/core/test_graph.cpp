// test_graph.cpp — the host-owned graph IR: parameter counts of the seed networks (built through
// their plugin), shape inference and its error messages, FLOP counting, the C builder table.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/graph.h"
#include "core/host_api.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "graph_attrs.h"
#include "network_plugin.h"

namespace {

using dlhost::Error;
using dlhost::GraphBuilder;

class SeedNetworks
    : public dlhost::test_networks::NetworkPluginTest<dlhost::test_networks::kPaperNetworks> {};

// The counts of docs/networks.md (each derived there from the layer sizes).
TEST_F(SeedNetworks, ParameterCountsMatchThePaper) {
  EXPECT_EQ(build("fcn5")->param_count(), 117997696);
  EXPECT_EQ(build("fcn8")->param_count(), 130586752);
  EXPECT_EQ(build("fcnr")->param_count(), 14205962);
  EXPECT_EQ(build("lenet")->param_count(), 431080);
  EXPECT_EQ(build("autoencoder")->param_count(), 2837314);
  EXPECT_EQ(build("alexnet")->param_count(), 62378344);
  EXPECT_EQ(build("alexnet_r")->param_count(), 89578);
  EXPECT_EQ(build("resnet56")->param_count(), 855578);
  EXPECT_EQ(build("resnet50")->param_count(), 25557032);
  EXPECT_EQ(build("lstm32")->param_count(), 6180624);
  EXPECT_EQ(build("lstm64")->param_count(), 6180624);
  EXPECT_EQ(build("lstm_ptb")->param_count(), 6180624);
}

// Where the paper's tools differed, the other choice is an option with its own count.
TEST_F(SeedNetworks, VariantsAreOptions) {
  EXPECT_EQ(build("alexnet_r", 1, {{"pool_ceil", "false"}})->param_count(), 85098);
  EXPECT_EQ(build("resnet56", 1, {{"variant", "he"}})->param_count(), 855770);
  // AlexNet without conv1 padding: 5x5 pool5, so fc6 takes 256*25 inputs.
  EXPECT_EQ(build("alexnet", 1, {{"conv1_pad", "0"}})->param_count(),
            62378344 - (256 * 36 - 256 * 25) * 4096);
  try {
    build("resnet56", 1, {{"variant", "wide"}});
    FAIL() << "bad option accepted";
  } catch (const dlhost::Error& e) {
    EXPECT_NE(std::string(e.what()).find("option 'variant' must be 'dlbench' or 'he', got 'wide'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(SeedNetworks, SequenceShapes) {
  auto g = build("lstm64", 4);
  EXPECT_EQ(g->input_shape(), "64 ids");
  EXPECT_EQ(g->tokens_per_sample(), 64);  // the sequence length: tokens/s in the record
  const auto& loss = g->node(g->view()->num_nodes - 1);
  ASSERT_EQ(loss.op, DLHOST_OP_SOFTMAX_CROSS_ENTROPY);
  const auto& logits = g->tensor(loss.inputs[0]);
  ASSERT_EQ(logits.rank, 3);
  EXPECT_EQ(logits.dims[0], 4);
  EXPECT_EQ(logits.dims[1], 64);
  EXPECT_EQ(logits.dims[2], 10000);
  // FLOPs scale with the sequence length.
  EXPECT_NEAR(g->forward_flops_per_sample(), 2 * build("lstm32", 4)->forward_flops_per_sample(),
              1.0);
}

TEST_F(SeedNetworks, ResNetShapes) {
  auto g = build("resnet50", 2);
  const dlhost_graph* v = g->view();
  int adds = 0, bns = 0;
  for (int32_t i = 0; i < v->num_nodes; ++i) {
    adds += v->nodes[i]->op == DLHOST_OP_ADD;
    bns += v->nodes[i]->op == DLHOST_OP_BATCH_NORM;
  }
  EXPECT_EQ(adds, 16);
  EXPECT_EQ(bns, 53);
  const auto& pooled = g->tensor(v->nodes[v->num_nodes - 3]->output);  // global average pool
  EXPECT_EQ(pooled.rank, 2);
  EXPECT_EQ(pooled.dims[1], 2048);
}

TEST_F(SeedNetworks, LeNetShapesAndFlops) {
  auto g = build("lenet", 8);
  EXPECT_EQ(g->input_shape(), "1x28x28");
  EXPECT_EQ(g->tokens_per_sample(), 0);  // no token ids, no tokens
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

using dlhost::test_attrs::conv;

// Max pooling without count_include_pad, the form these shape tests use.
dlhost_pool2d_attrs pool(int64_t k, int64_t s, bool ceil_mode, int64_t pad = 0) {
  return dlhost::test_attrs::pool(DLHOST_POOL_MAX, k, s, pad, ceil_mode, false);
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

TEST(GraphBuilderShapes, Ops11) {
  GraphBuilder b("t", 2);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {4, 5, 5});
  dlhost_batch_norm_attrs bn{DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE, 1e-5f, 0.1f};
  int32_t y = b.batch_norm("bn", x, bn);
  EXPECT_EQ(error_of([&] { b.add("bad_add", y, b.global_avg_pool("gap", y)); }),
            "layer 'bad_add': adds F32 tensors of one shape, got 2x4x5x5 and 2x4");
  dlhost_lrn_attrs even{DLHOST_LRN_ATTRS_STRUCT_SIZE, 4, 1e-4f, 0.75f, 1.0f};
  EXPECT_EQ(error_of([&] { b.lrn("lrn", y, even); }), "layer 'lrn': size must be odd and > 0");
  dlhost_dropout_attrs one{DLHOST_DROPOUT_ATTRS_STRUCT_SIZE, 1.0f};
  EXPECT_EQ(error_of([&] { b.dropout("drop", y, one); }),
            "layer 'drop': probability must be in [0, 1)");
  int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {3});
  dlhost_embedding_attrs emb{DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE, 7, 6};
  int32_t e = b.embedding("emb", ids, emb);
  dlhost_lstm_attrs lstm{DLHOST_LSTM_ATTRS_STRUCT_SIZE, 5, 2};
  int32_t h = b.lstm("lstm", e, lstm);
  dlhost_fc_attrs step{DLHOST_FC_ATTRS_STRUCT_SIZE, 7, 1, 2};
  int32_t logits = b.fc("dec", h, step);
  int32_t next = b.input("next", DLHOST_DTYPE_I32, {3});
  EXPECT_EQ(error_of([&] { b.softmax_cross_entropy("bad_loss", logits, x); }),
            "layer 'bad_loss': labels must be I32 of the logits' shape without the class dimension "
            "(logits 2x3x7, labels 2x4x5x5)");
  b.softmax_cross_entropy("loss", logits, next);
  auto g = b.finish();
  EXPECT_EQ(g->tensor(h).dims[2], 5);
  EXPECT_EQ(g->tensor(logits).rank, 3);
  // bn: 4 + 4; embedding 7*6; lstm: (4*5*6 + 4*5*5 + 4*5) + (4*5*5 + 4*5*5 + 4*5); dec 5*7 + 7.
  EXPECT_EQ(g->param_count(), 8 + 42 + (120 + 100 + 20) + (100 + 100 + 20) + 42);
  EXPECT_STREQ(g->param(3).name, "lstm.l0.weight");
  EXPECT_STREQ(g->param(4).name, "lstm.l0.weight_iter");
  EXPECT_STREQ(g->param(5).name, "lstm.l0.bias");
}

TEST(GraphBuilderCTable, OldFcAttrsStillWork) {
  // A 1.0 plugin's fc attrs end at has_bias; the host must default batch_dims.
  GraphBuilder b("t", 2);
  int32_t x = b.input("data", DLHOST_DTYPE_F32, {3, 4});
  dlhost_fc_attrs old{DLHOST_FC_ATTRS_STRUCT_SIZE_1_0, 5, 1, 77};  // 77: past its struct_size
  int32_t out = -1;
  ASSERT_EQ(GraphBuilder::c_api()->fc(b.c_handle(), "fc", x, &old, &out), nullptr);
  b.mse_loss("loss", out, out);
  auto g = b.finish();
  EXPECT_EQ(g->tensor(out).rank, 2);
  EXPECT_EQ(g->tensor(out).dims[1], 5);
}

}  // namespace
