// startup_watch.h — what a case's workers say on stdout and what `dlhost run` makes of it: the
// marker lines (rank 0's record, each rank's start-up stages and steps, a failing rank's reason),
// the rank that fell behind when a case hung, and the watch on a multi-rank start-up that names a
// stall long before the case's timeout. Internal to isolate (case_process.cpp, case_worker.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace dlhost {

// Marker lines on a worker's stdout.
inline constexpr const char* kRecordMarker = "@@DLHOST_RECORD@@ ";
inline constexpr const char* kProgressMarker = "@@DLHOST_PROGRESS@@ ";
inline constexpr const char* kRankFailedMarker = "@@DLHOST_RANK_FAILED@@ ";
inline constexpr const char* kStageMarker = "@@DLHOST_STAGE@@ ";
// Under memory_limit_mb: the largest tensor of the case's graph (run/memory_need.h), as JSON; and,
// from a crash signal's handler, the data the process held then, in kB (VmData).
inline constexpr const char* kNeedMarker = "@@DLHOST_NEED@@ ";
inline constexpr const char* kCrashDataMarker = "@@DLHOST_CRASH_DATA@@ ";
// How long the ranks of a multi-rank case may all wait for each other at start-up when the case
// sets no `startup_timeout` is the key table's unset value (suite/schema.cpp), read there.

// What the workers said on stdout.
struct WorkerReports {
  nlohmann::ordered_json record;
  std::map<int, std::pair<int64_t, int>> progress;    // rank -> (step, phase) last entered
  std::map<int, std::string> stages;                  // rank -> start-up stage last entered
  std::vector<nlohmann::ordered_json> rank_failures;  // {rank, status, reason}
  nlohmann::ordered_json need;                        // kNeedMarker's, or null
  uint64_t crash_data_bytes = 0;                      // kCrashDataMarker's; 0: none
  std::chrono::steady_clock::time_point
      last_report{};  // when a rank last said it moved on (stage or step)
  // Takes one marker line (from marker_in).
  void line(const std::string& l);
};

// Where a rank runs, for a message: " (test host dlhn12h1 at 10.213.5.3)" on test hosts, else "".
// With `processes`, also what runs in that host, which tells a launcher that never started the
// rank there from a rank that started and stopped.
using RankPlace = std::function<std::string(int rank, bool processes)>;

// "rank 1 stopped in forward of step 3 (others reached the all-reduce of step 3)": the ranks
// that fell behind when a case hung; "" for a single rank.
std::string laggard(const WorkerReports& reports, int ranks, const std::string& comm,
                    const RankPlace& place);

// The start-up of a multi-rank case, watched by the parent: the ranks wait for each other there
// (the launcher starting them, the comm's init, the weights' broadcast), with no timeout of
// their own (Open MPI's daemons, MPI_Init and a collective wait forever by default). When no rank
// has moved on for `limit` while one of them waits for another (a rank not started, one in the
// comm's init or in the weights' broadcast), the start-up has stalled: the case is ended then,
// naming each rank, its host and what it waited for, long before the case's timeout. A rank that
// is only slow to compile is working, not waiting: as long as every rank has started and none
// waits, nothing is declared.
struct StartupWatch {
  using Clock = std::chrono::steady_clock;
  int ranks = 0;
  double limit_s = 0;
  std::string comm;
  RankPlace place;
  Clock::time_point launched;

  // "" while the start-up goes on (or is over), else why it stalled.
  std::string stalled(const WorkerReports& reports, Clock::time_point now) const;
};

}  // namespace dlhost
