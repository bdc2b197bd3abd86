// source.cpp — see source.h. Images are converted with a 256-entry table per channel: one load
// per pixel instead of a divide, subtract and multiply.
#include "data/source.h"

#include <algorithm>
#include <cmath>

namespace dlhost::data {

Normalization Normalization::unit_range(int64_t channels) {
  return {std::vector<float>(static_cast<size_t>(channels), 0.0f),
          std::vector<float>(static_cast<size_t>(channels), 1.0f)};
}

Normalization Normalization::mnist_standardized() { return {{0.1307f}, {0.3081f}}; }

Normalization Normalization::cifar10() {
  return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
}

Normalization Normalization::measured(const ImageSet& set) {
  const int64_t plane = set.height * set.width;
  std::vector<double> sum(static_cast<size_t>(set.channels)), sq(sum.size());
  for (int64_t i = 0; i < set.count; ++i)
    for (int64_t c = 0; c < set.channels; ++c) {
      const uint8_t* p = set.pixels.data() + i * set.sample_bytes() + c * plane;
      for (int64_t k = 0; k < plane; ++k) {
        double x = p[k] / 255.0;
        sum[c] += x;
        sq[c] += x * x;
      }
    }
  Normalization n;
  const double count = static_cast<double>(set.count * plane);
  for (size_t c = 0; c < sum.size(); ++c) {
    double mean = count > 0 ? sum[c] / count : 0.0;
    double var = count > 0 ? sq[c] / count - mean * mean : 1.0;
    n.mean.push_back(static_cast<float>(mean));
    n.stddev.push_back(static_cast<float>(var > 1e-12 ? std::sqrt(var) : 1.0));
  }
  return n;
}

ImageSource::ImageSource(std::shared_ptr<const ImageSet> set, const Normalization& norm,
                         std::string name)
    : set_(std::move(set)), name_(std::move(name)) {
  layout_.sample_shape = {set_->channels, set_->height, set_->width};
  layout_.features_per_sample = set_->sample_bytes();
  layout_.targets_per_sample = 1;
  for (int64_t c = 0; c < set_->channels; ++c)
    for (int v = 0; v < 256; ++v)
      table_.push_back((static_cast<float>(v) / 255.0f - norm.mean.at(c)) / norm.stddev.at(c));
}

void ImageSource::fill(int64_t index, Batch& batch, int64_t slot) const {
  const int64_t n = layout_.features_per_sample, plane = set_->height * set_->width;
  const uint8_t* in = set_->pixels.data() + index * n;
  float* out = batch.features.data() + slot * n;
  for (int64_t c = 0; c < set_->channels; ++c) {
    const float* t = table_.data() + c * 256;
    for (int64_t k = 0; k < plane; ++k) out[c * plane + k] = t[in[c * plane + k]];
  }
  batch.targets.data()[slot] = set_->labels[static_cast<size_t>(index)];
}

std::string ImageSource::describe() const {
  return name_ + ": " + std::to_string(set_->count) + " images " + std::to_string(set_->channels) +
         "x" + std::to_string(set_->height) + "x" + std::to_string(set_->width) + ", " +
         std::to_string(set_->classes) + " classes";
}

SequenceSource::SequenceSource(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t steps,
                               std::string name)
    : tokens_(std::move(tokens)), steps_(steps), name_(std::move(name)) {
  // The last window needs one token past its end for its last target.
  const auto n = static_cast<int64_t>(tokens_->size());
  windows_ = steps_ > 0 && n > 1 ? (n - 1) / steps_ : 0;
  layout_.sample_shape = {steps_};
  layout_.ids_per_sample = steps_;
  layout_.targets_per_sample = steps_;
}

void SequenceSource::fill(int64_t index, Batch& batch, int64_t slot) const {
  const int32_t* window = tokens_->data() + index * steps_;
  std::copy(window, window + steps_, batch.ids.data() + slot * steps_);
  std::copy(window + 1, window + 1 + steps_, batch.targets.data() + slot * steps_);
}

std::string SequenceSource::describe() const {
  return name_ + ": " + std::to_string(tokens_->size()) + " tokens, " + std::to_string(windows_) +
         " sequences of " + std::to_string(steps_);
}

}  // namespace dlhost::data
