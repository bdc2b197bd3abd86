// cifar10.cpp — the CIFAR-10 binary-batch reader of images.h. The format has no header, so a
// file is checked by its size (whole records) and its label bytes.
#include <filesystem>
#include <string>

#include "data/error.h"
#include "data/file_bytes.h"
#include "data/images.h"

namespace dlhost::data {

namespace {

constexpr int64_t kChannels = 3, kSide = 32, kClasses = 10;
constexpr int64_t kImageBytes = kChannels * kSide * kSide;  // 3072
constexpr int64_t kRecordBytes = 1 + kImageBytes;           // 3073

// Appends one batch file's records to `set`.
void append_batch(ImageSet& set, const std::string& path) {
  std::vector<uint8_t> bytes = read_file_bytes(path);
  const auto size = static_cast<int64_t>(bytes.size());
  if (size == 0) throw DataError(path, "empty (a CIFAR-10 batch holds 3073-byte records)");
  if (size % kRecordBytes != 0)
    throw DataError(path, "truncated or not a CIFAR-10 binary batch: " + std::to_string(size) +
                              " bytes is not a whole number of 3073-byte records (1 label + "
                              "3072 pixels); the last record has " +
                              std::to_string(size % kRecordBytes) + " bytes");
  const int64_t records = size / kRecordBytes;
  const size_t first = set.pixels.size();
  set.pixels.resize(first + static_cast<size_t>(records * kImageBytes));
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* record = bytes.data() + r * kRecordBytes;
    if (record[0] >= kClasses)
      throw DataError(path, "label " + std::to_string(record[0]) + " of record " +
                                std::to_string(r) +
                                " is outside 0..9 (is this the CIFAR-100 "
                                "format, or not a CIFAR-10 batch?)");
    set.labels.push_back(record[0]);
    std::copy(record + 1, record + kRecordBytes, set.pixels.begin() + first + r * kImageBytes);
  }
  set.count += records;
  set.files.push_back(path);
}

}  // namespace

ImageSet read_cifar10(const std::vector<std::string>& batch_paths) {
  ImageSet set;
  set.channels = kChannels;
  set.height = kSide;
  set.width = kSide;
  set.classes = kClasses;
  // Reserve once from the files' sizes (the batches are not compressed): no regrowth of 150 MB.
  int64_t records = 0;
  for (const auto& path : batch_paths) {
    std::error_code ec;
    auto size = std::filesystem::file_size(path, ec);
    if (!ec) records += static_cast<int64_t>(size) / kRecordBytes;
  }
  set.pixels.reserve(static_cast<size_t>(records * kImageBytes));
  set.labels.reserve(static_cast<size_t>(records));
  for (const auto& path : batch_paths) append_batch(set, path);
  return set;
}

}  // namespace dlhost::data
