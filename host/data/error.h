// error.h — the one exception type of the data layer: a data file (or data directory) that is
// missing or not what its format promises. It carries the path and the reason separately so a
// caller can report either; what() is "PATH: REASON", one line.
#pragma once

#include <stdexcept>
#include <string>

namespace dlhost::data {

class DataError : public std::runtime_error {
 public:
  DataError(std::string path, std::string reason)
      : std::runtime_error(path + ": " + reason),
        path_(std::move(path)),
        reason_(std::move(reason)) {}

  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_;
  std::string reason_;
};

}  // namespace dlhost::data
