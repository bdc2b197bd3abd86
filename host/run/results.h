// results.h — the results file: JSON lines, one record per case, appended and flushed to disk as
// each case ends so a killed run keeps every finished case. Reading is the record module's
// (record/results_file.h: one reader, one set of rules).
// A writer holds an advisory lock on its file (a second dlhost writing to it is refused) and
// never leaves a torn line of its own, except when it is interrupted while a write blocks (a hung
// mount): the run then ends, and the next writer ends that torn line. A results file must be a
// regular file that holds data: a FIFO, a device, a directory or a kernel interface file
// (/proc, /sys) is refused before any case runs, and so is a link or file another user put in a
// sticky world-writable folder (output/output_file.h). A writer is used from one thread; it writes
// through a thread of its own so that the caller can stop waiting for a write that blocks.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dlhost {

// append() gave up waiting for a write because the stop flag was set (SIGINT, SIGTERM).
class ResultsWriteInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ResultsWriter {
 public:
  // Creates parent folders; appends to an existing file. Throws std::runtime_error on failure,
  // for a path that is not a regular file holding data (naming what it is), and when another
  // process holds the file's lock. `stop` (may be NULL): while a write waits, append() gives up
  // as soon as *stop is non-zero.
  explicit ResultsWriter(const std::string& path, const volatile sig_atomic_t* stop = nullptr);
  // Adopts an open descriptor (a pipe in tests: a reader that stops reading), with no checks.
  static std::unique_ptr<ResultsWriter> adopt(int fd, const std::string& name,
                                              const volatile sig_atomic_t* stop);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  // One line, written and fsync'ed. On failure (a full disk) the file is truncated back to its
  // last whole line and std::runtime_error thrown: the record is the caller's to keep. Throws
  // ResultsWriteInterrupted when *stop is set while the write blocks: the write is abandoned
  // (its thread left blocked) and every later append() throws at once.
  void append(const nlohmann::ordered_json& record);
  const std::string& path() const { return path_; }

 private:
  struct Channel;
  ResultsWriter(int fd, std::string path, const volatile sig_atomic_t* stop);

  std::string path_;
  const volatile sig_atomic_t* stop_ = nullptr;
  std::shared_ptr<Channel> channel_;  // shared with the writing thread, which may outlive this
  std::thread thread_;
};

}  // namespace dlhost
