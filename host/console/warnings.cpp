// warnings.cpp — see warnings.h.
#include "console/warnings.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "console/library_dispatch.h"
#include "core/stats.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", fraction * 100.0);
  return buf;
}

std::string decimals(double v, int n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", n, v);
  return buf;
}

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; }

double rusage_seconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

const json& member(const json& j, const char* key) {
  static const json null_value;
  auto it = j.find(key);
  return it != j.end() ? *it : null_value;
}

int64_t integer(const json& j, const char* key, int64_t fallback) {
  const json& v = member(j, key);
  return v.is_number_integer() ? v.get<int64_t>() : fallback;
}

std::vector<Warning> spread_warning(const record::Timing& timing, const WarningThresholds& t) {
  const std::vector<double>& steps = timing.samples.step;
  if (steps.size() < static_cast<size_t>(t.spread_min_iterations)) return {};
  double median = percentile(steps, 50);
  if (median <= 0) return {};
  double spread = (percentile(steps, 75) - percentile(steps, 25)) / median;
  if (spread <= t.spread_iqr_over_median) return {};
  size_t more = std::max<size_t>(20, steps.size() * 3);
  return {{kWarnSpread,
           "step times spread widely: IQR/median " + percent(spread) + " (threshold " +
               percent(t.spread_iqr_over_median) + ") over " + std::to_string(steps.size()) +
               " timed steps; run more iterations (e.g. --set iterations=" + std::to_string(more) +
               ") or on a quieter machine"}};
}

// The timed steps still falling: a cache, allocator or JIT that settles after the warm-up makes the
// first timed steps slower than the rest, and a median over few steps then reads the transient
// (cpu_mxnet's AlexNet-R b1024 settles at its 4th step: its steps 2 and 3 still write into memory
// the process never touched, bench/results/2026-12-07-warmup). A third of the steps at each end;
// every step of the first third more than half the threshold over the last third's median, so
// that one slow step beside a settled one is noise (spread's), not this.
std::vector<Warning> warmup_warning(const record::Timing& timing, const WarningThresholds& t) {
  const std::vector<double>& steps = timing.samples.step;
  if (steps.size() < static_cast<size_t>(std::max(2, t.warmup_min_iterations))) return {};
  const size_t k = (steps.size() + 2) / 3;
  const std::vector<double> head(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(k));
  const std::vector<double> tail(steps.end() - static_cast<std::ptrdiff_t>(k), steps.end());
  const double first = percentile(head, 50), last = percentile(tail, 50);
  if (last <= 0 || first <= last * (1 + t.warmup_head_over_tail)) return {};
  const double floor = last * (1 + t.warmup_head_over_tail / 2);
  if (std::any_of(head.begin(), head.end(), [&](double s) { return s <= floor; })) return {};
  const std::string n = std::to_string(k);
  return {{kWarnWarmupShort,
           "the first " + n + " timed step(s) (median " + decimals(first, 2) + " ms) took " +
               percent(first / last - 1) + " longer than the last " + n + " (" + decimals(last, 2) +
               " ms; threshold " + percent(t.warmup_head_over_tail) +
               "): the step had not settled when timing began, so the median leans on the "
               "warm-up; raise warmup (e.g. --set warmup=" +
               std::to_string(timing.warmup + static_cast<int64_t>(k)) + ")"}};
}

std::vector<Warning> threads_warning(const json& record) {
  const json& params = member(record, "params");
  const std::optional<record::Resolved> resolved = record::read_resolved(record);
  int64_t threads = resolved ? resolved->threads_used : 0;
  if (threads <= 0) threads = integer(params, "threads", 0);
  // Ranks share a node's cores; ranks_per_node says how many do when the case spans nodes.
  int64_t ranks = integer(params, "ranks_per_node", integer(params, "ranks", 1));
  int64_t cores = integer(member(record, "environment"), "cores", 0);
  if (threads <= 0 || cores <= 0 || threads * ranks <= cores) return {};
  return {{kWarnThreads, std::to_string(threads) + " thread(s) x " + std::to_string(ranks) +
                             " rank(s) on " + std::to_string(cores) +
                             " core(s): threads take turns on cores, so the times measure "
                             "oversubscription"}};
}

std::vector<Warning> load_warning(const CaseLoad& load, const WarningThresholds& t) {
  if (!load.measured || load.wall_s < t.load_min_duration_s ||
      load.other_busy_cores <= t.other_busy_cores)
    return {};
  return {{kWarnOtherLoad, "other processes kept " + decimals(load.other_busy_cores, 2) +
                               " core(s) busy on average during the case (threshold " +
                               decimals(t.other_busy_cores, 2) +
                               "): its times may be disturbed; rerun on a quiet machine"}};
}

