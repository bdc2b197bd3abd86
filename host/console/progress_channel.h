// progress_channel.h — how a case's process tells `dlhost run` where its training loop is,
// without touching the timing: one shared-memory word that rank 0 stores (step, phase) into as
// each step enters each phase, read by the parent's console when it redraws.
//
// The parent creates the memory once per run (a memfd, close-on-exec) and names it to every case
// process in DLHOST_PROGRESS ("/proc/PID/fd/N TOKEN"), which mpirun forwards and fork/exec
// inherit. A store is one relaxed atomic write to an already-mapped page: no system call, no
// lock, no flush inside the timed region. A process attaches only when the page starts with the
// token, so a rank on another node, where /proc/PID/fd/N is some other file, never writes to it.
//
// Thread-safety: read() may run on any thread while a case (this process or another) publishes.
#pragma once

#include <cstdint>
#include <string>

namespace dlhost {

struct RunContext;
struct ProgressPage;  // the shared page's layout (progress_channel.cpp)

inline constexpr const char* kProgressVariable = "DLHOST_PROGRESS";

// Where the case's training loop is. Phases are RunContext::on_progress's: 0 forward,
// 1 backward, 2 gradient all-reduce, 3 update; `step` counts warm-up steps first.
struct ProgressPoint {
  bool started = false;  // false: no step entered yet (plugins, graph, compile, weights)
  int64_t step = 0;
  int phase = 0;
};

// One word of shared memory: the encoding both ends use.
uint64_t encode_progress(int64_t step, int phase);
ProgressPoint decode_progress(uint64_t word);

// The parent's end, made once per run. Throws std::runtime_error when the memory cannot be made.
class ProgressChannel {
 public:
  ProgressChannel();
  ~ProgressChannel();
  ProgressChannel(const ProgressChannel&) = delete;
  ProgressChannel& operator=(const ProgressChannel&) = delete;

  // The value of DLHOST_PROGRESS that lets a case process attach.
  const std::string& address() const { return address_; }
  void reset();  // before each case: nothing started
  ProgressPoint read() const;
  void publish(int64_t step, int phase);  // for a case run in this process (--no-isolate)

 private:
  ProgressPage* page_ = nullptr;
  int fd_ = -1;
  std::string address_;
};

// The case process's end: when DLHOST_PROGRESS names a channel and this is rank 0, chains a
// store into it after ctx.on_progress. Does nothing otherwise (no variable, another rank, a
// channel that cannot be opened or whose token does not match).
void attach_progress_publisher(RunContext& ctx);

}  // namespace dlhost
