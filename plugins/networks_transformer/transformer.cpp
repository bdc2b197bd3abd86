// transformer.cpp — BERT's encoder with its masked-LM head and GPT-2's decoder, from the ABI's
// Transformer ops (layer_norm, gelu, attention, position_embedding, tied_fc) and fc over the last
// axis of [N, T, C]. Layer names follow Hugging Face's modules where they have one
// ("h3.attn.q", "layer3.attention.output.LayerNorm") so parameter lists can be compared.
#include "transformer.h"

#include <string>

namespace dlhost::networks_transformer {

namespace {

// Per-position projection [N, T, in] -> [N, T, out] with bias.
int32_t linear(sdk::Builder& b, const std::string& name, int32_t x, int64_t out) {
  return b.fc_per_step(name, x, out);
}

int32_t drop(sdk::Builder& b, const std::string& name, int32_t x, float p) {
  return p > 0 ? b.dropout(name, x, p) : x;
}

// Multi-head self-attention and its output projection: q, k, v projections (GPT-2's c_attn
// split in three: the same parameters), attention, then the output projection.
int32_t self_attention(sdk::Builder& b, const std::string& at, int32_t x, const Shape& s,
                       float dropout) {
  int32_t q = linear(b, at + ".q", x, s.hidden);
  int32_t k = linear(b, at + ".k", x, s.hidden);
  int32_t v = linear(b, at + ".v", x, s.hidden);
  int32_t a = b.attention(at + ".attention", q, k, v, s.heads, s.decoder, dropout);
  return drop(b, at + ".dropout", linear(b, at + ".out", a, s.hidden), dropout);
}

int32_t feed_forward(sdk::Builder& b, const std::string& at, int32_t x, const Shape& s,
                     float dropout) {
  const auto gelu = s.decoder ? DLHOST_GELU_TANH : DLHOST_GELU_ERF;
  int32_t h = b.gelu(at + ".gelu", linear(b, at + ".fc", x, s.ffn), gelu);
  return drop(b, at + ".dropout", linear(b, at + ".proj", h, s.hidden), dropout);
}

// GPT-2: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
int32_t decoder_block(sdk::Builder& b, const std::string& at, int32_t x, const Shape& s,
                      float dropout) {
  const float eps = 1e-5f;
  int32_t a = self_attention(b, at + ".attn", b.layer_norm(at + ".ln_1", x, eps), s, dropout);
  x = b.add(at + ".residual_1", x, a);
  int32_t m = feed_forward(b, at + ".mlp", b.layer_norm(at + ".ln_2", x, eps), s, dropout);
  return b.add(at + ".residual_2", x, m);
}

// BERT: LayerNorm(x + attn(x)), then LayerNorm(x + ffn(x)).
int32_t encoder_block(sdk::Builder& b, const std::string& at, int32_t x, const Shape& s,
                      float dropout) {
  const float eps = 1e-12f;
  int32_t a = self_attention(b, at + ".attention", x, s, dropout);
  x = b.layer_norm(at + ".attention.LayerNorm", b.add(at + ".residual_1", x, a), eps);
  int32_t f = feed_forward(b, at + ".ffn", x, s, dropout);
  return b.layer_norm(at + ".output.LayerNorm", b.add(at + ".residual_2", x, f), eps);
}

}  // namespace

void build(sdk::Builder& b, const Shape& s, const dlhost_options* raw) {
  const sdk::Options options(raw);
  const int64_t steps = options.get_int("seq", s.sequence);
  if (steps <= 0 || steps > s.max_positions)
    sdk::invalid("option seq=" + std::to_string(steps) + " must be in [1, " +
                 std::to_string(s.max_positions) + "] (the position table's rows)");
  const float dropout = static_cast<float>(options.get_double("dropout", 0.1));
  // Checked as the float the graph holds (0.99999999 rounds to 1, whose 1 / (1 - p) scale is
  // infinite), printed as written.
  if (!(dropout >= 0 && dropout < 1))
    sdk::invalid("option dropout=" + options.get_string("dropout", "0.1") + " must be in [0, 1)" +
                 (dropout == 1 ? " (as a float it is 1)" : ""));
  // GPT-2: tokens and the next token at each position; BERT: tokens and the original token at
  // each position (the masked-LM target; the synthetic batch scores every position).
  int32_t ids = b.input_ids("tokens", {steps});
  int32_t labels = b.input_ids(s.decoder ? "next_tokens" : "target_tokens", {steps});
  const std::string prefix = s.decoder ? "" : "embeddings.";
  int32_t words =
      b.embedding(prefix + (s.decoder ? "wte" : "word_embeddings"), ids, s.vocab, s.hidden);
  int32_t x = b.position_embedding(prefix + (s.decoder ? "wpe" : "position_embeddings"), words,
                                   s.max_positions);
  if (!s.decoder) x = b.layer_norm("embeddings.LayerNorm", x, 1e-12f);
  x = drop(b, prefix + "dropout", x, dropout);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string at = (s.decoder ? "h" : "layer") + std::to_string(l);
    x = s.decoder ? decoder_block(b, at, x, s, dropout) : encoder_block(b, at, x, s, dropout);
  }
  int32_t logits;
  if (s.decoder) {
    logits = b.tied_fc("lm_head", b.layer_norm("ln_f", x, 1e-5f), words, false);
  } else {
    // BertLMPredictionHead: dense, GELU, LayerNorm, then the decoder tied to the word
    // embeddings with a bias of its own.
    int32_t h = b.gelu("cls.transform.gelu", linear(b, "cls.transform.dense", x, s.hidden),
                       DLHOST_GELU_ERF);
    h = b.layer_norm("cls.transform.LayerNorm", h, 1e-12f);
    logits = b.tied_fc("cls.decoder", h, words, true);
  }
  b.softmax_cross_entropy("loss", logits, labels);
}

}  // namespace dlhost::networks_transformer