void append(std::vector<Warning>& to, std::vector<Warning> more) {
  to.insert(to.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

}  // namespace

double busy_seconds(const std::string& proc_stat, long ticks_per_second,
                    const std::vector<int>& cpus) {
  std::istringstream in(proc_stat);
  std::string line;
  double ticks = 0;
  while (std::getline(in, line)) {
    // "cpuN ..." lines only; "cpu ..." is the machine's sum.
    int cpu = -1;
    if (line.size() < 4 || !std::isdigit(static_cast<unsigned char>(line[3])) ||
        std::sscanf(line.c_str(), "cpu%d", &cpu) != 1)
      continue;
    if (!cpus.empty() && std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    std::istringstream fields(line.substr(line.find(' ')));
    // user nice system idle iowait irq softirq steal (guest time is inside user already)
    double v[8] = {};
    for (double& x : v) fields >> x;
    ticks += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  }
  return ticks_per_second > 0 ? ticks / static_cast<double>(ticks_per_second) : 0.0;
}

CpuTimes sample_cpu_times() {
  CpuTimes t;
  std::ifstream in("/proc/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  t.machine_busy_s = busy_seconds(text, sysconf(_SC_CLK_TCK), allowed_cpus());
  t.own_s = rusage_seconds(RUSAGE_SELF) + rusage_seconds(RUSAGE_CHILDREN);
  t.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return t;
}

CaseLoad load_between(const CpuTimes& before, const CpuTimes& after) {
  CaseLoad load;
  load.wall_s = after.wall_s - before.wall_s;
  if (load.wall_s <= 0 || after.machine_busy_s <= 0) return load;
  double others = (after.machine_busy_s - before.machine_busy_s) - (after.own_s - before.own_s);
  load.other_busy_cores = std::max(0.0, others / load.wall_s);
  load.measured = true;
  return load;
}

std::vector<Warning> environment_warnings(const json& environment, const WarningThresholds&) {
  std::vector<Warning> out;
  const json& governor = member(environment, "cpu_governor");
  if (governor.is_string() && governor != "performance" && governor != "unknown")
    out.push_back(
        {kWarnGovernor, "CPU frequency governor is '" + governor.get<std::string>() +
                            "', not 'performance': clock speeds change under load and between runs "
                            "(cpupower frequency-set -g performance)"});
  const json& build = member(environment, "build_type");
  if (build.is_string() && build != "Release" && build != "RelWithDebInfo" && build != "MinSizeRel")
    out.push_back({kWarnDebugBuild, "dlhost was built as '" + build.get<std::string>() +
                                        "', not an optimized build: host-side time is inflated "
                                        "(rebuild with scripts/build.sh, a Release build)"});
  return out;
}

// The backend plugin says it was compiled without optimisation (backend.build.optimized false,
// from DLHOST_PLUGIN_BUILD_SYMBOL): a vendor's first build with no CMAKE_BUILD_TYPE is -O0 and
// an order of magnitude slower, which nothing else in the record shows.
std::vector<Warning> plugin_build_warning(const json& record) {
  const std::optional<record::Backend> backend = record::read_backend(record);
  if (!backend || !backend->build || backend->build->optimized) return {};
  return {{kWarnPluginDebugBuild, "backend plugin '" + backend->name +
                                      "' was compiled without optimisation (" +
                                      backend->build->text +
                                      "): its times are not benchmark numbers (rebuild it with "
                                      "-DCMAKE_BUILD_TYPE=Release)"}};
}

std::vector<Warning> case_warnings(const json& record, const CaseLoad& load,
                                   const WarningThresholds& t) {
  const std::optional<record::Timing> timing = record::read_timing(record, true);
  if (!timing) return {};
  std::vector<Warning> out = spread_warning(*timing, t);
  append(out, warmup_warning(*timing, t));
  append(out, threads_warning(record));
  append(out, load_warning(load, t));
  append(out, plugin_build_warning(record));
  append(out, library_dispatch_warnings(record));
  return out;
}

json warnings_json(const json& record, const CaseLoad& load, const WarningThresholds& t) {
  if (!record::block_of(record, "timing")) return json::array();
  std::vector<Warning> all = environment_warnings(member(record, "environment"), t);
  append(all, case_warnings(record, load, t));
  return record::to_json(all);
}

}  // namespace dlhost
