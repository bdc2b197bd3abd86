// test_data_score.cpp — the end-of-case evaluation: accuracy from logits, perplexity from mean
// losses, merging ranks, the unshuffled test pass; and that the generated "learnable" images
// really are (a nearest-centroid classifier separates them), since the training check relies on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "data/pipeline.h"
#include "data/score.h"
#include "data/source.h"
#include "data_files.h"

namespace dlhost::data {
namespace {

TEST(Score, AccuracyFromLogits) {
  const float logits[] = {0.1f, 2.0f, -1.0f,  // -> 1
                          3.0f, 3.0f, 0.0f,   // tie -> 0
                          0.0f, 0.5f, 0.7f};  // -> 2
  const int32_t labels[] = {1, 1, 2};
  Score s;
  s.add_logits(logits, labels, 3, 3);
  EXPECT_EQ(s.classified, 3);
  EXPECT_EQ(s.correct, 2);
  EXPECT_DOUBLE_EQ(s.accuracy(), 2.0 / 3.0);
  EXPECT_TRUE(std::isnan(s.mean_loss()));
}

TEST(Score, PerplexityFromMeanLossesAndMergeAcrossRanks) {
  Score a, b;
  a.add_mean_loss(std::log(100.0), 64);
  b.add_mean_loss(std::log(400.0), 64);
  a.merge(b);
  EXPECT_EQ(a.loss_samples, 128);
  EXPECT_NEAR(a.perplexity(), 200.0, 1e-9);  // exp of the mean log: the geometric mean
  EXPECT_TRUE(std::isnan(Score{}.accuracy()));
}

// Sample i: features all i, label i % 10.
class IndexSource final : public SampleSource {
 public:
  explicit IndexSource(int64_t n) : n_(n) {
    layout_.sample_shape = {1};
    layout_.features_per_sample = 1;
    layout_.targets_per_sample = 1;
  }
  int64_t size() const override { return n_; }
  const BatchLayout& layout() const override { return layout_; }
  void fill(int64_t index, Batch& b, int64_t slot) const override {
    b.features.data()[slot] = static_cast<float>(index);
    b.targets.data()[slot] = static_cast<int32_t>(index % 10);
  }
  std::string describe() const override { return "index source"; }

 private:
  int64_t n_;
  BatchLayout layout_;
};

TEST(Evaluation, OneUnshuffledEpochSplitOverRanks) {
  auto source = std::make_shared<IndexSource>(100);
  std::vector<int64_t> seen;
  for (int64_t rank = 0; rank < 2; ++rank) {
    Pipeline p(source, evaluation_options(16, rank, 2));
    EXPECT_EQ(p.total_steps(), 3);  // 100 / 32: the last 4 test samples are not scored
    while (auto lease = p.next())
      seen.insert(seen.end(), lease->samples.begin(), lease->samples.end());
  }
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), 96u);
  for (int64_t i = 0; i < 96; ++i) EXPECT_EQ(seen[i], i);  // the first 96, each once
}

TEST(GeneratedData, LearnableImagesAreSeparable) {
  std::mt19937_64 rng(3);
  for (int64_t channels : {1, 3}) {
    const int64_t side = channels == 1 ? 28 : 32, n = channels * side * side;
    std::vector<std::vector<double>> centroid(10, std::vector<double>(n));
    std::vector<int> count(10);
    std::vector<uint8_t> img(n);
    for (int i = 0; i < 200; ++i) {
      int label = static_cast<int>(rng() % 10);
      testing::learnable_image(img.data(), label, channels, side, side, rng);
      for (int64_t k = 0; k < n; ++k) centroid[label][k] += img[k];
      ++count[label];
    }
    for (int c = 0; c < 10; ++c)
      for (auto& v : centroid[c]) v /= std::max(count[c], 1);
    int correct = 0;
    for (int i = 0; i < 100; ++i) {
      int label = static_cast<int>(rng() % 10);
      testing::learnable_image(img.data(), label, channels, side, side, rng);
      int best = 0;
      double best_d = 1e300;
      for (int c = 0; c < 10; ++c) {
        double d = 0;
        for (int64_t k = 0; k < n; ++k) d += (img[k] - centroid[c][k]) * (img[k] - centroid[c][k]);
        if (d < best_d) best_d = d, best = c;
      }
      correct += best == label;
    }
    EXPECT_GE(correct, 95) << channels << " channels";
  }
}

}  // namespace
}  // namespace dlhost::data
