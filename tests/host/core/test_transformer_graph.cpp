// test_transformer_graph.cpp — ABI 1.4's Transformer ops in the host-owned graph IR: shapes,
// parameters (the tied table listed by two nodes, owned by one), FLOPs, error messages, the C
// builder table; and the networks built from them (networks_transformer), whose parameter counts
// are asserted against the published models.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "core/graph.h"
#include "core/host_api.h"
#include "graph_attrs.h"
#include "network_plugin.h"

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

using dlhost::test_attrs::attention;

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

// --- the networks ------------------------------------------------------------------------------

class TransformerNetworks
    : public dlhost::test_networks::NetworkPluginTest<dlhost::test_networks::kTransformerNetworks> {
};

// GPT-2 small as published (Hugging Face's GPT2LMHeadModel: 124,439,808). BERT-base: Hugging
// Face's BertModel has 109,482,240 (token-type embeddings 2x768 and the pooler 768x768+768
// included); this encoder has neither (no NSP, one segment) but has the masked-LM head (dense
// 768x768+768, LayerNorm 2x768, decoder bias 30522; its weight is the tied word embeddings):
// 109,482,240 - 1,536 - 590,592 + 590,592 + 1,536 + 30,522 = 109,512,762, which is
// BertForMaskedLM's 109,514,298 less the token-type table's 1,536.
TEST_F(TransformerNetworks, ParameterCountsMatchThePublishedModels) {
  EXPECT_EQ(build("gpt2")->param_count(), 124439808);
  EXPECT_EQ(build("bert_base")->param_count(), 109512762);
  EXPECT_EQ(build("bert_base")->param_count(), 109514298 - 2 * 768);
  // The sequence length does not change the parameters (the position table has 1024 rows).
  EXPECT_EQ(build("gpt2", 1, {{"seq", "128"}})->param_count(), 124439808);
  EXPECT_EQ(build("bert_tiny")->param_count(), 173480);
  EXPECT_EQ(build("gpt2_tiny")->param_count(), 168192);
}

// Forward FLOPs per sample as graph.cpp counts every network (a multiply-add 2, element-wise 1),
// attention's two T x T products included, written out for GPT-2 small at its 1024 context.
TEST_F(TransformerNetworks, Gpt2FlopsIncludeAttention) {
  const double t = 1024, c = 768, f = 3072, v = 50257, h = 12, layers = 12;
  const double per_layer = 4 * t * c                        // ln_1
                           + 4 * (2 * t * c * c + t * c)    // q, k, v, out
                           + 4 * t * t * c + 3 * h * t * t  // Q K^T, P V, softmax
                           + 2 * t * c                      // dropout, residual
                           + 4 * t * c                      // ln_2
                           + (2 * t * c * f + t * f) + t * f + (2 * t * f * c + t * c)  // mlp
                           + 2 * t * c;  // dropout, residual
  const double expected = 2 * t * c      // position add, dropout
                          + layers * per_layer + 4 * t * c + 2 * t * c * v + 3 * t * v;
  auto g = build("gpt2");
  EXPECT_NEAR(g->forward_flops_per_sample(), expected, expected * 1e-12);
  // ~6 N T for training is the usual rule: here forward alone is ~2 N T plus attention.
  EXPECT_GT(g->forward_flops_per_sample(), 2.0 * 124439808 * t * 0.9);
}

TEST_F(TransformerNetworks, SequenceOptionAndShapes) {
  auto g = build("gpt2_tiny", 3, {{"seq", "16"}});
  const dlhost_graph* v = g->view();
  EXPECT_EQ(g->tensor(v->inputs[0]).dims[1], 16);
  EXPECT_EQ(g->tensor(v->inputs[0]).dtype, DLHOST_DTYPE_I32);
  int causal = 0, bidirectional = 0;
  for (int32_t i = 0; i < v->num_nodes; ++i)
    if (g->node(i).op == DLHOST_OP_ATTENTION)
      (static_cast<const dlhost_attention_attrs*>(g->node(i).attrs)->causal ? causal
                                                                            : bidirectional)++;
  EXPECT_EQ(causal, 2);
  EXPECT_EQ(bidirectional, 0);
  EXPECT_THROW(build("gpt2_tiny", 1, {{"seq", "65"}}), Error);  // beyond the position table
  EXPECT_THROW(build("bert_tiny", 1, {{"dropout", "1"}}), Error);
}

}  // namespace
