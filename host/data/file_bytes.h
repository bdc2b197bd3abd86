// file_bytes.h — reads a whole data file into memory, gunzipping it when it is gzip-compressed
// (recognised by its content, not its name, so `x.gz` and `x` are read alike). Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dlhost::data {

// The file's (decompressed) bytes. Throws DataError naming the file when it cannot be opened or
// its gzip stream is truncated or corrupt.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// What a path that is not a regular file is, for a message: "a directory", "a FIFO", "a device",
// "a socket".
std::string file_kind(mode_t mode);

}  // namespace dlhost::data
