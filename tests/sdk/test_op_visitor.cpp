// test_op_visitor.cpp — the SDK's per-op visitor (op_visitor.hpp) on hand-made nodes, with no host
// and no graph: every op of dlhost_graph.h reaches the method of its name with its own attribute
// struct, an op without a method is UNIMPLEMENTED naming the plugin, the op and the node (and an op
// outside the list likewise), truncated or absent attributes are refused before any method runs,
// and the methods get the backend's own view of the node when it passes one.
#include <gtest/gtest.h>

#include <string>

#include "dlhost/op_visitor.hpp"

namespace {

namespace sdk = dlhost::sdk;

// One attribute struct of every op, each at its full size.
struct AllAttrs {
  dlhost_fc_attrs fc = sdk::make_struct<dlhost_fc_attrs>(DLHOST_FC_ATTRS_STRUCT_SIZE);
  dlhost_conv2d_attrs conv2d =
      sdk::make_struct<dlhost_conv2d_attrs>(DLHOST_CONV2D_ATTRS_STRUCT_SIZE);
  dlhost_pool2d_attrs pool2d =
      sdk::make_struct<dlhost_pool2d_attrs>(DLHOST_POOL2D_ATTRS_STRUCT_SIZE);
  dlhost_activation_attrs activation =
      sdk::make_struct<dlhost_activation_attrs>(DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE);
  dlhost_batch_norm_attrs batch_norm =
      sdk::make_struct<dlhost_batch_norm_attrs>(DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE);
  dlhost_dropout_attrs dropout =
      sdk::make_struct<dlhost_dropout_attrs>(DLHOST_DROPOUT_ATTRS_STRUCT_SIZE);
  dlhost_lrn_attrs lrn = sdk::make_struct<dlhost_lrn_attrs>(DLHOST_LRN_ATTRS_STRUCT_SIZE);
  dlhost_embedding_attrs embedding =
      sdk::make_struct<dlhost_embedding_attrs>(DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE);
  dlhost_lstm_attrs lstm = sdk::make_struct<dlhost_lstm_attrs>(DLHOST_LSTM_ATTRS_STRUCT_SIZE);
  dlhost_layer_norm_attrs layer_norm =
      sdk::make_struct<dlhost_layer_norm_attrs>(DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE);
  dlhost_gelu_attrs gelu = sdk::make_struct<dlhost_gelu_attrs>(DLHOST_GELU_ATTRS_STRUCT_SIZE);
  dlhost_attention_attrs attention =
      sdk::make_struct<dlhost_attention_attrs>(DLHOST_ATTENTION_ATTRS_STRUCT_SIZE);
  dlhost_position_embedding_attrs position_embedding =
      sdk::make_struct<dlhost_position_embedding_attrs>(
          DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE);
  dlhost_tied_fc_attrs tied_fc =
      sdk::make_struct<dlhost_tied_fc_attrs>(DLHOST_TIED_FC_ATTRS_STRUCT_SIZE);

  // The struct dlhost_graph.h gives `op`; NULL for the ops without attributes.
  const void* of(int32_t op) const {
    switch (op) {
      case DLHOST_OP_FC:
        return &fc;
      case DLHOST_OP_CONV2D:
        return &conv2d;
      case DLHOST_OP_POOL2D:
        return &pool2d;
      case DLHOST_OP_ACTIVATION:
        return &activation;
      case DLHOST_OP_BATCH_NORM:
        return &batch_norm;
      case DLHOST_OP_DROPOUT:
        return &dropout;
      case DLHOST_OP_LRN:
        return &lrn;
      case DLHOST_OP_EMBEDDING:
        return &embedding;
      case DLHOST_OP_LSTM:
        return &lstm;
      case DLHOST_OP_LAYER_NORM:
        return &layer_norm;
      case DLHOST_OP_GELU:
        return &gelu;
      case DLHOST_OP_ATTENTION:
        return &attention;
      case DLHOST_OP_POSITION_EMBEDDING:
        return &position_embedding;
      case DLHOST_OP_TIED_FC:
        return &tied_fc;
      default:
        return nullptr;
    }
  }
};

dlhost_node node_of(int32_t op, const char* name, const void* attrs) {
  auto n = sdk::make_struct<dlhost_node>(DLHOST_NODE_STRUCT_SIZE);
  n.op = op;
  n.name = name;
  n.attrs = attrs;
  return n;
}

// Every method: its own name, and the attributes it got in `attrs`.
class Recorder final : public sdk::OpVisitor<std::string> {
 public:
  const void* attrs = nullptr;
  const dlhost_node* node = nullptr;

