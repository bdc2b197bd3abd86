// schema.h — the one table of case keys: every key a suite may set, its type, its bounds and its
// default. The suite loader validates and fills cases from it; everything that reads a case's
// parameters (the runner, the case processes, the skip rules) takes a missing key's default from
// here, so a default is written once. docs/suite-format.md lists the same keys.
// Thread-safe: the table is built once, on first use, and read-only afterwards.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlhost {

// kText: any non-empty string (a path), checked against no catalog.
enum class KeyKind { kName, kInt, kNumber, kBool, kChoice, kOptions, kTags, kText };

struct KeySpec {
  std::string name;
  KeyKind kind;
  bool has_min = false;
  int64_t min = 0;
  bool min_exclusive = false;
  std::vector<std::string> choices;  // kChoice: the allowed values, the first is the default
  nlohmann::ordered_json def;        // null: the key stays absent unless a suite sets it
};

// In the documented order: the order of CaseSpec::params and of the optional parts of case ids.
const std::vector<KeySpec>& key_specs();
const KeySpec* find_key_spec(const std::string& key);  // NULL for an unknown key
std::vector<std::string> case_key_names();

// The case's value of `key`, or the schema's default when the case has none; std::nullopt for a
// key without a default that the case leaves unset (batch, lr, ...).
template <class T>
std::optional<T> case_value_if(const nlohmann::ordered_json& params, const std::string& key) {
  auto it = params.find(key);
  if (it != params.end() && !it->is_null()) return it->template get<T>();
  const KeySpec* spec = find_key_spec(key);
  if (spec == nullptr || spec->def.is_null()) return std::nullopt;
  return spec->def.template get<T>();
}

// The same for a key that has a default (throws std::logic_error for one that has none).
template <class T>
T case_value(const nlohmann::ordered_json& params, const std::string& key) {
  std::optional<T> v = case_value_if<T>(params, key);
  if (!v) throw std::logic_error("case key '" + key + "' has no default");
  return *v;
}

}  // namespace dlhost
