// record.h — the results record (docs/results-schema.json): its schema version and statuses, the
// one writer of the fields every record has (its head and its tail, in the schema's order), and
// the typed fields the host reads back (RecordSummary), read from the JSON in one place. A record
// stays its JSON between the head and the tail: the runner adds its blocks (backend, network,
// timing, distributed...) there, and every field, known here or not, is kept as written.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace dlhost::record {

// The schema version written into every record and the one the reader accepts.
inline constexpr int kSchemaVersion = 1;

// Result statuses. SKIPPED covers both "not available here" and a backend's UNIMPLEMENTED.
inline constexpr const char* kStatusOk = "OK";
inline constexpr const char* kStatusSkipped = "SKIPPED";
inline constexpr const char* kStatusFailed = "FAILED";
inline constexpr const char* kStatusTimeout = "TIMEOUT";
inline constexpr const char* kStatusOom = "OOM";          // out of memory (limit or machine)
inline constexpr const char* kStatusCrashed = "CRASHED";  // the case's process died

// --- the writer -------------------------------------------------------------------------------

// What every record starts with: which case of which suite, its outcome so far, when it started
// and the parameters it ran with.
struct Head {
  std::string case_id;
  std::string status = kStatusOk;
  std::string reason;
  std::string suite_name, suite_path, source;  // source: "FILE:LINE" of the case in the suite
  std::string started_at;                      // UTC, ISO 8601
};

// {"schema_version", "case_id", "status", "reason", "suite", "started_at", "params"}, in that
// order; the runner adds its blocks after these.
nlohmann::ordered_json start(const Head& head, const nlohmann::ordered_json& params);
// Ends the record: "duration_s" and "environment", the last fields of every record.
void finish(nlohmann::ordered_json& record, double duration_s,
            const nlohmann::ordered_json& environment);

// --- the typed fields a reader uses -----------------------------------------------------------

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

  // From a record as written (ordered) or as read back (record/results_file.h).
  static RecordSummary of(const nlohmann::ordered_json& record);
  static RecordSummary of(const nlohmann::json& record);
};

}  // namespace dlhost::record