 private:
  std::string seen(const char* method, const dlhost_node& n, const void* a) {
    node = &n;
    attrs = a;
    return method;
  }
#define DLHOST_TEST_RECORD(method, Attrs) \
  std::string method(const dlhost_node& n, const Attrs& a) override { return seen(#method, n, &a); }
#define DLHOST_TEST_RECORD_BARE(method) \
  std::string method(const dlhost_node& n) override { return seen(#method, n, nullptr); }
  DLHOST_TEST_RECORD_BARE(input)
  DLHOST_TEST_RECORD(fc, dlhost_fc_attrs)
  DLHOST_TEST_RECORD(conv2d, dlhost_conv2d_attrs)
  DLHOST_TEST_RECORD(pool2d, dlhost_pool2d_attrs)
  DLHOST_TEST_RECORD(activation, dlhost_activation_attrs)
  DLHOST_TEST_RECORD_BARE(softmax_cross_entropy)
  DLHOST_TEST_RECORD_BARE(mse_loss)
  DLHOST_TEST_RECORD(batch_norm, dlhost_batch_norm_attrs)
  DLHOST_TEST_RECORD(dropout, dlhost_dropout_attrs)
  DLHOST_TEST_RECORD_BARE(add)
  DLHOST_TEST_RECORD(lrn, dlhost_lrn_attrs)
  DLHOST_TEST_RECORD(embedding, dlhost_embedding_attrs)
  DLHOST_TEST_RECORD(lstm, dlhost_lstm_attrs)
  DLHOST_TEST_RECORD_BARE(global_avg_pool)
  DLHOST_TEST_RECORD(layer_norm, dlhost_layer_norm_attrs)
  DLHOST_TEST_RECORD(gelu, dlhost_gelu_attrs)
  DLHOST_TEST_RECORD(attention, dlhost_attention_attrs)
  DLHOST_TEST_RECORD(position_embedding, dlhost_position_embedding_attrs)
  DLHOST_TEST_RECORD(tied_fc, dlhost_tied_fc_attrs)
#undef DLHOST_TEST_RECORD
#undef DLHOST_TEST_RECORD_BARE
};

// A backend that lowers two ops: the others keep the visitor's default.
class TwoOps final : public sdk::OpVisitor<int> {
  int conv2d(const dlhost_node&, const dlhost_conv2d_attrs& a) override {
    return int(a.out_channels);
  }
  int add(const dlhost_node&) override { return -1; }
};

// The error a call throws: its code and message (code OK when nothing is thrown).
struct Thrown {
  int32_t code = DLHOST_CODE_OK;
  std::string message;
};
template <class F>
Thrown thrown_by(F f) {
  try {
    f();
  } catch (const sdk::Error& e) {
    return {e.code(), e.what()};
  }
  return {};
}

// The plugin's name as the entry sets it, for the messages; the default restored after.
class PluginName {
 public:
  explicit PluginName(const char* name) : saved_(sdk::detail::plugin_name()) {
    sdk::detail::plugin_name() = name;
  }
  ~PluginName() { sdk::detail::plugin_name() = saved_; }
  PluginName(const PluginName&) = delete;
  PluginName& operator=(const PluginName&) = delete;

 private:
  const char* saved_;
};

TEST(OpVisitor, EveryOpReachesItsMethodWithItsOwnAttributes) {
  const AllAttrs all;
  int32_t ops = 0;
  for (int32_t op = DLHOST_OP_INPUT; op <= DLHOST_OP_TIED_FC; ++op, ++ops) {
    SCOPED_TRACE(sdk::op_name(op));
    const dlhost_node n = node_of(op, "n", all.of(op));
    Recorder r;
    EXPECT_EQ(r.visit(n), sdk::op_name(op));  // the method named as the docs name the op
    EXPECT_EQ(r.node, &n);
    EXPECT_EQ(r.attrs, all.of(op));  // the node's own struct, not a copy
  }
  EXPECT_EQ(ops, 19);  // a new op: a method here, a case in visit(), a line in AttrsMinSize
}

TEST(OpVisitor, AnOpWithoutAMethodIsUnimplementedNamingThePluginTheOpAndTheNode) {
  const PluginName name("acme");
  const AllAttrs all;
  TwoOps lowering;
  const dlhost_node conv = node_of(DLHOST_OP_CONV2D, "conv1", all.of(DLHOST_OP_CONV2D));
  auto attrs = all.conv2d;
  attrs.out_channels = 6;
  const dlhost_node six = node_of(DLHOST_OP_CONV2D, "conv1", &attrs);
  EXPECT_EQ(lowering.visit(six), 6);
  EXPECT_EQ(lowering.visit(node_of(DLHOST_OP_ADD, "res", nullptr)), -1);

  const dlhost_node rnn = node_of(DLHOST_OP_LSTM, "rnn1", all.of(DLHOST_OP_LSTM));
  Thrown t = thrown_by([&] { lowering.visit(rnn); });
  EXPECT_EQ(t.code, DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_EQ(t.message, "acme: lstm 'rnn1': not implemented by this backend");
  t = thrown_by([&] { lowering.visit(node_of(DLHOST_OP_MSE_LOSS, "loss", nullptr)); });
  EXPECT_EQ(t.code, DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_EQ(t.message, "acme: mse_loss 'loss': not implemented by this backend");
  // An op a newer host's graph has and this SDK does not know.
  t = thrown_by([&] { lowering.visit(node_of(42, "future", nullptr)); });
  EXPECT_EQ(t.code, DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_EQ(t.message, "acme: op 42 'future': not an op this backend knows");
  // A variant of an op the backend refuses itself, in the same words.
  t = thrown_by([&] { sdk::unsupported_op(conv, "dilation with a stride above 1"); });
  EXPECT_EQ(t.code, DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_EQ(t.message, "acme: conv2d 'conv1': dilation with a stride above 1");
}

TEST(OpVisitor, TruncatedOrAbsentAttributesAreRefusedBeforeTheMethod) {
  const AllAttrs all;
  auto conv = all.conv2d;
  conv.struct_size = DLHOST_CONV2D_ATTRS_STRUCT_SIZE - 1;  // a struct too small for its op
  Recorder r;
  Thrown t = thrown_by([&] { r.visit(node_of(DLHOST_OP_CONV2D, "c1", &conv)); });
  EXPECT_EQ(t.code, DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(t.message.find("node 'c1' (conv2d) has truncated attributes"), std::string::npos)
      << t.message;
  EXPECT_EQ(r.node, nullptr);  // no method ran
  t = thrown_by([&] { r.visit(node_of(DLHOST_OP_ATTENTION, "attn", nullptr)); });
  EXPECT_EQ(t.code, DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(t.message.find("node 'attn' (attention) has no attributes"), std::string::npos)
      << t.message;
  EXPECT_EQ(r.node, nullptr);
  // A 1.0 host's fc struct (no batch_dims) is valid: the struct's first release is the minimum.
  auto fc = all.fc;
  fc.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE_1_0;
  EXPECT_EQ(r.visit(node_of(DLHOST_OP_FC, "fc1", &fc)), "fc");
}

// A backend's own view of the node: what its methods get instead of the dlhost_node.
struct View {
  std::string prefix;
  int32_t index = 0;
};

class Prefixes final : public sdk::OpVisitor<std::string, View> {
  std::string gelu(const View& v, const dlhost_gelu_attrs& a) override {
    return v.prefix + "/gelu" + std::to_string(a.approximation) + "@" + std::to_string(v.index);
  }
};

TEST(OpVisitor, TheMethodsGetTheBackendsViewOfTheNode) {
  const PluginName name("acme");
  AllAttrs all;
  all.gelu.approximation = DLHOST_GELU_TANH;
  const dlhost_node gelu = node_of(DLHOST_OP_GELU, "act", all.of(DLHOST_OP_GELU));
  Prefixes lowering;
  EXPECT_EQ(lowering.visit(gelu, View{"n3_act", 3}), "n3_act/gelu1@3");
  // The default still names the node itself.
  const dlhost_node ln = node_of(DLHOST_OP_LAYER_NORM, "ln_f", all.of(DLHOST_OP_LAYER_NORM));
  EXPECT_EQ(thrown_by([&] {
              lowering.visit(ln, View{"n4_ln_f", 4});
            }).message,
            "acme: layer_norm 'ln_f': not implemented by this backend");
}

}  // namespace
