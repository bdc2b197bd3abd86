// source.h — a data set seen as numbered samples that can be written into a slot of a Batch:
// images with their normalization, or fixed-length word sequences with next-word targets. The
// pipeline only talks to SampleSource. Sources are immutable after construction, so fill() may
// be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/images.h"

namespace dlhost::data {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t size() const = 0;
  virtual const BatchLayout& layout() const = 0;
  // Writes sample `index` (0 <= index < size()) into position `slot` of `batch`.
  virtual void fill(int64_t index, Batch& batch, int64_t slot) const = 0;
  // One line for logs and records: what was read, from where.
  virtual std::string describe() const = 0;
};

// Per-channel x -> (x / 255 - mean[c]) / stddev[c].
struct Normalization {
  std::vector<float> mean, stddev;  // one per channel

  // MNIST as the DLBench scripts fed it (TensorFlow's input_data and Caffe's scale 1/256 both
  // give pixels in [0, 1]): mean 0, stddev 1. Also what the autoencoder's sigmoid output needs.
  static Normalization unit_range(int64_t channels);
  // MNIST standardized with the training set's pixel mean 0.1307 and stddev 0.3081 (the values
  // of PyTorch's examples/mnist, computed over the 60000 training images).
  static Normalization mnist_standardized();
  // CIFAR-10 per-channel (R, G, B) mean 0.4914, 0.4822, 0.4465 and stddev 0.2470, 0.2435, 0.2616:
  // the pixel statistics of the 50000 training images (as computed by, e.g., the torchvision
  // community; the often-copied stddev 0.2023, 0.1994, 0.2010 is not the pixel stddev).
  static Normalization cifar10();
  // The same statistics measured on a set (for a data set without published values).
  static Normalization measured(const ImageSet& set);
};

// Images as float32 CHW features and one int32 class label per sample.
class ImageSource final : public SampleSource {
 public:
  ImageSource(std::shared_ptr<const ImageSet> set, const Normalization& norm, std::string name);

  int64_t size() const override { return set_->count; }
  const BatchLayout& layout() const override { return layout_; }
  void fill(int64_t index, Batch& batch, int64_t slot) const override;
  std::string describe() const override;
  const ImageSet& images() const { return *set_; }

 private:
  std::shared_ptr<const ImageSet> set_;
  std::string name_;
  BatchLayout layout_;
  std::vector<float> table_;  // [channel][256]: the normalized value of every byte
};

// A token stream cut into consecutive non-overlapping windows of `steps` words; sample i is
// tokens[i*steps, (i+1)*steps) as input and the same window shifted by one as targets. The
// windows cover the stream once per epoch; shuffling permutes windows, not words. (Zaremba et
// al.'s reader instead lays the stream out as `batch` parallel rows and carries the LSTM state
// across steps; dlhost's LSTM starts each sequence from a zero state, so windows are
// independent samples.)
class SequenceSource final : public SampleSource {
 public:
  SequenceSource(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t steps,
                 std::string name);

  int64_t size() const override { return windows_; }
  const BatchLayout& layout() const override { return layout_; }
  void fill(int64_t index, Batch& batch, int64_t slot) const override;
  std::string describe() const override;

 private:
  std::shared_ptr<const std::vector<int32_t>> tokens_;
  int64_t steps_, windows_;
  std::string name_;
  BatchLayout layout_;
};

}  // namespace dlhost::data
