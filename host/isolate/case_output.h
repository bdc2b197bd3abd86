// case_output.h — what the parent makes of a case's output, apart from its marker lines: the
// libraries' own output (TensorFlow's cpu_feature_guard and MLIR lines, MXNet's engine line, a
// launcher's messages, a plugin's prints) is kept for the record's stderr tail and shown live only
// when asked (-v); dlhost's own log lines, which the worker sends tagged on stdout (kLogMarker),
// always reach the console, as their level let them through in the worker.
//
// The worker's stderr is entirely the libraries' (and the launcher's): dlhost's logger in a case
// worker writes marker lines instead (install_worker_log_sink), so the two never mix even when a
// library writes half a line. Not thread-safe: the parent reads one case at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "isolate/startup_watch.h"

namespace dlhost {

// How much of what a case said a record keeps (its stderr_tail).
inline constexpr size_t kStderrTailBytes = 4096;

// A line of dlhost's own log from a case worker, on its stdout: the marker, then the line as
// dlhost's log pattern formatted it ("[10:02:03.456] [warning] ...").
inline constexpr const char* kLogMarker = "@@DLHOST_LOG@@ ";

class CaseOutput {
 public:
  // `to_console` gets each line to show (without its newline); `show_library_output`: the
  // libraries' lines too, as they come (whole lines: a partial one waits for its end).
  CaseOutput(std::function<void(const std::string& line)> to_console, bool show_library_output);

  void on_stderr(const char* data, size_t n);
  void on_stdout(const char* data, size_t n);
  // At the case's end: a last line without its newline is shown (when shown at all) and kept.
  void finish();

  // The last bytes of what the case said, its libraries and dlhost's log lines in the order they
  // came (at most about 2 x the record's tail: finish_record cuts it).
  const std::string& tail() const { return tail_; }
  // The first line a test host's agent wrote about its daemon (test_hosts.cpp): which host's
  // daemon ended, kept apart since the launcher's own help text that follows can push it out of
  // the tail.
  const std::string& agent_note() const { return agent_note_; }
  WorkerReports reports;

 private:
  void library_bytes(const char* data, size_t n);  // stderr's, in pieces
  void library_line(const std::string& line);      // a whole line of stdout
  void keep(const char* data, size_t n);

  std::function<void(const std::string&)> to_console_;
  bool show_library_output_;
  std::string tail_, out_partial_, err_partial_, agent_note_;
};

// The case worker's side. One whole line to stdout in one write(), so that a launcher forwarding
// several ranks never interleaves two of them (a line up to PIPE_BUF bytes).
void emit_line(const std::string& line);

// From here on, dlhost's logger (the host's own messages and the
// plugins' dlhost_host_api log) writes kLogMarker lines to stdout, each in one write(), instead
// of writing to stderr.
void install_worker_log_sink();

}  // namespace dlhost
