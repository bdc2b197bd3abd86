// file_bytes.cpp — see file_bytes.h. zlib's gzread passes non-gzip files through unchanged, so
// one code path serves plain and compressed files; a truncated gzip stream is only reported by
// gzerror/gzclose_r, so both are checked.
#include "data/file_bytes.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "data/error.h"

namespace dlhost::data {

namespace {

constexpr const char* kTruncated = "truncated gzip stream (the file ends mid-stream)";

struct GzCloser {
  void operator()(gzFile_s* f) const {
    if (f) gzclose_r(f);
  }
};

}  // namespace

namespace {

using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

GzFile open_data_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw DataError(path, "missing (no such file)");
  errno = 0;
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) throw DataError(path, std::string("cannot open: ") + std::strerror(errno));
  gzbuffer(file.get(), 1u << 20);
  return file;
}

// Appends up to `n` more bytes of `file` to `bytes`; the count read.
size_t read_more(gzFile_s* file, const std::string& path, std::vector<uint8_t>& bytes, size_t n) {
  const size_t old_size = bytes.size();
  bytes.resize(old_size + n);
  int got = gzread(file, bytes.data() + old_size, static_cast<unsigned>(n));
  if (got < 0) {
    int code = 0;
    const char* msg = gzerror(file, &code);
    if (code == Z_BUF_ERROR) throw DataError(path, kTruncated);
    throw DataError(path, std::string("corrupt gzip data (") + msg + ")");
  }
  bytes.resize(old_size + static_cast<size_t>(got));
  return static_cast<size_t>(got);
}

}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t limit,
                                     const std::string& beyond) {
  std::error_code ec;
  const auto on_disk = std::filesystem::file_size(path, ec);
  GzFile file = open_data_file(path);
  // A plain file is read without reallocation: its size plus one chunk of slack is reserved.
  constexpr size_t kChunk = 4u << 20;
  std::vector<uint8_t> bytes;
  bytes.reserve(std::min<uint64_t>(ec ? 0 : on_disk, limit) + kChunk);
  for (;;) {
    // One byte past the limit tells a file that ends there from one that goes on.
    const uint64_t room = limit + 1 - bytes.size();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, room));
    const size_t got = read_more(file.get(), path, bytes, want);
    if (bytes.size() > limit)
      throw DataError(path, !beyond.empty() ? beyond
                                            : "holds more than " + std::to_string(limit >> 20) +
                                                  " MiB (decompressed), the limit for one data "
                                                  "file; reading stopped there");
    if (got < want) break;
  }
  int code = Z_OK;
  gzerror(file.get(), &code);
  if (code == Z_BUF_ERROR) throw DataError(path, kTruncated);
  if (gzclose_r(file.release()) != Z_OK) throw DataError(path, "truncated or corrupt gzip stream");
  return bytes;
}

std::vector<uint8_t> read_file_prefix(const std::string& path, size_t n) {
  GzFile file = open_data_file(path);
  std::vector<uint8_t> bytes;
  while (bytes.size() < n && read_more(file.get(), path, bytes, n - bytes.size()) > 0) {
  }
  return bytes;
}

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

}  // namespace dlhost::data
