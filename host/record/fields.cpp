// fields.cpp — see fields.h.
#include "record/fields.h"

#include "record/blocks.h"

#include <cmath>
#include <sstream>
#include <utility>

namespace dlhost::record {

namespace {
const json* at(const json& j, const char* pointer) {
  json::json_pointer p(pointer);
  if (!j.contains(p)) return nullptr;
  return &j.at(p);
}
}  // namespace

bool has(const json& j, const char* pointer) { return at(j, pointer) != nullptr; }

double number_at(const json& j, const char* pointer, double fallback) {
  const json* v = at(j, pointer);
  return v && v->is_number() ? v->get<double>() : fallback;
}

long long integer_at(const json& j, const char* pointer, long long fallback) {
  const json* v = at(j, pointer);
  if (!v || !v->is_number()) return fallback;
  if (v->is_number_integer()) return v->get<long long>();  // an unsigned above 2^63 wraps
  // A float outside long long's range (1e300) would be undefined behaviour to convert.
  double d = v->get<double>();
  return std::isfinite(d) && std::abs(d) < 9.2e18 ? static_cast<long long>(d) : fallback;
}

std::string text_at(const json& j, const char* pointer, const std::string& fallback) {
  const json* v = at(j, pointer);
  if (!v || v->is_null()) return fallback;
  return v->is_string() ? v->get<std::string>() : v->dump();
}

std::vector<double> numbers_at(const json& j, const char* pointer) {
  std::vector<double> out;
  const json* v = at(j, pointer);
  if (v && v->is_array())
    for (const auto& x : *v)
      if (x.is_number()) out.push_back(x.get<double>());
  return out;
}

std::string case_id(const Record& r) { return r.data["case_id"].get<std::string>(); }
std::string status(const Record& r) { return r.data["status"].get<std::string>(); }
bool is_ok(const Record& r) { return status(r) == kStatusOk; }

// The typed fields below read the record's blocks through their one reader (blocks.h); the case's
// parameters stand in where a record has no such block (a case that never reached it).

std::string network(const Record& r) {
  const std::optional<Network> n = read_network(r.data);
  return n && !n->name.empty() ? n->name : text_at(r.data, "/params/network", "?");
}

std::string backend(const Record& r) {
  const std::optional<Backend> b = read_backend(r.data);
  return b && !b->name.empty() ? b->name : text_at(r.data, "/params/backend", "?");
}

int threads(const Record& r) {
  const std::optional<Resolved> resolved = read_resolved(r.data);
  if (resolved && resolved->threads_used > 0) return resolved->threads_used;
  return static_cast<int>(integer_at(r.data, "/params/threads", 0));
}

int batch(const Record& r) {
  const std::optional<Resolved> resolved = read_resolved(r.data);
  return static_cast<int>(resolved && resolved->batch > 0 ? resolved->batch
                                                          : integer_at(r.data, "/params/batch", 0));
}

int ranks(const Record& r) {
  const std::optional<Distributed> d = read_distributed(r.data);
  return static_cast<int>(d ? d->ranks : integer_at(r.data, "/params/ranks", 1));
}

double step_median_ms(const Record& r) {
  const std::optional<Timing> t = read_timing(r.data);
  return t ? t->step.median : 0.0;
}

int per_rank_batch(const Record& r) {
  const std::optional<Distributed> d = read_distributed(r.data);
  return d && d->per_rank_batch > 0 ? static_cast<int>(d->per_rank_batch) : batch(r);
}

StepParts step_parts(const Record& r) {
  const std::optional<Timing> t = read_timing(r.data);
  if (!t) return StepParts{};
  return StepParts{t->forward.median, t->backward.median, t->update.median};
}

std::string timer(const Record& r) {
  const std::optional<Timing> t = read_timing(r.data);
  return t ? t->timer : "";
}

bool fused_step(const Record& r) {
  const std::optional<Timing> t = read_timing(r.data);
  return t && t->fused_step;
}

std::vector<double> step_samples(const Record& r) {
  std::optional<Timing> t = read_timing(r.data, true);
  return t ? std::move(t->samples.step) : std::vector<double>();
}

std::optional<double> data_wait_ms(const Record& r) {
  const std::optional<Timing> t = read_timing(r.data);
  if (!t || !t->data) return std::nullopt;
  return t->data->median;
}

DistributedFigures distributed_of(const Record& r) {
  DistributedFigures out;
  const std::optional<Distributed> d = read_distributed(r.data);
  if (!d) return out;
  out.comm = d->comm;
  out.scaling = d->scaling;
  out.global_batch = d->global_batch;
  out.compute_ms = d->compute.median;
  out.allreduce_ms = d->allreduce ? d->allreduce->median : 0.0;
  out.exposed_comm_ms = d->exposed_comm ? d->exposed_comm->median : 0.0;
  if (d->vs_1_rank) out.speedup_vs_1_rank = d->vs_1_rank->speedup;
  if (d->tool) {
    out.runtime = d->tool->runtime;
    out.mode = d->tool->mode;
    out.comm_time = d->tool->comm_time.value_or("");
    out.comm_time_absent = d->tool->comm_time_absent;
  }
  out.has_allreduce = d->allreduce.has_value();
  return out;
}

std::string interconnect_of(const Record& r) {
  const std::string profile = text_at(r.data, "/interconnect/profile");
  if (!profile.empty()) return profile;
  return text_at(r.data, "/params/interconnect", "loopback");
}

std::string environment_key(const json& environment) {
  std::ostringstream key;
  key << text_at(environment, "/cpu_model") << " | " << integer_at(environment, "/cores")
      << " cores";
  return key.str();
}

std::map<std::string, std::string> libraries_of(const json& environment) {
  std::map<std::string, std::string> libs;
  if (environment.contains("libraries") && environment["libraries"].is_object())
    for (const auto& [name, version] : environment["libraries"].items())
      libs[name] = version.is_string() ? version.get<std::string>() : version.dump();
  return libs;
}

bool libraries_agree(const std::map<std::string, std::string>& a,
                     const std::map<std::string, std::string>& b) {
  for (const auto& [name, version] : a) {
    auto other = b.find(name);
    if (other != b.end() && other->second != version) return false;
  }
  return true;
}

}  // namespace dlhost::record
