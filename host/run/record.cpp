// record.cpp — see record.h.
#include "run/record.h"

#include <cstdint>
#include <cstdio>

#include "run/results.h"
#include "run/runner.h"
#include "suite/schema.h"

namespace dlhost {

using json = nlohmann::ordered_json;

std::string case_line(size_t index, size_t total, const json& rec) {
  char head[256];
  std::snprintf(head, sizeof(head), "[%*zu/%zu] %-40s %-8s",
                static_cast<int>(std::to_string(total).size()), index, total,
                rec["case_id"].get<std::string>().c_str(),
                rec["status"].get<std::string>().c_str());
  std::string line = head;
  if (rec.contains("timing")) {
    const auto& t = rec["timing"];
    const auto& s = t["step"];
    char body[256];
    std::snprintf(body, sizeof(body),
                  " median %9.2f ms/mini-batch (p5 %.2f, p95 %.2f, n=%lld)  %10.1f samples/s",
                  s["median"].get<double>(), s["p5"].get<double>(), s["p95"].get<double>(),
                  static_cast<long long>(t["iterations"].get<int64_t>()),
                  t["samples_per_second"].get<double>());
    line += body;
  }
  if (!rec["reason"].get<std::string>().empty()) line += "  " + rec["reason"].get<std::string>();
  if (rec.contains("backend") && rec["backend"].value("chosen_by", "") == "priority")
    line += "  (backend " + rec["backend"]["name"].get<std::string>() + ", by priority)";
  return line;
}

std::string params_hash(const json& params) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : params.dump()) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::set<std::pair<std::string, std::string>> recorded_cases(const std::string& path, int* torn) {
  std::set<std::pair<std::string, std::string>> done;
  ResultsFile previous = read_results(path);
  for (const auto& r : previous.records)
    if (r.contains("case_id") && r.contains("params_hash"))
      done.insert({r["case_id"].get<std::string>(), r["params_hash"].get<std::string>()});
  if (torn != nullptr) *torn = previous.torn_lines;
  return done;
}

namespace {

// The 1-rank case a multi-rank case is compared with: the same parameters but for how the ranks
// are launched and communicate.
std::string scaling_key(const json& params) {
  json p = params;
  for (const char* k : {"ranks", "comm", "launcher", "launcher_args", "ranks_per_node", "overlap",
                        "bucket_mb", "tags", "oversubscribe", "timeout"})
    p.erase(k);
  return p.dump();
}

// Strong scaling compares time per global mini-batch (speedup T1/TN); weak scaling compares
// throughput (N x T1/TN). Efficiency is speedup / N.
void add_scaling(json& rec, const json& baseline) {
  double t1 = baseline["timing"]["step"]["median"].get<double>();
  double tn = rec["timing"]["step"]["median"].get<double>();
  int n = rec["distributed"]["ranks"].get<int>();
  bool weak = rec["distributed"]["scaling"] == "weak";
  double speedup = tn > 0 ? (weak ? n * t1 / tn : t1 / tn) : 0.0;
  rec["distributed"]["vs_1_rank"] = json{
      {"baseline_case", baseline["case_id"]}, {"speedup", speedup}, {"efficiency", speedup / n}};
}

}  // namespace

void ScalingBaselines::add(const json& params, json& rec) {
  if (rec["status"] != kStatusOk) return;
  std::string key = scaling_key(params);
  if (case_value<int64_t>(params, "ranks") == 1) {
    one_rank_.emplace(key, rec);
  } else if (rec.contains("distributed") && one_rank_.count(key)) {
    add_scaling(rec, one_rank_[key]);
  }
}

}  // namespace dlhost
