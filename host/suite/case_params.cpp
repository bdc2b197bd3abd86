// case_params.cpp — see case_params.h. Each key is read once here, by its name, with the type its
// field has; what a missing key takes comes from the key table (schema.h), never from here.
#include "suite/case_params.h"

#include <stdexcept>

#include "suite/schema.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;

enum class Type { kInt, kNumber, kBool, kString, kStrings };

const char* type_text(Type t) {
  switch (t) {
    case Type::kInt:
      return "an integer";
    case Type::kNumber:
      return "a number";
    case Type::kBool:
      return "true or false";
    case Type::kString:
      return "a string";
    case Type::kStrings:
      return "a list of strings";
  }
  return "?";
}

bool has_type(const json& v, Type t) {
  switch (t) {
    case Type::kInt:
      return v.is_number_integer();
    case Type::kNumber:
      return v.is_number();
    case Type::kBool:
      return v.is_boolean();
    case Type::kString:
      return v.is_string();
    case Type::kStrings:
      if (!v.is_array()) return false;
      for (const json& item : v)
        if (!item.is_string()) return false;
      return true;
  }
  return false;
}

// Reads the keys of one case's params, naming its source in every refusal.
class Reader {
 public:
  Reader(const json& params, const std::string& source) : params_(params), source_(source) {}

  // The case's value of `key`, else the table's default, else its unset value (null: none), of
  // type `t`.
  template <class T>
  std::optional<T> optional(const char* key, Type t) const {
    if (std::optional<T> v = given<T>(key, t)) return v;
    const KeySpec* spec = find_key_spec(key);
    if (spec == nullptr) return std::nullopt;
    return typed<T>(key, spec->def.is_null() ? spec->unset : spec->def, t);
  }
  // The case's own value of `key` alone (nullopt when it leaves the key unset).
  template <class T>
  std::optional<T> given(const char* key, Type t) const {
    auto it = params_.find(key);
    return it == params_.end() ? std::nullopt : typed<T>(key, *it, t);
  }
  // optional()'s value for a key that the table gives a default or an unset value.
  template <class T>
  T value(const char* key, Type t) const {
    std::optional<T> v = optional<T>(key, t);
    if (!v) throw std::logic_error(std::string("case key '") + key + "' has no default");
    return *v;
  }
  // `v` (a value of `key`) as a T; nullopt for null; CaseParamError when it is not of type `t`.
  template <class T>
  std::optional<T> typed(const char* key, const json& v, Type t) const {
    if (v.is_null()) return std::nullopt;
    if (!has_type(v, t))
      throw CaseParamError((source_.empty() ? "" : source_ + ": ") + "'" + key + "' must be " +
                           type_text(t) + ", got " + v.dump());
    return v.template get<T>();
  }

  int64_t integer(const char* key) const { return value<int64_t>(key, Type::kInt); }
  double number(const char* key) const { return value<double>(key, Type::kNumber); }
  bool flag(const char* key) const { return value<bool>(key, Type::kBool); }
  std::string text(const char* key) const { return value<std::string>(key, Type::kString); }
  std::optional<float> number_if(const char* key) const {
    return optional<float>(key, Type::kNumber);
  }

 private:
  const json& params_;
  const std::string& source_;
};

}  // namespace

CaseParams case_params(const json& params, const std::string& source) {
  const Reader r(params, source);
  CaseParams p;
  p.network = r.optional<std::string>("network", Type::kString).value_or("");
  p.backend = r.optional<std::string>("backend", Type::kString).value_or("");
  p.batch = r.optional<int64_t>("batch", Type::kInt);
  p.threads = r.integer("threads");
  p.iterations = r.integer("iterations");
  p.warmup = r.integer("warmup");
  p.timeout = r.number("timeout");
  p.startup_timeout = r.number("startup_timeout");
  p.memory_limit_mb = r.integer("memory_limit_mb");
  p.seed = r.integer("seed");
  p.device = r.optional<int64_t>("device", Type::kInt);
  p.comm = r.text("comm");
  p.ranks = r.integer("ranks");
  p.ranks_per_node = r.integer("ranks_per_node");
  p.ranks_per_node_given = r.given<int64_t>("ranks_per_node", Type::kInt);
  p.launcher = r.text("launcher");
  p.scaling = r.text("scaling");
  p.overlap = r.flag("overlap");
  p.bucket_mb = r.number("bucket_mb");
  p.comm_memory = r.text("comm_memory");
  p.oversubscribe = r.flag("oversubscribe");
  p.launcher_args = r.optional<std::vector<std::string>>("launcher_args", Type::kStrings)
                        .value_or(std::vector<std::string>());
  p.interconnect = r.text("interconnect");
  p.link_gbit = r.number("link_gbit");
  p.link_latency_us = r.number("link_latency_us");
  p.optimizer = r.optional<std::string>("optimizer", Type::kString);
  p.lr = r.number_if("lr");
  p.momentum = r.number_if("momentum");
  p.weight_decay = r.number_if("weight_decay");
  p.clip_norm = r.number_if("clip_norm");
  p.beta1 = r.number_if("beta1");
  p.beta2 = r.number_if("beta2");
  p.adam_epsilon = r.number_if("adam_epsilon");
  p.precision = r.text("precision");
  p.fused_step = r.text("fused_step");
  p.matmul_peak = r.integer("matmul_peak");
  p.allocator = r.text("allocator");
  p.openblas_coretype = r.text("openblas_coretype");
  p.omp_wait_policy = r.text("omp_wait_policy");
  p.input = r.text("input");
  p.data = r.text("data");
  p.epochs = r.integer("epochs");
  p.epoch_size = r.integer("epoch_size");
  p.evaluate = r.flag("evaluate");
  return p;
}

}  // namespace dlhost
