// rnn.cpp — the recurrent language models: Shi et al.'s LSTM-32 and LSTM-64 (synthetic word ids)
// and the PTB LSTM of the real-data suite: embedding 256, two LSTM layers of 256, a per-word
// fully connected layer to the 10000-word vocabulary, cross-entropy on every position.
#include "networks.h"

namespace dlhost::networks_paper {

namespace {

void language_model(Builder& b, int64_t steps) {
  const int64_t vocab = 10000, width = 256, layers = 2;
  int32_t ids = b.input_ids("words", {steps});
  int32_t next = b.input_ids("next_words", {steps});
  int32_t x = b.embedding("embedding", ids, vocab, width);
  x = b.lstm("lstm", x, width, layers);
  b.softmax_cross_entropy("loss", b.fc_per_step("decoder", x, vocab), next);
}

}  // namespace

void build_lstm32(Builder& b, const Options& o) { language_model(b, o.get_int("steps", 32)); }
void build_lstm64(Builder& b, const Options& o) { language_model(b, o.get_int("steps", 64)); }
void build_lstm_ptb(Builder& b, const Options& o) { language_model(b, o.get_int("steps", 32)); }

}  // namespace dlhost::networks_paper
