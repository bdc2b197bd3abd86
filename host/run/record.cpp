// record.cpp — see record.h.
#include "run/record.h"

#include <cstdint>
#include <cstdio>

#include "record/blocks.h"
#include "run/results.h"
#include "run/runner.h"
#include "suite/case_params.h"
#include "suite/schema.h"

namespace dlhost {

using json = nlohmann::ordered_json;

std::string case_line(size_t index, size_t total, const RecordSummary& rec) {
  char head[256];
  std::snprintf(head, sizeof(head), "[%*zu/%zu] %-40s %-8s",
                static_cast<int>(std::to_string(total).size()), index, total, rec.case_id.c_str(),
                rec.status.c_str());
  std::string line = head;
  if (rec.timed && rec.iterations == 0) {
    line += " no timed step";
  } else if (rec.timed) {
    char body[256];
    std::snprintf(body, sizeof(body),
                  " median %9.2f ms/mini-batch (p5 %.2f, p95 %.2f, n=%lld)  %10.1f samples/s",
                  rec.median_ms, rec.p5_ms, rec.p95_ms, static_cast<long long>(rec.iterations),
                  rec.samples_per_second);
    line += body;
    if (rec.data_ms >= 0) {
      std::snprintf(body, sizeof(body), "  data wait %.2f ms", rec.data_ms);
      line += body;
    }
  }
  if (!rec.evaluation.empty()) line += "  " + rec.evaluation;
  if (!rec.reason.empty()) line += "  " + rec.reason;
  if (rec.backend_by_priority) line += "  (backend " + rec.backend + ", by priority)";
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

namespace {

// The 1-rank case a multi-rank case is compared with: the same parameters but for how the ranks
// are launched and communicate (the schema's launch-only keys).
std::string scaling_key(const json& params) {
  static const std::vector<std::string> launch_only = launch_only_keys();
  json p = params;
  for (const std::string& k : launch_only) p.erase(k);
  return p.dump();
}

// Strong scaling compares time per global mini-batch (speedup T1/TN); weak scaling compares
// throughput (N x T1/TN). Efficiency is speedup / N.
void add_scaling(json& rec, const RecordSummary& n_ranks, const RecordSummary& baseline) {
  const double t1 = baseline.median_ms, tn = n_ranks.median_ms;
  const int n = n_ranks.ranks;
  double speedup = tn > 0 ? (n_ranks.weak ? n * t1 / tn : t1 / tn) : 0.0;
  rec["distributed"]["vs_1_rank"] =
      record::to_json(record::VsOneRank{baseline.case_id, speedup, speedup / n});
}

}  // namespace

void ScalingBaselines::add(const json& params, json& rec) {
  const RecordSummary r = RecordSummary::of(rec);
  if (r.status != kStatusOk) return;
  std::string key = scaling_key(params);
  if (case_params(params).ranks == 1) {
    one_rank_.emplace(key, r);
  } else if (rec.contains("distributed") && one_rank_.count(key)) {
    add_scaling(rec, r, one_rank_[key]);
  }
}

}  // namespace dlhost
