// file_bytes.h — reads a whole data file into memory, gunzipping it when it is gzip-compressed
// (recognised by its content, not its name, so `x.gz` and `x` are read alike). Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dlhost::data {

// The most bytes one data file may hold (decompressed) unless its reader knows better: a gzip
// bomb (a few MB inflating to GBs) is stopped here instead of filling memory.
constexpr uint64_t kMaxDataFileBytes = uint64_t{1} << 30;

// The file's (decompressed) bytes. Throws DataError naming the file when it cannot be opened,
// its gzip stream is truncated or corrupt, or it holds more than `limit` bytes: reading stops
// there, and the error's reason is `beyond` (a default naming the limit when empty).
std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t limit = kMaxDataFileBytes,
                                     const std::string& beyond = "");

// Its first `n` (decompressed) bytes, fewer when it is shorter: a header to read before the rest.
std::vector<uint8_t> read_file_prefix(const std::string& path, size_t n);

// What a path that is not a regular file is, for a message: "a directory", "a FIFO", "a device",
// "a socket".
std::string file_kind(mode_t mode);

}  // namespace dlhost::data
