// fields.cpp — see fields.h.
#include "record/fields.h"

#include <cmath>
#include <sstream>

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

std::string network(const Record& r) {
  return text_at(r.data, "/network/name", text_at(r.data, "/params/network", "?"));
}

std::string backend(const Record& r) {
  return text_at(r.data, "/backend/name", text_at(r.data, "/params/backend", "?"));
}

int threads(const Record& r) {
  long long used = integer_at(r.data, "/resolved/threads_used", -1);
  if (used > 0) return static_cast<int>(used);
  return static_cast<int>(integer_at(r.data, "/params/threads", 0));
}

int batch(const Record& r) {
  long long b = integer_at(r.data, "/resolved/batch", 0);
  return static_cast<int>(b > 0 ? b : integer_at(r.data, "/params/batch", 0));
}

int ranks(const Record& r) {
  return static_cast<int>(
      integer_at(r.data, "/distributed/ranks", integer_at(r.data, "/params/ranks", 1)));
}

double step_median_ms(const Record& r) { return number_at(r.data, "/timing/step/median"); }

int per_rank_batch(const Record& r) {
  long long b = integer_at(r.data, "/distributed/per_rank_batch", 0);
  return b > 0 ? static_cast<int>(b) : batch(r);
}

StepParts step_parts(const Record& r) {
  return StepParts{number_at(r.data, "/timing/forward/median"),
                   number_at(r.data, "/timing/backward/median"),
                   number_at(r.data, "/timing/update/median")};
}

DistributedFigures distributed_of(const Record& r) {
  DistributedFigures d;
  d.comm = text_at(r.data, "/distributed/comm");
  d.scaling = text_at(r.data, "/distributed/scaling");
  d.global_batch = integer_at(r.data, "/distributed/global_batch");
  d.compute_ms = number_at(r.data, "/distributed/compute/median");
  d.allreduce_ms = number_at(r.data, "/distributed/allreduce/median");
  d.exposed_comm_ms = number_at(r.data, "/distributed/exposed_comm/median");
  d.speedup_vs_1_rank = number_at(r.data, "/distributed/vs_1_rank/speedup", NAN);
  d.runtime = text_at(r.data, "/distributed/runtime");
  d.mode = text_at(r.data, "/distributed/mode");
  d.comm_time = text_at(r.data, "/distributed/comm_time");
  d.comm_time_absent = text_at(r.data, "/distributed/comm_time_absent");
  d.has_allreduce = has(r.data, "/distributed/allreduce/median");
  return d;
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
