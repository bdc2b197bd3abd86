// warnings.h — what the best harnesses warn about when a measurement may not mean what it seems:
// a wide spread of step times, timed steps that were still settling (warm-up too short), a CPU
// frequency governor other than `performance`, a host that is not an optimized build, more
// threads than cores, and other processes busy while the case ran.
//
// Every rule reads a record (and, for the machine's load, what the parent measured around the
// case) and gives {code, message} items; `dlhost run` prints them and stores them in the record's
// `warnings` array. The thresholds live in WarningThresholds, documented in docs/report.md.
// Rules are pure functions (thread-safe); sample_cpu_times reads /proc and getrusage.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "record/blocks.h"

namespace dlhost {

// {code, message}: the record's `warnings` items (record/blocks.h writes and reads them).
using Warning = record::Warning;

// The one place the warning thresholds are set (docs/report.md, "Warnings").
struct WarningThresholds {
  double spread_iqr_over_median = 0.10;  // spread: IQR / median of the timed step times above this
  int spread_min_iterations = 3;         // ... computed only from this many timed steps on
  // warmup_short: the median of the first third of the timed steps over the median of the last
  // third, above 1 + this, and every step of the first third above 1 + this / 2 times it
  double warmup_head_over_tail = 0.05;
  int warmup_min_iterations = 4;     // ... judged only from this many timed steps on
  double other_busy_cores = 0.5;     // other_load: others' average busy cores above this
  double load_min_duration_s = 1.0;  // ... judged only for cases at least this long
};

// Warning codes, as the record and the report name them.
inline constexpr const char* kWarnSpread = "spread";
inline constexpr const char* kWarnWarmupShort = "warmup_short";
inline constexpr const char* kWarnGovernor = "cpu_governor";
inline constexpr const char* kWarnDebugBuild = "debug_build";
inline constexpr const char* kWarnPluginDebugBuild = "plugin_debug_build";
inline constexpr const char* kWarnThreads = "threads_exceed_cores";
inline constexpr const char* kWarnOtherLoad = "other_load";

// CPU time around a case, as the parent sees it.
struct CpuTimes {
  double machine_busy_s = 0;  // busy time of the CPUs this process may run on (/proc/stat)
  double own_s = 0;           // this process and its waited-for descendants (getrusage)
  double wall_s = 0;          // a monotonic clock
};
CpuTimes sample_cpu_times();

// The busy seconds of the CPUs `cpus` selects in /proc/stat's text (all "cpuN" lines when
// empty): user + nice + system + irq + softirq + steal, at `ticks_per_second`.
double busy_seconds(const std::string& proc_stat, long ticks_per_second,
                    const std::vector<int>& cpus);

// What ran beside the case: the others' average busy cores over its wall time.
struct CaseLoad {
  double wall_s = 0;
  double other_busy_cores = 0;
  bool measured = false;
};
CaseLoad load_between(const CpuTimes& before, const CpuTimes& after);

// Of the environment block, the same for every case of a run: governor, build type.
std::vector<Warning> environment_warnings(const nlohmann::ordered_json& environment,
                                          const WarningThresholds& t = {});
// Of one case's measurement: spread, warm-up, threads against cores, other load. Records without a
// timing block (skipped, or no step ran) get none.
std::vector<Warning> case_warnings(const nlohmann::ordered_json& record, const CaseLoad& load,
                                   const WarningThresholds& t = {});
// Both, as the record's `warnings` array (none for a record without a timing block).
nlohmann::ordered_json warnings_json(const nlohmann::ordered_json& record, const CaseLoad& load,
                                     const WarningThresholds& t = {});

}  // namespace dlhost
