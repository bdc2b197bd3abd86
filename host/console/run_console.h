// run_console.h — what `dlhost run` prints while it runs. On a terminal: each finished case's
// line, and below them one line updated in place with case k of n, the running case's step and
// phase (from the progress channel), the time in the case and in the run, and an ETA from the
// cases done. When the output is not a terminal: the finished cases' lines only, as a log wants.
// With --quiet: the final summary only (errors go to stderr, which this does not own).
//
// Thread-safety: in live mode a redraw thread reads the channel a few times a second; every
// public call takes the same mutex, so lines never interleave.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "console/progress_channel.h"

namespace dlhost {

enum class ConsoleMode { live, plain, quiet };
// live when `fd` is a terminal (and TERM is not "dumb"), plain otherwise; quiet when asked.
ConsoleMode console_mode(int fd, bool quiet);

// A selected case as the console needs it; `runs` false for a case already known to be skipped
// (it takes no time, so the ETA does not count it).
struct PlannedCase {
  std::string id;  // as the console names it (suite/case_names.h), or the case id
  int64_t warmup = 0, iterations = 0;
  bool runs = true;
};

// "preparing", "warm-up 1/2 backward", "timed step 3/10 all-reduce".
std::string phase_text(const ProgressPoint& at, int64_t warmup, int64_t iterations);
// "0:07", "12:05", "1:02:03".
std::string clock_text(double seconds);
// Seconds left in the run: the mean time of the cases done times the cases still to run (the
// running one included), less what the running one has had; none before a case has ended.
std::optional<double> eta_seconds(const std::vector<double>& done_s, size_t left_with_current,
                                  double current_elapsed_s);

struct LiveStatus {
  size_t index = 0, total = 0;  // 1-based
  std::string case_id, phase;
  double case_s = 0, run_s = 0;
  std::optional<double> eta_s;
};
// "[ 3/12] lenet.cpu_onednn.b64.t2  timed step 4/10 backward  case 0:12  run 2:31  ETA 5:10",
// the case's name shortened so the line fits in `width` columns (a wrapped line cannot be redrawn).
std::string live_line(const LiveStatus& status, size_t width);

class RunConsole {
 public:
  // `channel` may be null (no step shown); `fd` is where the lines go (stdout in dlhost).
  RunConsole(ConsoleMode mode, int fd, const ProgressChannel* channel, double redraw_s = 0.25);
  ~RunConsole();
  RunConsole(const RunConsole&) = delete;
  RunConsole& operator=(const RunConsole&) = delete;

  void note(const std::string& line);     // informational: not printed with --quiet
  void summary(const std::string& line);  // printed in every mode
  void error(const std::string& line);    // to stderr, in every mode, the live line cleared first
  void plan(std::vector<PlannedCase> cases);
  void case_started(size_t index);  // 0-based, into the plan
  // The finished case's line and what to say under it (its warnings); the ETA learns its time.
  void case_finished(const std::string& line, const std::vector<std::string>& notes);

 private:
  void redraw_loop();
  void draw_locked();
  void clear_locked();
  void write_locked(const std::string& text);
  LiveStatus status_locked() const;

  ConsoleMode mode_;
  int fd_;
  const ProgressChannel* channel_;
  double redraw_s_;
  std::vector<PlannedCase> plan_;
  std::vector<double> done_s_;  // times of the finished cases that ran
  size_t current_ = 0;
  bool active_ = false, drawn_ = false, stop_ = false;
  double run_start_ = 0, case_start_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread redraw_;
};

}  // namespace dlhost
