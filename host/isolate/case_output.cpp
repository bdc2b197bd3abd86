// case_output.cpp — see case_output.h.
#include "isolate/case_output.h"

#include <limits.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "core/log_pattern.h"
#include "isolate/case_process.h"
#include "output/output_file.h"

namespace dlhost {

CaseOutput::CaseOutput(std::function<void(const std::string&)> to_console, bool show_library_output)
    : to_console_(std::move(to_console)), show_library_output_(show_library_output) {}

void CaseOutput::keep(const char* data, size_t n) {
  tail_.append(data, n);
  static const std::string kAgent = "dlhost test-host agent: ";
  if (size_t at = tail_.find(kAgent); agent_note_.empty() && at != std::string::npos) {
    size_t end = tail_.find('\n', at);
    if (end != std::string::npos)
      agent_note_ = tail_.substr(at + kAgent.size(), end - at - kAgent.size());
  }
  if (tail_.size() > 2 * kStderrTailBytes) tail_.erase(0, tail_.size() - kStderrTailBytes);
}

void CaseOutput::library_bytes(const char* data, size_t n) {
  keep(data, n);
  if (!show_library_output_) return;
  err_partial_.append(data, n);
  size_t nl;
  while ((nl = err_partial_.find('\n')) != std::string::npos) {
    to_console_(err_partial_.substr(0, nl));
    err_partial_.erase(0, nl + 1);
  }
}

void CaseOutput::library_line(const std::string& line) {
  const std::string text = line + "\n";
  keep(text.data(), text.size());
  if (show_library_output_) to_console_(line);
}

void CaseOutput::on_stderr(const char* data, size_t n) { library_bytes(data, n); }

void CaseOutput::on_stdout(const char* data, size_t n) {
  out_partial_.append(data, n);
  size_t nl;
  while ((nl = out_partial_.find('\n')) != std::string::npos) {
    std::string l = out_partial_.substr(0, nl);
    out_partial_.erase(0, nl + 1);
    std::optional<std::string> marker = marker_in(l);
    // A plugin's or library's own print; or the half line it left before a marker line.
    // (A torn marker, "", carries nothing usable.)
    std::string own = !marker ? l : marker->empty() ? "" : l.substr(0, l.size() - marker->size());
    if (!marker || !own.empty()) library_line(own);
    if (!marker) continue;
    if (marker->rfind(kLogMarker, 0) == 0) {
      std::string text = marker->substr(std::string(kLogMarker).size());
      to_console_(text);
      text += '\n';
      keep(text.data(), text.size());
    } else {
      reports.line(*marker);
    }
  }
}

void CaseOutput::finish() {
  if (show_library_output_ && !err_partial_.empty()) to_console_(err_partial_);
  err_partial_.clear();
  std::string rest = std::move(out_partial_);
  out_partial_.clear();
  if (!rest.empty() && !marker_in(rest)) library_line(rest);
}

void emit_line(const std::string& line) {
  // A write that fails has nowhere to be told: the parent sees the line missing.
  output::write_all(STDOUT_FILENO, line + "\n");
}

namespace {

// dlhost's logger in a case worker: each line of a message as one marker line on stdout, cut to
// fit one atomic pipe write so that another thread's marker line never lands inside it.
class MarkerSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    std::string text(formatted.data(), formatted.size());
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    constexpr size_t kMost = PIPE_BUF - 64;
    size_t start = 0;
    do {
      size_t end = text.find('\n', start);
      std::string line = text.substr(start, end == std::string::npos ? end : end - start);
      if (line.size() > kMost) line = line.substr(0, kMost) + "...";
      emit_line(kLogMarker + line);
      start = end == std::string::npos ? end : end + 1;
    } while (start != std::string::npos);
  }
  void flush_() override {}
};

}  // namespace

void install_worker_log_sink() {
  auto logger = spdlog::default_logger();
  logger->sinks().assign(1, std::make_shared<MarkerSink>());
  logger->set_pattern(kLogPattern);
}

}  // namespace dlhost
