// run_console.cpp — see run_console.h. Terminal control is two sequences only: "\r" and
// "erase to end of line" (ESC [ K), which every terminal emulator in use understands.
#include "console/run_console.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "output/output_file.h"

namespace dlhost {

namespace {

constexpr const char* kEraseLine = "\r\033[K";

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

size_t terminal_width(int fd) {
  winsize w{};
  if (ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

}  // namespace

ConsoleMode console_mode(int fd, bool quiet) {
  if (quiet) return ConsoleMode::quiet;
  const char* term = std::getenv("TERM");
  bool dumb = term != nullptr && std::strcmp(term, "dumb") == 0;
  return isatty(fd) && !dumb ? ConsoleMode::live : ConsoleMode::plain;
}

std::string phase_text(const ProgressPoint& at, int64_t warmup, int64_t iterations) {
  static const char* const kPhases[] = {"forward", "backward", "all-reduce", "update"};
  if (!at.started) return "preparing";
  const char* phase = kPhases[std::clamp(at.phase, 0, 3)];
  if (at.step < warmup)
    return "warm-up " + std::to_string(at.step + 1) + "/" + std::to_string(warmup) + " " + phase;
  return "timed step " + std::to_string(at.step - warmup + 1) + "/" + std::to_string(iterations) +
         " " + phase;
}

std::string clock_text(double seconds) {
  long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%ld:%02ld", s / 60, s % 60);
  return buf;
}

std::optional<double> eta_seconds(const std::vector<double>& done_s, size_t left_with_current,
                                  double current_elapsed_s) {
  if (left_with_current == 0) return 0.0;
  if (done_s.empty()) return std::nullopt;
  double mean = std::accumulate(done_s.begin(), done_s.end(), 0.0) / done_s.size();
  return std::max(0.0, mean * left_with_current - current_elapsed_s);
}

std::string live_line(const LiveStatus& s, size_t width) {
  char head[48];
  std::snprintf(head, sizeof(head), "[%*zu/%zu] ", static_cast<int>(std::to_string(s.total).size()),
                s.index, s.total);
  std::string tail = "  " + s.phase + "  case " + clock_text(s.case_s) + "  run " +
                     clock_text(s.run_s) + "  ETA " + (s.eta_s ? clock_text(*s.eta_s) : "--");
  // One column short of the width: writing the last column makes some terminals wrap.
  size_t room = width > 1 ? width - 1 : 0;
  std::string id = s.case_id;
  size_t fixed = std::strlen(head) + tail.size();
  if (fixed + id.size() > room) id = fixed + 2 < room ? id.substr(0, room - fixed - 1) + "~" : "";
  std::string line = head + id + tail;
  return line.size() > room ? line.substr(0, room) : line;
}

RunConsole::RunConsole(ConsoleMode mode, int fd, const ProgressChannel* channel, double redraw_s)
    : mode_(mode), fd_(fd), channel_(channel), redraw_s_(redraw_s), run_start_(now_s()) {
  if (mode_ == ConsoleMode::live) redraw_ = std::thread([this] { redraw_loop(); });
}

RunConsole::~RunConsole() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    clear_locked();
  }
  wake_.notify_all();
  if (redraw_.joinable()) redraw_.join();
}

void RunConsole::note(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ == ConsoleMode::quiet) return;
  clear_locked();
  write_locked(line + "\n");
  draw_locked();
}

void RunConsole::summary(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  clear_locked();
  active_ = false;
  write_locked(line + "\n");
}

void RunConsole::error(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  clear_locked();
  std::fprintf(stderr, "%s\n", line.c_str());
}

void RunConsole::plan(std::vector<PlannedCase> cases) {
  std::lock_guard<std::mutex> lock(mutex_);
  plan_ = std::move(cases);
}

void RunConsole::case_started(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = index;
  active_ = true;
  case_start_ = now_s();
  draw_locked();
}

void RunConsole::case_finished(const std::string& line, const std::vector<std::string>& notes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (active_ && current_ < plan_.size() && plan_[current_].runs)
    done_s_.push_back(now_s() - case_start_);
  active_ = false;
  if (mode_ == ConsoleMode::quiet) return;
  clear_locked();
  std::string text = line + "\n";
  for (const auto& n : notes) text += "    " + n + "\n";
  write_locked(text);
}

LiveStatus RunConsole::status_locked() const {
  LiveStatus s;
  s.index = current_ + 1;
  s.total = plan_.size();
  const PlannedCase* c = current_ < plan_.size() ? &plan_[current_] : nullptr;
  s.case_id = c ? c->id : "";
  ProgressPoint at = channel_ ? channel_->read() : ProgressPoint{};
  s.phase = !c ? "" : !c->runs ? "skipped" : phase_text(at, c->warmup, c->iterations);
  double now = now_s();
  s.case_s = now - case_start_;
  s.run_s = now - run_start_;
  size_t left = 0;
  for (size_t i = current_; i < plan_.size(); ++i) left += plan_[i].runs ? 1 : 0;
  s.eta_s = eta_seconds(done_s_, left, c && c->runs ? s.case_s : 0.0);
  return s;
}

void RunConsole::draw_locked() {
  if (mode_ != ConsoleMode::live || !active_ || stop_) return;
  write_locked(kEraseLine + live_line(status_locked(), terminal_width(fd_)));
  drawn_ = true;
}

void RunConsole::clear_locked() {
  if (!drawn_) return;
  write_locked(kEraseLine);
  drawn_ = false;
}

void RunConsole::write_locked(const std::string& text) {
  std::fflush(stdout);           // anything printed through stdio before goes first
  output::write_all(fd_, text);  // a console that takes no more output is not an error
}

void RunConsole::redraw_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::duration<double>(redraw_s_));
    if (!stop_) draw_locked();
  }
}

}  // namespace dlhost
