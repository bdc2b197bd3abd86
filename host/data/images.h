// images.h — readers for the two image data sets of the paper's real-data suite: MNIST (idx
// files, gzip or not) and CIFAR-10 (the "binary version" batches). Each checks what it reads
// (magic numbers, sizes, label ranges, image/label counts) and throws one DataError naming the
// file and what is wrong. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlhost::data {

// Labelled 8-bit images, kept as read (uint8, sample-major, each sample C x H x W) so that a
// data set stays at 1 byte per pixel in memory; the pipeline converts a mini-batch at a time.
struct ImageSet {
  int64_t count = 0;
  int64_t channels = 0, height = 0, width = 0;
  int32_t classes = 0;          // labels are in [0, classes)
  std::vector<uint8_t> pixels;  // count * channels * height * width
  std::vector<int32_t> labels;  // count
  std::vector<std::string> files;

  int64_t sample_bytes() const { return channels * height * width; }
};

// An idx3 image file (magic 0x00000803) and its idx1 label file (magic 0x00000801), as
// published at yann.lecun.com/exdb/mnist: big-endian 32-bit header fields, labels 0..9.
ImageSet read_mnist(const std::string& images_path, const std::string& labels_path);

// CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin): records of 1 label byte (0..9)
// then 3072 pixel bytes, the 1024 red, then green, then blue values of a 32x32 image (already
// channel-major, i.e. CHW). Concatenated in the order given.
ImageSet read_cifar10(const std::vector<std::string>& batch_paths);

}  // namespace dlhost::data
