// score.cpp — see score.h.
#include "data/score.h"

#include <cmath>
#include <limits>

namespace dlhost::data {

PipelineOptions evaluation_options(int64_t batch, int64_t rank, int64_t world) {
  PipelineOptions o;
  o.batch = batch;
  o.epochs = 1;
  o.epoch_size = 0;
  o.shuffle = false;
  o.rank = rank;
  o.world = world;
  o.prefetch = 2;
  return o;
}

void Score::add_logits(const float* logits, const int32_t* labels, int64_t n, int64_t classes) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;  // ties: the lowest class, as argmax conventions do
    correct += best == labels[i] ? 1 : 0;
  }
  classified += n;
}

void Score::add_mean_loss(double mean_loss, int64_t n) {
  loss_sum += mean_loss * static_cast<double>(n);
  loss_samples += n;
}

void Score::merge(const Score& other) {
  classified += other.classified;
  correct += other.correct;
  loss_samples += other.loss_samples;
  loss_sum += other.loss_sum;
}

double Score::accuracy() const {
  return classified > 0 ? static_cast<double>(correct) / static_cast<double>(classified)
                        : std::numeric_limits<double>::quiet_NaN();
}

double Score::mean_loss() const {
  return loss_samples > 0 ? loss_sum / static_cast<double>(loss_samples)
                          : std::numeric_limits<double>::quiet_NaN();
}

double Score::perplexity() const { return std::exp(mean_loss()); }

}  // namespace dlhost::data
