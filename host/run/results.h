// results.h — the results file: JSON lines, one record per case, appended and flushed to disk as
// each case ends so a killed run keeps every finished case. Reading skips a torn last line.
// A writer holds an advisory lock on its file (a second dlhost writing to it is refused) and
// never leaves a torn line of its own. A writer is used from one thread.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlhost {

class ResultsWriter {
 public:
  // Creates parent folders; appends to an existing file. Throws std::runtime_error on failure,
  // and when another process holds the file's lock.
  explicit ResultsWriter(const std::string& path);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  // One line, written and fsync'ed. On failure (a full disk) the file is truncated back to its
  // last whole line and std::runtime_error thrown: the record is the caller's to keep.
  void append(const nlohmann::ordered_json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  [[noreturn]] void fail_append(int err);

  int fd_ = -1;
  off_t whole_size_ = 0;  // the file's size after the last whole line
};

struct ResultsFile {
  std::vector<nlohmann::json> records;
  int torn_lines = 0;  // lines that did not parse (a run killed mid-write leaves at most one)
};
ResultsFile read_results(const std::string& path);

}  // namespace dlhost
