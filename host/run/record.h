// record.h — what becomes of a case's record after it is made: the console line that reports
// it, the hash --resume matches it by (resume.h reads them back), and its scaling against the
// 1-rank record of the same case (speedup and efficiency). Records are data (record/record.h
// starts and ends them, results.h writes them); these are views and additions. Pure functions;
// thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "record/record.h"

namespace dlhost {

// The typed fields of a record are the record module's (record/record.h).
using record::RecordSummary;

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
