// score.h — the end-of-case evaluation on the test split (`evaluate: true`): test accuracy for
// the image classifiers, perplexity for the language model, accumulated batch by batch and
// mergeable across ranks. The test pass itself is a Pipeline over Dataset::test with
// evaluation_options(): one epoch, in file order, no shuffling. Not thread-safe (one per loop).
#pragma once

#include <cstdint>

#include "data/pipeline.h"

namespace dlhost::data {

// One unshuffled epoch of the test split for rank `rank` of `world` at mini-batch `batch`. Its
// last partial mini-batch is dropped like in training (the model is compiled for one batch size):
// Score's counts say how many test samples were scored.
PipelineOptions evaluation_options(int64_t batch, int64_t rank = 0, int64_t world = 1);

struct Score {
  int64_t classified = 0, correct = 0;  // samples scored by add_logits, and how many were right
  int64_t loss_samples = 0;             // samples (PTB: predicted words) scored by add_mean_loss
  double loss_sum = 0;                  // their summed cross-entropy, natural log

  // A batch of logits [n, classes] (row-major) against its labels [n].
  void add_logits(const float* logits, const int32_t* labels, int64_t n, int64_t classes);
  // A batch whose loss the backend reports as a mean over `n` samples or words.
  void add_mean_loss(double mean_loss, int64_t n);
  void merge(const Score& other);

  double accuracy() const;    // correct / classified; NaN when nothing was classified
  double mean_loss() const;   // loss_sum / loss_samples; NaN when no loss was added
  double perplexity() const;  // exp(mean_loss): PTB's measure
};

}  // namespace dlhost::data
