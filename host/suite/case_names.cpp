// case_names.cpp — see case_names.h.
#include "suite/case_names.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;

// A case's keys as leaves: "batch" -> 64, "options.cpu_tensorflow.mode" -> "xla".
using Leaves = std::map<std::string, json>;

void flatten(const json& v, const std::string& path, Leaves& out, std::vector<std::string>& order) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out, order);
    return;
  }
  if (v.is_null()) return;
  if (std::find(order.begin(), order.end(), path) == order.end()) order.push_back(path);
  out[path] = v;
}

// As the id writes a value: compact, without quotes.
std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string out;
    for (const json& item : v) out += (out.empty() ? "" : "-") + value_text(item);
    return out;
  }
  return v.dump();
}

// A leaf's name in a message: a plugin's option without the "options." before it.
std::string key_text(const std::string& path) {
  static const std::string kOptions = "options.";
  return path.rfind(kOptions, 0) == 0 ? path.substr(kOptions.size()) : path;
}

std::string part(const std::string& path, const json& v) {
  if (path == "network" || path == "backend") return value_text(v);
  if (path == "batch") return "b" + value_text(v);
  if (path == "threads") return "t" + value_text(v);
  return key_text(path) + "=" + value_text(v);
}

// How many values `path` takes among `members`; a case that leaves it unset counts as one.
size_t distinct_values(const std::string& path, const std::vector<size_t>& members,
                       const std::vector<Leaves>& leaves) {
  std::set<std::string> values;
  for (size_t i : members) {
    auto it = leaves[i].find(path);
    values.insert(it == leaves[i].end() ? std::string("\x01unset") : it->second.dump());
  }
  return values.size();
}

// The leaves (in `order`) whose values differ among `members`.
std::set<std::string> varying(const std::vector<size_t>& members, const std::vector<Leaves>& leaves,
                              const std::vector<std::string>& order) {
  std::set<std::string> out;
  for (const std::string& path : order)
    if (distinct_values(path, members, leaves) > 1) out.insert(path);
  return out;
}

}  // namespace

std::vector<VaryingKey> varying_keys(const std::vector<json>& params) {
  std::vector<std::string> order;
  std::vector<Leaves> leaves(params.size());
  std::vector<size_t> all;
  for (size_t i = 0; i < params.size(); ++i) {
    flatten(params[i], "", leaves[i], order);
    all.push_back(i);
  }
  const std::set<std::string> differ = varying(all, leaves, order);
  std::vector<VaryingKey> out;
  for (const std::string& path : order) {
    if (!differ.count(path)) continue;
    VaryingKey k{key_text(path), {}};
    for (const Leaves& l : leaves) {
      auto it = l.find(path);
      std::string v = it == l.end() ? "(unset)" : value_text(it->second);
      if (std::find(k.values.begin(), k.values.end(), v) == k.values.end()) k.values.push_back(v);
    }
    out.push_back(std::move(k));
  }
  return out;
}

ShortNameOptions console_name_options() {
  ShortNameOptions o;
  o.always = {"network", "backend", "batch", "threads"};
  return o;
}

std::vector<std::string> short_case_names(const std::vector<NamedCase>& cases,
                                          const ShortNameOptions& options) {
  std::vector<std::string> order;
  std::vector<Leaves> leaves(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) flatten(cases[i].params, "", leaves[i], order);

  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < cases.size(); ++i) groups[cases[i].group].push_back(i);
  // The leaves each case is named by beyond `always`: its group's varying ones, then those that
  // tell it from another group's case of the same name.
  std::vector<std::set<std::string>> named(cases.size());
  for (const auto& [group, members] : groups) {
    const std::set<std::string> v = varying(members, leaves, order);
    for (size_t i : members) named[i] = v;
  }
  auto name_of = [&](size_t i) {
    std::string name;
    auto add = [&](const std::string& path) {
      auto it = leaves[i].find(path);
      if (it != leaves[i].end()) name += (name.empty() ? "" : ".") + part(path, it->second);
    };
    for (const std::string& key : options.always) add(key);
    for (const std::string& path : order)
      if (named[i].count(path) &&
          std::find(options.always.begin(), options.always.end(), path) == options.always.end())
        add(path);
    return name.empty() ? cases[i].id : name;
  };
  std::vector<std::string> names(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) names[i] = name_of(i);
  if (!options.unique_overall) return names;

  // Each round adds, to the cases that share a name, the one leaf that tells most of them apart
  // (the first in key order of those that tell apart as many), so that a name grows by what
  // distinguishes it and no more; a name still shared when no leaf is left to add (or after as
  // many rounds as there are leaves) becomes the id.
  for (size_t round = 0; round <= order.size(); ++round) {
    std::map<std::string, std::vector<size_t>> by_name;
    for (size_t i = 0; i < cases.size(); ++i) by_name[names[i]].push_back(i);
    bool clash = false;
    for (const auto& [name, members] : by_name) {
      std::set<std::string> ids;
      for (size_t i : members) ids.insert(cases[i].id);
      if (ids.size() < 2) continue;
      clash = true;
      std::string best;
      size_t most = 1;
      for (const std::string& path : order) {
        const size_t n = distinct_values(path, members, leaves);
        if (n > most) {
          best = path;
          most = n;
        }
      }
      for (size_t i : members) {
        if (!best.empty()) named[i].insert(best);
        names[i] = !best.empty() && round < order.size() ? name_of(i) : cases[i].id;
      }
    }
    if (!clash) break;
  }
  return names;
}

}  // namespace dlhost
