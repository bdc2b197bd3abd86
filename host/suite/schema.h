// schema.h — the one table of case keys: every key a suite may set, its type, its bounds, its
// default, what leaving it unset means and whether it only says how the ranks are launched; and
// the table of the named interconnects' links. The suite loader validates and fills cases from
// it; everything that reads a case's parameters takes a missing key's value from here, so a
// default is written once: the runner, the case processes, the skip rules and the console through
// suite/case_params.h (each key typed, read once), the projection through key_default.
// docs/suite-format.md lists the same keys (tests/host/suite/test_suite.cpp checks the two agree).
// Thread-safe: the table is built once, on first use, and read-only afterwards.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/link_profiles.h"

namespace dlhost {

// kText: any non-empty string (a path), checked against no catalog.
enum class KeyKind { kName, kInt, kNumber, kBool, kChoice, kOptions, kTags, kText };

// The smallest matmul_peak (M = N = K) other than 0 that a suite may ask for. The peak divides
// the training rate (MFU), so it must be the GEMM's rate: at 256 the FC forward does 2 x 256^3 =
// 33.5 MFLOP, 256 FLOPs per element of its O(M N) loss, and takes about 0.1 ms even at
// 300 GFLOP/s, well above a backend call's tens of microseconds; below it the call overhead and
// the loss dominate and the "peak" can fall under the training's own rate.
constexpr int64_t kMatmulPeakFloor = 256;

struct KeySpec {
  std::string name;
  KeyKind kind = KeyKind::kName;
  bool has_min = false;
  int64_t min = 0;
  bool min_exclusive = false;
  std::optional<int64_t> max;        // kInt: the largest value allowed (inclusive)
  std::vector<std::string> choices;  // kChoice: the allowed values, the first is the default
  nlohmann::ordered_json def;        // null: the key stays absent unless a suite sets it
  // For a key without `def`, what absence means. `unset`: the value its readers take when the
  // case leaves it out (null: no one value, e.g. the network's own learning rate); the loader
  // never writes it into a case, so adding one keeps every case's params, params_hash and id.
  // `unset_means`: the same in words, for the docs and messages.
  nlohmann::ordered_json unset;
  std::string unset_means;
  // How the ranks are launched and talk, or what is only bookkeeping (tags, timeout), not what
  // one rank computes: a multi-rank case is compared with the 1-rank case equal in every other
  // key (record.cpp's vs_1_rank).
  bool launch_only = false;
};

// In the documented order: the order of CaseSpec::params and of the optional parts of case ids.
const std::vector<KeySpec>& key_specs();
const KeySpec* find_key_spec(const std::string& key);  // NULL for an unknown key
std::vector<std::string> case_key_names();

// The keys with launch_only set, in table order.
std::vector<std::string> launch_only_keys();

// The case's value of `key`, else the schema's default, else what unset means (`unset`);
// std::nullopt for a key with neither that the case leaves unset (batch, lr, ...). The key
// table's own reads (its tests, key_default); the host reads cases through CaseParams
// (suite/case_params.h), which checks each value's type.
template <class T>
std::optional<T> case_value_if(const nlohmann::ordered_json& params, const std::string& key) {
  auto it = params.find(key);
  if (it != params.end() && !it->is_null()) return it->template get<T>();
  const KeySpec* spec = find_key_spec(key);
  if (spec == nullptr) return std::nullopt;
  if (!spec->def.is_null()) return spec->def.template get<T>();
  if (!spec->unset.is_null()) return spec->unset.template get<T>();
  return std::nullopt;
}

// The same for a key that has a default or an unset value (throws std::logic_error for one that
// has neither).
template <class T>
T case_value(const nlohmann::ordered_json& params, const std::string& key) {
  std::optional<T> v = case_value_if<T>(params, key);
  if (!v) throw std::logic_error("case key '" + key + "' has no default");
  return *v;
}

// What a case that leaves `key` unset gets: its default, else its unset value (as case_value).
template <class T>
T key_default(const std::string& key) {
  return case_value<T>(nlohmann::ordered_json::object(), key);
}

}  // namespace dlhost
