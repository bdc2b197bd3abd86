// transformer.h — the sizes of a Transformer (one struct, BERT's or GPT-2's shape) and the one
// builder that lays out either from them. No state; throws dlhost::sdk::Error on a bad option.
#ifndef DLHOST_NETWORKS_TRANSFORMER_TRANSFORMER_H
#define DLHOST_NETWORKS_TRANSFORMER_TRANSFORMER_H

#include <dlhost/network_kit.hpp>

#include <cstdint>

namespace dlhost::networks_transformer {

// Legend (as llm.c's): N mini-batch, T sequence, C hidden, H heads, F feed-forward width, V vocab.
struct Shape {
  int64_t layers;         // L
  int64_t hidden;         // C
  int64_t heads;          // H
  int64_t ffn;            // F
  int64_t vocab;          // V
  int64_t max_positions;  // rows of the position table (BERT 512, GPT-2 1024)
  int64_t sequence;       // T by default; the plugin option `seq` changes it
  bool decoder;           // GPT-2: causal, pre-LN, tied head without bias, tanh GELU, eps 1e-5
                          // BERT: bidirectional, post-LN, MLM transform + tied decoder with bias,
                          // erf GELU, eps 1e-12
};

// Builds the network of `shape` with the case's options (`seq`, `dropout`).
void build(sdk::Builder& b, const Shape& shape, const dlhost_options* options);

}  // namespace dlhost::networks_transformer

#endif  // DLHOST_NETWORKS_TRANSFORMER_TRANSFORMER_H
