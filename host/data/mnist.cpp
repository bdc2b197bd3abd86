// mnist.cpp — the MNIST idx reader of images.h. The idx header is magic (0x0000 08 NN: unsigned
// byte data, NN dimensions) then NN big-endian 32-bit sizes; the data follows with no padding.
#include <cstdio>
#include <string>

#include "data/error.h"
#include "data/file_bytes.h"
#include "data/images.h"

namespace dlhost::data {

namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions (n, rows, cols)
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension (n)
constexpr int32_t kMnistClasses = 10;

uint32_t big_endian_u32(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) |
         uint32_t{b[at + 3]};
}

std::string hex(uint32_t v) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%08X", v);
  return s;
}

// The idx header's sizes after checking the magic number and that the data is exactly there.
std::vector<int64_t> idx_dims(const std::vector<uint8_t>& bytes, const std::string& path,
                              uint32_t magic, const char* what, int64_t item_bytes_per_unit) {
  const size_t rank = magic & 0xFF;
  const size_t header = 4 + 4 * rank;
  if (bytes.size() < header)
    throw DataError(path, "truncated: " + std::to_string(bytes.size()) +
                              " bytes, shorter than the " + std::to_string(header) +
                              "-byte idx header of an MNIST " + what + " file");
  uint32_t found = big_endian_u32(bytes, 0);
  if (found != magic)
    throw DataError(path, "bad magic number " + hex(found) + " (an MNIST " + what +
                              " file starts with " + hex(magic) + ")");
  std::vector<int64_t> dims;
  int64_t payload = item_bytes_per_unit;
  for (size_t d = 0; d < rank; ++d) {
    dims.push_back(big_endian_u32(bytes, 4 + 4 * d));
    payload *= dims.back();
  }
  const auto have = static_cast<int64_t>(bytes.size() - header);
  if (have < payload)
    throw DataError(path, "truncated: the header announces " + std::to_string(dims[0]) + " " +
                              what + " (" + std::to_string(payload) + " bytes) but only " +
                              std::to_string(have) + " bytes follow it");
  if (have > payload)
    throw DataError(path, std::to_string(have - payload) + " unexpected bytes after the " +
                              std::to_string(dims[0]) + " " + what + " the header announces");
  return dims;
}

}  // namespace

ImageSet read_mnist(const std::string& images_path, const std::string& labels_path) {
  ImageSet set;
  std::vector<uint8_t> pixels = read_file_bytes(images_path);
  auto dims = idx_dims(pixels, images_path, kImagesMagic, "images", 1);
  if (dims[1] == 0 || dims[2] == 0)
    throw DataError(images_path, "images of " + std::to_string(dims[1]) + "x" +
                                     std::to_string(dims[2]) + " pixels");
  set.count = dims[0];
  set.channels = 1;
  set.height = dims[1];
  set.width = dims[2];
  set.classes = kMnistClasses;
  // Drop the header in place: no second copy of the 47 MB training images.
  pixels.erase(pixels.begin(), pixels.begin() + 16);
  set.pixels = std::move(pixels);

  std::vector<uint8_t> labels = read_file_bytes(labels_path);
  auto label_dims = idx_dims(labels, labels_path, kLabelsMagic, "labels", 1);
  if (label_dims[0] != set.count)
    throw DataError(labels_path, "holds " + std::to_string(label_dims[0]) + " labels but " +
                                     images_path + " holds " + std::to_string(set.count) +
                                     " images");
  set.labels.resize(static_cast<size_t>(set.count));
  for (int64_t i = 0; i < set.count; ++i) {
    uint8_t label = labels[8 + static_cast<size_t>(i)];
    if (label >= kMnistClasses)
      throw DataError(labels_path, "label " + std::to_string(label) + " of image " +
                                       std::to_string(i) + " is outside 0..9");
    set.labels[static_cast<size_t>(i)] = label;
  }
  set.files = {images_path, labels_path};
  return set;
}

}  // namespace dlhost::data
