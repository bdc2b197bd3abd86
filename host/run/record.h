// record.h — what becomes of a case's record after it is made: the console line that reports
// it, the hash --resume matches it by (resume.h reads them back), and its scaling against the
// 1-rank record of the same case (speedup and efficiency). Records are data (results.h writes
// them); these are views and additions. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

namespace dlhost {

// The fields of a record the host itself reads back (the console line, --resume, scaling), typed
// and read from the JSON in one place (RecordSummary::of), so no view looks keys up on its own.
struct RecordSummary {
  std::string case_id, status, reason, params_hash;  // params_hash: "" before it is added
  bool timed = false;                                // the record has a timing block
  double median_ms = 0, p5_ms = 0, p95_ms = 0, samples_per_second = 0;
  int64_t iterations = 0;
  int ranks = 1;                     // from the distributed block; 1 without one
  bool weak = false;                 // weak scaling
  std::string backend;               // "" when the case never reached its backend
  bool backend_by_priority = false;  // the host chose the backend (the suite left it unset)
  // Real data: the median wait for a mini-batch (< 0 when synthetic), and the evaluation's
  // figures as one text ("test accuracy 0.9731 (9984 samples)"; "" without one).
  double data_ms = -1;
  std::string evaluation;

  static RecordSummary of(const nlohmann::ordered_json& record);
};

// "[ 3/12] lenet.cpu_onednn.b64.t2  OK  median ... ms/mini-batch (p5 ..., p95 ..., n=20) ...".
std::string case_line(size_t index, size_t total, const RecordSummary& record);

// Identifies a case's parameters for --resume: a changed case runs again.
std::string params_hash(const nlohmann::ordered_json& params);

// Keeps the OK 1-rank records of a run and adds `distributed.vs_1_rank` to each OK multi-rank
// record whose 1-rank twin (the same parameters but for how the ranks are launched and
// communicate) ran before it.
class ScalingBaselines {
 public:
  void add(const nlohmann::ordered_json& params, nlohmann::ordered_json& record);

 private:
  std::map<std::string, RecordSummary> one_rank_;  // scaling key -> the 1-rank record
};

}  // namespace dlhost
