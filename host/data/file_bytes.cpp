// file_bytes.cpp — see file_bytes.h. zlib's gzread passes non-gzip files through unchanged, so
// one code path serves plain and compressed files; a truncated gzip stream is only reported by
// gzerror/gzclose_r, so both are checked.
#include "data/file_bytes.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "data/error.h"

namespace dlhost::data {

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const {
    if (f) gzclose_r(f);
  }
};

}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw DataError(path, "missing (no such file)");
  const auto on_disk = std::filesystem::file_size(path, ec);
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) throw DataError(path, std::string("cannot open: ") + std::strerror(errno));
  gzbuffer(file.get(), 1u << 20);

  // A plain file is read without reallocation: its size plus one chunk of slack is reserved.
  constexpr size_t kChunk = 4u << 20;
  std::vector<uint8_t> bytes;
  const DataError truncated(path, "truncated gzip stream (the file ends mid-stream)");
  bytes.reserve((ec ? 0 : static_cast<size_t>(on_disk)) + kChunk);
  for (;;) {
    size_t old_size = bytes.size();
    bytes.resize(old_size + kChunk);
    int got = gzread(file.get(), bytes.data() + old_size, static_cast<unsigned>(kChunk));
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(file.get(), &code);
      if (code == Z_BUF_ERROR) throw truncated;
      throw DataError(path, std::string("corrupt gzip data (") + msg + ")");
    }
    bytes.resize(old_size + static_cast<size_t>(got));
    if (static_cast<size_t>(got) < kChunk) break;
  }
  int code = Z_OK;
  gzerror(file.get(), &code);
  if (code == Z_BUF_ERROR) throw truncated;
  if (gzclose_r(file.release()) != Z_OK) throw DataError(path, "truncated or corrupt gzip stream");
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
