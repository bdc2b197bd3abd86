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

// An idx file as its header describes it.
struct IdxFile {
  std::vector<int64_t> dims;
  size_t header = 0;           // bytes
  uint64_t payload = 0;        // bytes the header announces after it
  std::vector<uint8_t> bytes;  // header and payload
};

// Reads the idx file at `path` after checking its magic number, reading no more than its header
// announces (a gzip bomb stops there), and checks that the data is exactly there.
IdxFile read_idx(const std::string& path, uint32_t magic, const char* what) {
  IdxFile f;
  const size_t rank = magic & 0xFF;
  f.header = 4 + 4 * rank;
  std::vector<uint8_t> head = read_file_prefix(path, f.header);
  if (head.size() < f.header)
    throw DataError(path, "truncated: " + std::to_string(head.size()) +
                              " bytes, shorter than the " + std::to_string(f.header) +
                              "-byte idx header of an MNIST " + what + " file");
  uint32_t found = big_endian_u32(head, 0);
  if (found != magic)
    throw DataError(path, "bad magic number " + hex(found) + " (an MNIST " + what +
                              " file starts with " + hex(magic) + ")");
  f.payload = 1;
  std::string shape;
  for (size_t d = 0; d < rank; ++d) {
    const uint32_t n = big_endian_u32(head, 4 + 4 * d);
    f.dims.push_back(n);
    shape += (d == 0 ? "" : "x") + std::to_string(n);
    // Checked before each product: three 32-bit sizes overflow 64 bits.
    if (n != 0 && f.payload > kMaxDataFileBytes / n)
      throw DataError(path, std::string("the header announces ") + what + " of shape " + shape +
                                "..., more than the " + std::to_string(kMaxDataFileBytes >> 20) +
                                " MiB limit for one data file");
    f.payload *= n;
  }
  const std::string announced =
      std::to_string(f.dims[0]) + " " + what + " (" + std::to_string(f.payload) + " bytes)";
  f.bytes = read_file_bytes(path, f.header + f.payload,
                            "unexpected bytes after the " + announced +
                                " the header announces; reading stopped there (not an MNIST " +
                                what + " file, or a gzip bomb)");
  const uint64_t have = f.bytes.size() - f.header;
  if (have < f.payload)
    throw DataError(path, "truncated: the header announces " + announced + " but only " +
                              std::to_string(have) + " bytes follow it");
  return f;
}

}  // namespace

ImageSet read_mnist(const std::string& images_path, const std::string& labels_path) {
  ImageSet set;
  IdxFile images = read_idx(images_path, kImagesMagic, "images");
  const std::vector<int64_t>& dims = images.dims;
  std::vector<uint8_t>& pixels = images.bytes;
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

  IdxFile label_file = read_idx(labels_path, kLabelsMagic, "labels");
  const std::vector<int64_t>& label_dims = label_file.dims;
  const std::vector<uint8_t>& labels = label_file.bytes;
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
