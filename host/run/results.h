// results.h — the results file: JSON lines, one record per case, appended and flushed to disk as
// each case ends so a killed run keeps every finished case. Reading skips a torn last line.
// A writer is used from one thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlhost {

class ResultsWriter {
 public:
  // Creates parent folders; appends to an existing file. Throws std::runtime_error on failure.
  explicit ResultsWriter(const std::string& path);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  // One line, written with a single write() and fsync'ed.
  void append(const nlohmann::ordered_json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

struct ResultsFile {
  std::vector<nlohmann::json> records;
  int torn_lines = 0;  // lines that did not parse (a run killed mid-write leaves at most one)
};
ResultsFile read_results(const std::string& path);

}  // namespace dlhost
