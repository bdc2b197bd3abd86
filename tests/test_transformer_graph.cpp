// test_transformer_graph.cpp — ABI 1.4's Transformer ops in the host-owned graph IR: shapes,
// parameters (the tied table listed by two nodes, owned by one), FLOPs, error messages, the C
// builder table.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/graph.h"
#include "core/host_api.h"

namespace {

using dlhost::Error;
using dlhost::GraphBuilder;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

dlhost_attention_attrs attention(int64_t heads, bool causal, float dropout = 0) {
  return {DLHOST_ATTENTION_ATTRS_STRUCT_SIZE, heads, causal ? 1 : 0, dropout};
}

// One pre-LN block on [2, 3, 8] with 2 heads, a tied output layer, the loss on every position.
TEST(TransformerOps, ShapesParamsAndFlops) {
  const int64_t n = 2, t = 3, c = 8, vocab = 11;
  GraphBuilder b("t", n);
  int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {t});
  int32_t emb = b.embedding("wte", ids, {DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE, vocab, c});
  int32_t x = b.position_embedding("wpe", emb, {DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE, 5});
  int32_t h = b.layer_norm("ln", x, {DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE, 1e-5f});
  dlhost_fc_attrs proj{DLHOST_FC_ATTRS_STRUCT_SIZE, c, 1, 2};
  int32_t q = b.fc("q", h, proj), k = b.fc("k", h, proj), v = b.fc("v", h, proj);
  int32_t a = b.attention("attn", q, k, v, attention(2, true, 0.1f));
  int32_t g = b.gelu("gelu", a, {DLHOST_GELU_ATTRS_STRUCT_SIZE, DLHOST_GELU_TANH});
  int32_t logits = b.tied_fc("head", g, emb, {DLHOST_TIED_FC_ATTRS_STRUCT_SIZE, -1, 1});
  int32_t next = b.input("next", DLHOST_DTYPE_I32, {t});
  b.softmax_cross_entropy("loss", logits, next);
  auto graph = b.finish();
  EXPECT_EQ(graph->tensor(a).rank, 3);
  EXPECT_EQ(graph->tensor(logits).dims[2], vocab);
  // wte 11*8, wpe 5*8, ln 8+8, q/k/v 3*(64+8), head bias 11: the tied table is counted once.
  EXPECT_EQ(graph->param_count(), 88 + 40 + 16 + 3 * 72 + 11);
  const dlhost_node* head = nullptr;
  int32_t head_index = -1;
  for (int32_t i = 0; i < graph->view()->num_nodes; ++i)
    if (graph->node(i).op == DLHOST_OP_TIED_FC) head = &graph->node(head_index = i);
  ASSERT_NE(head, nullptr);
  ASSERT_EQ(head->num_params, 2);
  const auto& table = graph->param(head->params[0]);
  EXPECT_STREQ(table.name, "wte.table");
  EXPECT_EQ(graph->node(table.node).op, DLHOST_OP_EMBEDDING);  // owned by the embedding
  EXPECT_EQ(static_cast<const dlhost_tied_fc_attrs*>(head->attrs)->embedding_node, table.node);
  EXPECT_EQ(graph->param(head->params[1]).node, head_index);
  EXPECT_EQ(graph->param(head->params[1]).role, DLHOST_PARAM_BIAS);
  // attention: 2 GEMMs of 2*N*T*T*C and 3 per score (N*heads*T*T); the head 2*N*T*C*vocab + bias.
  for (int32_t i = 0; i < graph->view()->num_nodes; ++i) {
    const auto& node = graph->node(i);
    if (node.op == DLHOST_OP_ATTENTION) {
      EXPECT_DOUBLE_EQ(node.forward_flops, 2 * 2.0 * n * t * t * c + 3.0 * n * 2 * t * t);
    } else if (node.op == DLHOST_OP_TIED_FC) {
      EXPECT_DOUBLE_EQ(node.forward_flops, 2.0 * n * t * c * vocab + n * t * vocab);
    } else if (node.op == DLHOST_OP_LAYER_NORM) {
      EXPECT_DOUBLE_EQ(node.forward_flops, 4.0 * n * t * c);
    }
  }
}

TEST(TransformerOps, ErrorsNameTheLayer) {
  GraphBuilder b("t", 2);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {4, 6});
  int32_t y = b.input("y", DLHOST_DTYPE_F32, {4, 5});
  EXPECT_EQ(error_of([&] { b.attention("a", x, x, x, attention(4, false)); }),
            "layer 'a': heads (4) must be > 0 and divide the channels (6)");
  EXPECT_EQ(error_of([&] { b.attention("a2", x, y, x, attention(2, false)); }),
            "layer 'a2': q, k and v must be F32 [N, T, heads * d] of one shape, got 2x4x6, "
            "2x4x5, 2x4x6");
  EXPECT_EQ(error_of([&] {
              b.position_embedding("p", x, {DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE, 3});
            }),
            "layer 'p': max_positions 3 is below the sequence 4");
  EXPECT_EQ(error_of([&] {
              b.tied_fc("h", x, y, {DLHOST_TIED_FC_ATTRS_STRUCT_SIZE, -1, 0});
            }),
            "layer 'h': tensor 1 is not an embedding's output");
  EXPECT_EQ(error_of([&] {
              b.gelu("g", x, {DLHOST_GELU_ATTRS_STRUCT_SIZE, 7});
            }),
            "layer 'g': approximation must be 0 (erf) or 1 (tanh), got 7");
  EXPECT_EQ(error_of([&] {
              b.layer_norm("ln", x, {DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE, 0});
            }),
            "layer 'ln': epsilon must be > 0");
}

TEST(TransformerOps, CTableRefusesAShortStruct) {
  GraphBuilder b("t", 2);
  const dlhost_builder_api* api = GraphBuilder::c_api();
  ASSERT_GE(api->struct_size, DLHOST_BUILDER_API_STRUCT_SIZE);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {4, 6});
  dlhost_attention_attrs shortened = attention(2, true);
  shortened.struct_size = 8;
  int32_t out = -1;
  dlhost_status* s = api->attention(b.c_handle(), "a", x, x, x, &shortened, &out);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->message, "attention attrs missing or smaller than ABI 1.4's");
  EXPECT_EQ(out, -1);
  dlhost::host_api()->status_destroy(s);
  dlhost_attention_attrs whole = attention(2, true);
  EXPECT_EQ(api->attention(b.c_handle(), "a", x, x, x, &whole, &out), nullptr);
  EXPECT_GE(out, 0);
}

}  // namespace
