// results.cpp — see results.h.
#include "run/results.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace dlhost {

ResultsWriter::ResultsWriter(const std::string& path) : path_(path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot open results file " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(
        "results file " + path +
        (err == EWOULDBLOCK ? std::string(" is being written by another dlhost run; wait for it "
                                          "or write to another file")
                            : ": cannot lock: " + std::string(std::strerror(err))));
  }
  // A run killed mid-write leaves a torn last line; end it so the next record starts on a line
  // of its own (readers skip the torn one).
  off_t size = ::lseek(fd_, 0, SEEK_END);
  char last = '\n';
  if (size > 0 && ::pread(fd_, &last, 1, size - 1) == 1 && last != '\n') {
    if (::write(fd_, "\n", 1) != 1) {
      int err = errno;
      ::close(fd_);
      throw std::runtime_error("cannot write results file " + path + ": " + std::strerror(err));
    }
  }
  whole_size_ = ::lseek(fd_, 0, SEEK_END);
}

ResultsWriter::~ResultsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsWriter::append(const nlohmann::ordered_json& record) {
  // Invalid UTF-8 from a plugin's message must not make the whole record unwritable.
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_append(n < 0 ? errno : ENOSPC);
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd_) != 0 && errno != EINVAL) fail_append(errno);
  whole_size_ += static_cast<off_t>(line.size());
}

void ResultsWriter::fail_append(int err) {
  // A torn line would hide the next record's start from nothing, but it is a lie about what
  // ran; the file goes back to its last whole line.
  bool restored = ::ftruncate(fd_, whole_size_) == 0;
  throw std::runtime_error("cannot write results file " + path_ + ": " + std::strerror(err) +
                           (restored ? "" : " (and cannot truncate its partial last line)"));
}

ResultsFile read_results(const std::string& path) {
  ResultsFile out;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open results file " + path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      out.records.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::parse_error&) {
      ++out.torn_lines;
    }
  }
  return out;
}

}  // namespace dlhost
