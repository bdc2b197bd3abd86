// record.cpp — see record.h.
#include "record/record.h"

#include "record/blocks.h"

#include <cstdio>

namespace dlhost::record {

using ordered_json = nlohmann::ordered_json;

ordered_json start(const Head& head, const ordered_json& params) {
  ordered_json rec;
  rec["schema_version"] = kSchemaVersion;
  rec["case_id"] = head.case_id;
  rec["status"] = head.status;
  rec["reason"] = head.reason;
  rec["suite"] =
      ordered_json{{"name", head.suite_name}, {"path", head.suite_path}, {"source", head.source}};
  rec["started_at"] = head.started_at;
  rec["params"] = params;
  return rec;
}

void finish(ordered_json& rec, double duration_s, const ordered_json& environment) {
  rec["duration_s"] = duration_s;
  rec["environment"] = environment;
}

namespace {

// One reading for both JSON kinds: the record as the runner holds it and as a reader parsed it.
template <class Json>
RecordSummary summary_of(const Json& rec) {
  RecordSummary r;
  r.case_id = rec.value("case_id", std::string());
  r.status = rec.value("status", std::string());
  r.reason = rec.value("reason", std::string());
  r.params_hash = rec.value("params_hash", std::string());
  if (const std::optional<Timing> t = read_timing(rec)) {
    r.timed = true;
    r.iterations = t->iterations;
    // No timed step (a TIMEOUT in warm-up): the figures are null, read as 0.
    r.median_ms = t->step.median;
    r.p5_ms = t->step.p5;
    r.p95_ms = t->step.p95;
    r.samples_per_second = t->samples_per_second.value_or(0.0);
    if (t->data && t->data->measured) r.data_ms = t->data->median;
  }
  if (auto e = rec.find("evaluation"); e != rec.end() && e->is_object()) {
    char buf[160];
    if (e->value("status", std::string()) != kStatusOk) {
      r.evaluation = "evaluation " + e->value("status", std::string()) + ": " +
                     e->value("reason", std::string());
    } else if (e->contains("accuracy")) {
      std::snprintf(buf, sizeof(buf), "test accuracy %.4f (%lld samples)",
                    (*e)["accuracy"].template get<double>(),
                    static_cast<long long>((*e)["samples"].template get<int64_t>()));
      r.evaluation = buf;
    } else if (e->contains("perplexity")) {
      std::snprintf(buf, sizeof(buf), "test perplexity %.2f",
                    (*e)["perplexity"].template get<double>());
      r.evaluation = buf;
    } else {
      std::snprintf(buf, sizeof(buf), "test loss %.4f", (*e)["mean_loss"].template get<double>());
      r.evaluation = buf;
      if (e->contains("accuracy_status"))
        r.evaluation += " (accuracy " + e->value("accuracy_status", std::string()) + ": " +
                        e->value("accuracy_reason", std::string()) + ")";
    }
  }
  if (const std::optional<Distributed> d = read_distributed(rec)) {
    r.ranks = static_cast<int>(d->ranks);
    r.weak = d->scaling == "weak";
  }
  if (const std::optional<Backend> b = read_backend(rec)) {
    r.backend = b->name;
    r.backend_by_priority = b->chosen_by == "priority";
  }
  return r;
}

}  // namespace

RecordSummary RecordSummary::of(const ordered_json& record) { return summary_of(record); }
RecordSummary RecordSummary::of(const nlohmann::json& record) { return summary_of(record); }

}  // namespace dlhost::record
