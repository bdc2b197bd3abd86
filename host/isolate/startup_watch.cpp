// startup_watch.cpp — see startup_watch.h.
#include "isolate/startup_watch.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "isolate/case_process.h"

namespace dlhost {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::optional<std::string> marker_in(const std::string& line) {
  static const std::string kPrefix = "@@DLHOST_";
  size_t at = line.rfind(kPrefix);
  if (at != std::string::npos) return line.substr(at);
  // The start of a marker cut off by the end of the line: a write torn by a killed rank.
  size_t torn = line.rfind("@@");
  if (torn != std::string::npos && kPrefix.compare(0, line.size() - torn, line, torn) == 0)
    return "";
  return std::nullopt;
}

void WorkerReports::line(const std::string& l) {
  auto starts = [&](const char* m) { return l.rfind(m, 0) == 0; };
  try {
    if (starts(kRecordMarker)) {
      record = json::parse(l.substr(std::strlen(kRecordMarker)));
    } else if (starts(kProgressMarker)) {
      std::istringstream in(l.substr(std::strlen(kProgressMarker)));
      int rank = 0, phase = 0;
      int64_t step = 0;
      if (in >> rank >> step >> phase) {
        progress[rank] = {step, phase};
        last_report = Clock::now();
      }
    } else if (starts(kStageMarker)) {
      std::istringstream in(l.substr(std::strlen(kStageMarker)));
      int rank = 0;
      std::string stage;
      if (in >> rank >> stage) {
        stages[rank] = stage;
        last_report = Clock::now();
      }
    } else if (starts(kRankFailedMarker)) {
      rank_failures.push_back(json::parse(l.substr(std::strlen(kRankFailedMarker))));
    } else if (starts(kNeedMarker)) {
      need = json::parse(l.substr(std::strlen(kNeedMarker)));
    } else if (starts(kCrashDataMarker)) {
      crash_data_bytes = std::stoull(l.substr(std::strlen(kCrashDataMarker))) * 1024;
    }
  } catch (const std::exception&) {
    // A torn marker line (a rank killed mid-write) carries nothing usable.
  }
}

namespace {

// Where rank `r` is in its start-up, from what it reported, for a message.
std::string start_up_state(const WorkerReports& reports, int r, const std::string& comm) {
  auto stage = reports.stages.find(r);
  if (reports.progress.count(r) != 0 || (stage != reports.stages.end() && stage->second == "ready"))
    return "was ready";
  if (stage == reports.stages.end()) return "never started";
  if (stage->second == "comm")
    return "waited in the comm's init (comm " + comm + ") for the others";
  if (stage->second == "weights")
    return "waited in the weights' broadcast from rank 0 (comm " + comm + ") for the others";
  return "started but had not reached the comm's init (loading, building or compiling the model)";
}

}  // namespace

// "rank 1 stopped in forward of step 3 (others reached the all-reduce of step 3)": the ranks
// that fell behind when a case hung. A rank blocked in a collective waits for the laggard, so
// the laggard is the one in the earliest phase. Before any step, the ranks' start-up stages.
std::string laggard(const WorkerReports& reports, int ranks, const std::string& comm,
                    const RankPlace& place) {
  static const char* const kPhases[] = {"forward", "backward", "the all-reduce", "update"};
  auto where = [](std::pair<int64_t, int> at) {
    return std::string(kPhases[std::clamp(at.second, 0, 3)]) + " of step " +
           std::to_string(at.first);
  };
  auto rank_name = [&](int r) {
    return "rank " + std::to_string(r) + (place ? place(r, false) : std::string());
  };
  if (ranks <= 1) return "";
  const auto& progress = reports.progress;
  std::string out;
  if (progress.empty()) {
    // No rank reached a step: each rank's start-up stage.
    for (int r = 0; r < ranks; ++r) {
      const std::string state = start_up_state(reports, r, comm);
      out += (out.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
             (place ? place(r, state == "never started") : std::string()) + " " + state;
    }
    return "no rank reached its first step: " + out;
  }
  std::pair<int64_t, int> most{-1, 0};
  for (const auto& [r, at] : progress) most = std::max(most, at);
  for (int r = 0; r < ranks; ++r) {
    auto it = progress.find(r);
    std::string item;
    if (it == progress.end()) {
      item = rank_name(r) + " never started a step (" + start_up_state(reports, r, comm) + ")";
    } else if (it->second < most) {
      item = rank_name(r) + " stopped in " + where(it->second) + " (others reached " + where(most) +
             ")";
    }
    if (!item.empty()) out += (out.empty() ? "" : "; ") + item;
  }
  return out;
}

std::string StartupWatch::stalled(const WorkerReports& reports, Clock::time_point now) const {
  if (ranks <= 1 || limit_s <= 0) return "";
  bool waiting = false, all_ready = true;
  for (int r = 0; r < ranks; ++r) {
    auto stage = reports.stages.find(r);
    const bool ready = reports.progress.count(r) != 0 ||
                       (stage != reports.stages.end() && stage->second == "ready");
    all_ready = all_ready && ready;
    if (!ready &&
        (stage == reports.stages.end() || stage->second == "comm" || stage->second == "weights"))
      waiting = true;
  }
  if (all_ready || !waiting) return "";
  const Clock::time_point last = std::max(launched, reports.last_report);
  const double quiet_s = std::chrono::duration<double>(now - last).count();
  if (quiet_s < limit_s) return "";
  std::string out;
  for (int r = 0; r < ranks; ++r) {
    const std::string state = start_up_state(reports, r, comm);
    if (state == "was ready") continue;
    const bool show_processes = state == "never started";
    out += (out.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
           (place ? place(r, show_processes) : std::string()) + " " + state;
  }
  char head[160];
  std::snprintf(head, sizeof(head),
                "start-up stalled: the ranks waited for each other %.0f s with no rank moving on "
                "(startup_timeout %g s): ",
                quiet_s, limit_s);
  return head + out;
}

}  // namespace dlhost
