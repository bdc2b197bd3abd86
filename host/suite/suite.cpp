// suite.cpp — parses, validates and expands benchmark suites into cases (see suite.h and
// docs/suite-format.md for the format).
//
// Loading is all-or-nothing: the whole file is validated before any case is returned, and the
// first mistake is thrown as a SuiteError pointing at its node. Every value keeps the place it
// came from so that errors found late (a duplicate id, a case without a network) still point at
// the entry the user has to edit.
#include "suite/suite.h"

#include "suite/case_params.h"
#include "suite/schema.h"
#include "suite/skip.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "data/file_bytes.h"
#include "launch/launchers.h"
#include "suite/tool_runtimes.h"

namespace dlhost {
namespace {

using ordered_json = nlohmann::ordered_json;

// Where a value came from: a node of the suite file, or a command-line override (which has no
// position, so the override's own text is shown instead).
struct Where {
  int line = 0;  // 1-based; 0 when unknown
  int col = 0;
  std::string override_text;
};

Where where_of(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return {};
  return {mark.line + 1, mark.column + 1, {}};
}

// yaml-cpp gives an empty value (`batch:`) the mark of the token after it, which is often on the
// next line; the key's own position is the honest place to point at.
Where where_of_value(const YAML::Node& value, const YAML::Node& key) {
  if (value.IsNull() || value.Mark().is_null()) return where_of(key);
  return where_of(value);
}

using Kind = KeyKind;

const std::vector<std::string> kTopLevelKeys = {"name",     "description", "defaults",
                                                "optional", "matrix",      "cases"};
const std::vector<std::string> kCatalogKeys = {"network", "backend", "comm"};

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "; did you mean 'x'?" for the closest candidate within two edits, or "". A candidate as far
// from the word as the word is long shares nothing with it, so it is never suggested.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = 3;
  for (const std::string& candidate : candidates) {
    const size_t d = edit_distance(word, candidate);
    if (d < best_distance && d < std::max<size_t>(word.size(), 1)) {
      best = &candidate;
      best_distance = d;
    }
  }
  return best ? "; did you mean '" + *best + "'?" : "";
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return node.Tag() == "?" ? "'" + node.Scalar() + "'" : "\"" + node.Scalar() + "\"";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing (null)";
  }
}

// Quoted or explicitly tagged scalars are strings to YAML; only plain ones may be numbers.
bool is_plain_scalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() == "?"; }

bool looks_like_int(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// YAML 1.2 core-schema floats without .inf/.nan: a benchmark parameter is always finite.
bool looks_like_number(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exponent_digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++exponent_digits;
    if (exponent_digits == 0) return false;
  }
  return i == s.size();
}

bool parse_int(const std::string& s, int64_t* out) {
  if (!looks_like_int(s)) return false;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *out = v;
  return true;
}

bool parse_bool(const std::string& s, bool* out) {
  if (s == "true" || s == "True" || s == "TRUE") {
    *out = true;
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    *out = false;
    return true;
  }
  return false;
}

// A plugin option keeps the type YAML gives it, so plugins receive numbers as numbers.
ordered_json scalar_to_json(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (!is_plain_scalar(node)) return s;
  bool b = false;
  int64_t i = 0;
  if (parse_bool(s, &b)) return b;
  if (parse_int(s, &i)) return i;
  if (looks_like_number(s)) return std::strtod(s.c_str(), nullptr);
  return s;
}

std::string expected_text(const KeySpec& spec) {
  std::string bound;
  if (spec.has_min) bound = (spec.min_exclusive ? " > " : " >= ") + std::to_string(spec.min);
  if (spec.max) bound += (bound.empty() ? " <= " : " and <= ") + std::to_string(*spec.max);
  switch (spec.kind) {
    case Kind::kName:
      return "a name (string)";
    case Kind::kInt:
      return "an integer" + bound;
    case Kind::kNumber:
      return "a number" + bound;
    case Kind::kBool:
      return "true or false";
    case Kind::kChoice:
      return "one of " + join(spec.choices);
    case Kind::kOptions:
      return "a map of plugin name -> map of option -> scalar";
    case Kind::kTags:
      return "a list of strings";
    case Kind::kText:
      return "a non-empty string";
  }
  return "";
}

// Renders a value for a case id: compact, without quotes or spaces.
std::string id_text(const ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::vector<std::string> parts;
    for (const ordered_json& item : v) parts.push_back(id_text(item));
    return join(parts, "-");
  }
  if (v.is_object()) {
    std::vector<std::string> parts;
    for (auto it = v.begin(); it != v.end(); ++it) {
      parts.push_back(it.key() + (it.value().is_object() ? "." : "=") + id_text(it.value()));
    }
    return join(parts, "-");
  }
  std::string text = v.dump();
  // "1e+20" would otherwise be sanitized into "1e-20", a different number.
  text.erase(std::remove(text.begin(), text.end(), '+'), text.end());
  return text;
}

std::string sanitize_id(const std::string& id) {
  std::string out = id;
  for (char& c : out) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '=' || c == '-';
    if (!ok) c = '-';
  }
  return out;
}

struct Value {
  ordered_json v;
  Where where;
};

// A case's keys in the order they were set; later sets replace earlier ones in place.
class KeyValues {
 public:
  const Value* find(const std::string& key) const {
    for (const auto& kv : items_) {
      if (kv.first == key) return &kv.second;
    }
    return nullptr;
  }
  void set(const std::string& key, Value value) {
    for (auto& kv : items_) {
      if (kv.first == key) {
        kv.second = std::move(value);
        return;
      }
    }
    items_.emplace_back(key, std::move(value));
  }
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }

 private:
  std::vector<std::pair<std::string, Value>> items_;
};

struct Entry {  // an include, exclude or cases entry, or a matrix combination
  KeyValues values;
  Where where;
  bool from_matrix = false;
};

struct Axis {
  std::string key;
  std::vector<Value> values;
  // Set by `--set key=...` on a matrix axis: the user narrowed it, so an include naming another
  // value of this axis belongs to a value left out and is left out with it (not a stray case).
  bool narrowed = false;
};

struct BuiltCase {
  CaseSpec spec;
  Where where;
};

class Loader {
 public:
  Loader(std::string path, const SuiteCatalog& catalog, int host_cores, const SuiteLimits& limits,
         std::optional<std::string> text = std::nullopt)
      : path_(std::move(path)),
        text_(std::move(text)),
        catalog_(catalog),
        host_cores_(host_cores),
        limits_(limits) {}

  Suite load(const std::vector<std::string>& overrides) {
    const YAML::Node root = parse_file();
    if (!root.IsMap()) {
      fail(
          root.IsNull() ? Where{1, 1, {}} : where_of(root),
          "a suite must be a map with the keys " + join(kTopLevelKeys) + ", got " + describe(root));
    }
    // Sections are read in dependency order (optional before any name is checked), whatever
    // their order in the file.
    std::map<std::string, std::pair<YAML::Node, YAML::Node>> sections;
    for (const auto& [key, value] : checked_map_items(root)) {
      const std::string& name = key.Scalar();
      if (!contains(kTopLevelKeys, name)) {
        fail(where_of(key), "unknown top-level key '" + name + "'; valid keys: " +
                                join(kTopLevelKeys) + did_you_mean(name, kTopLevelKeys));
      }
      sections.emplace(name, std::make_pair(key, value));
    }

    Suite suite;
    suite.path = path_;
    suite.name = string_section(sections, "name", stem(path_));
    suite.description = string_section(sections, "description", "");
    if (sections.count("optional")) read_optional(sections.at("optional").second);
    if (sections.count("defaults")) {
      defaults_ = read_case_map(sections.at("defaults").second, sections.at("defaults").first);
    }
    const bool has_matrix = sections.count("matrix") > 0;
    if (has_matrix) read_matrix(sections.at("matrix").first, sections.at("matrix").second);
    for (const std::string& text : overrides) apply_override(text, has_matrix);

    std::vector<Entry> entries;
    if (has_matrix) {
      count_cases(matrix_case_count(), matrix_where_, "the matrix");
      entries = expand_matrix();
    }
    if (sections.count("cases")) {
      for (Entry& e : read_cases(sections.at("cases").first, sections.at("cases").second)) {
        entries.push_back(std::move(e));
      }
    }
    if (!has_matrix && !sections.count("cases")) {
      fail(where_of(root), "the suite has no cases; add 'matrix' or 'cases'");
    }
    if (entries.empty()) {
      fail(matrix_where_, "the matrix expands to no cases (every combination is excluded)");
    }

    std::vector<BuiltCase> built;
    for (const Entry& entry : entries) built.push_back(build_case(entry));
    assign_ids(&built);
    for (BuiltCase& b : built) suite.cases.push_back(std::move(b.spec));
    return suite;
  }

 private:
  [[noreturn]] void fail(const Where& where, const std::string& message) const {
    throw SuiteError(at(where) + ": " + message);
  }

  std::string at(const Where& where) const {
    if (!where.override_text.empty()) return path_ + ": override '" + where.override_text + "'";
    if (where.line == 0) return path_;
    return path_ + ":" + std::to_string(where.line) + ":" + std::to_string(where.col);
  }

  std::string source_of(const Where& where) const {
    return where.line == 0 ? path_ : path_ + ":" + std::to_string(where.line);
  }

  static std::string stem(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    const size_t dot = base.find_last_of('.');
    return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
  }

  // JSON (the params of every case, the results) must be UTF-8; found by fuzzing: a suite with
  // a stray byte passed YAML and then broke nlohmann::json far from the cause.
  void check_utf8(const std::string& text) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < text.size();) {
      auto c = static_cast<unsigned char>(text[i]);
      size_t len = c < 0x80           ? 1
                   : (c >> 5) == 0x6  ? 2
                   : (c >> 4) == 0xE  ? 3
                   : (c >> 3) == 0x1E ? 4
                                      : 0;
      bool ok = len > 0 && i + len <= text.size() && !(len == 2 && c < 0xC2);
      for (size_t k = 1; ok && k < len; ++k)
        ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
      if (!ok) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02X", c);
        fail(Where{line, col, {}},
             std::string("invalid UTF-8 byte ") + hex + ": a suite must be UTF-8 text");
      }
      // YAML allows no control characters but tab and line breaks; yaml-cpp lets a NUL through
      // and then mangles the text around it (found by fuzzing).
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02X", c);
        fail(Where{line, col, {}},
             std::string("control character ") + hex + ": YAML allows only tab and line breaks");
      }
      if (c == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
      i += len;
    }
  }

  YAML::Node parse_file() const { return parse_text(text_ ? *text_ : read_file()); }

  YAML::Node parse_text(const std::string& text) const {
    check_utf8(text);
    check_depth(text);
    try {
      return YAML::Load(text);
    } catch (const YAML::Exception& e) {
      fail(e.mark.is_null() ? Where{} : Where{e.mark.line + 1, e.mark.column + 1, {}}, e.msg);
    }
  }

  // Only a regular file of bounded size is read: a FIFO with no writer would block forever and
  // /dev/zero would be read until memory runs out.
  std::string read_file() const {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0)
      throw SuiteError(path_ + ": cannot open: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) {
      throw SuiteError(path_ + ": not a regular file (" + data::file_kind(st.st_mode) +
                       "); a suite must be a YAML file");
    }
    if (static_cast<size_t>(st.st_size) > limits_.max_bytes) throw_too_big();
    errno = 0;
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw SuiteError(path_ + ": cannot open: " + std::strerror(errno));
    // Read one byte past the limit: the file may have grown since stat().
    std::string text(limits_.max_bytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) throw SuiteError(path_ + ": cannot read: " + std::strerror(errno ? errno : EIO));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > limits_.max_bytes) throw_too_big();
    return text;
  }

  [[noreturn]] void throw_too_big() const {
    throw SuiteError(path_ + ": larger than " + std::to_string(limits_.max_bytes >> 20) +
                     " MiB, the limit for a suite; split it into several suites");
  }

  // yaml-cpp parses nested flow collections by recursion, one stack frame per level, so a
  // line of 100,000 '[' ends the process; block nesting is bounded by the file size. Counts
  // brackets outside quotes and comments, before parsing.
  void check_depth(const std::string& text) const {
    int depth = 0, line = 1, col = 0;
    char quote = 0;
    bool comment = false;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      ++col;
      if (c == '\n') {
        ++line, col = 0, comment = false;
      } else if (comment) {
      } else if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
        comment = true;
      } else if (c == '[' || c == '{') {
        if (++depth > limits_.max_depth) {
          fail(Where{line, col, {}}, "nested deeper than " + std::to_string(limits_.max_depth) +
                                         " levels of [ ] or { }, the limit for a suite");
        }
      } else if ((c == ']' || c == '}') && depth > 0) {
        --depth;
      }
    }
  }

  // The number of cases the matrix expands to (excludes not subtracted), saturating above the
  // limit so that the product cannot overflow.
  size_t matrix_case_count() const {
    size_t n = axes_.empty() ? 0 : 1;
    for (const Axis& a : axes_) n = capped_product(n, a.values.size());
    return n + includes_.size();
  }

  size_t capped_product(size_t a, size_t b) const {
    const size_t cap = limits_.max_cases + 1;
    return (b != 0 && a > cap / b) ? cap : std::min(a * b, cap);
  }

  // Adds `n` cases from `what` at `where` to the suite's count, failing once it passes the
  // limit: counted before any case is built.
  void count_cases(size_t n, const Where& where, const std::string& what) {
    case_count_ = std::min(case_count_ + n, limits_.max_cases + 1);
    if (case_count_ <= limits_.max_cases) return;
    fail(where, what + " brings the suite to more than " + std::to_string(limits_.max_cases) +
                    " cases, the limit; split the suite, or raise the limit with --max-cases N");
  }

  // The items of a map, refusing non-scalar and duplicate keys (yaml-cpp keeps both copies of
  // a duplicated key and lookups would silently take the first).
  std::vector<std::pair<YAML::Node, YAML::Node>> checked_map_items(const YAML::Node& map) const {
    std::vector<std::pair<YAML::Node, YAML::Node>> items;
    std::map<std::string, Where> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      if (!key.IsScalar()) fail(where_of(key), "a key must be a name, got " + describe(key));
      const auto [found, inserted] = seen.emplace(key.Scalar(), where_of(key));
      if (!inserted) {
        fail(where_of(key), "duplicate key '" + key.Scalar() + "' (first at line " +
                                std::to_string(found->second.line) + ")");
      }
      items.emplace_back(key, it->second);
    }
    return items;
  }

  std::string string_section(
      const std::map<std::string, std::pair<YAML::Node, YAML::Node>>& sections,
      const std::string& name, const std::string& fallback) const {
    const auto it = sections.find(name);
    if (it == sections.end()) return fallback;
    const auto& [key, value] = it->second;
    if (!value.IsScalar()) {
      fail(where_of_value(value, key), "'" + name + "' must be a string, got " + describe(value));
    }
    return value.Scalar();
  }

  void read_optional(const YAML::Node& node) {
    if (node.IsNull()) return;
    if (!node.IsMap()) {
      fail(where_of(node), "'optional' must be a map of " + join(kCatalogKeys, "/") +
                               " -> list of names, got " + describe(node));
    }
    for (const auto& [key, value] : checked_map_items(node)) {
      const std::string& name = key.Scalar();
      if (!contains(kCatalogKeys, name)) {
        fail(where_of(key), "unknown key '" + name + "' in optional; valid keys: " +
                                join(kCatalogKeys) + did_you_mean(name, kCatalogKeys));
      }
      std::vector<YAML::Node> names;
      if (value.IsSequence()) {
        for (const YAML::Node& item : value) names.push_back(item);
      } else {
        names.push_back(value);
      }
      for (const YAML::Node& item : names) {
        if (!item.IsScalar()) {
          fail(where_of_value(item, key),
               "'optional." + name + "' must list names (strings), got " + describe(item));
        }
        optional_[name].insert(item.Scalar());
      }
    }
  }

  const std::vector<std::string>& available(const std::string& key) const {
    if (key == "network") return catalog_.networks;
    if (key == "backend") return catalog_.backends;
    return catalog_.comms;
  }

  bool installed(const std::string& key, const std::string& name) const {
    return (key == "comm" && (name == "none" || is_tool_runtime(name))) ||
           contains(available(key), name);
  }

  std::string available_text(const std::string& key) const {
    std::vector<std::string> names = available(key);
    if (key == "comm") {
      names.insert(names.begin(), "none");
      names.insert(names.end(), tool_runtime_names().begin(), tool_runtime_names().end());
    }
    return names.empty() ? "none" : join(names);
  }

  void check_installed(const std::string& key, const std::string& name, const Where& where,
                       const std::string& note = "") const {
    if (installed(key, name) || (optional_.count(key) && optional_.at(key).count(name))) return;
    std::vector<std::string> names = available(key);
    fail(where, "unknown " + key + " '" + name + "'" + note +
                    "; available: " + available_text(key) + did_you_mean(name, names) +
                    " (to skip its cases where it is not installed, list it under optional." + key +
                    ")");
  }

  // An `options` key names a plugin: one loaded here, one the build left out, or one the suite
  // lists under `optional` (any kind); a misspelt one would be passed to no plugin while the
  // case id still says it was given.
  void check_option_plugin(const std::string& plugin, const Where& where) const {
    if (catalog_.plugins.empty() || contains(catalog_.plugins, plugin) ||
        catalog_.left_out.count(plugin))
      return;
    for (const auto& [key, names] : optional_)
      if (names.count(plugin)) return;
    std::vector<std::string> known = catalog_.plugins;
    for (const auto& [name, why] : catalog_.left_out) known.push_back(name);
    fail(where, "'options' names no plugin '" + plugin + "'; plugins: " + join(known) +
                    did_you_mean(plugin, known) +
                    " (to give options to a plugin not installed here, list it under optional)");
  }

  // Validates one value of `spec` and converts it to JSON.
  ordered_json parse_value(const KeySpec& spec, const YAML::Node& node, const Where& where) const {
    auto bad = [&](const std::string& got) -> void {
      fail(where, "'" + spec.name + "' must be " + expected_text(spec) + ", got " + got);
    };
    const bool plain = is_plain_scalar(node);
    const std::string text = node.IsScalar() ? node.Scalar() : "";
    switch (spec.kind) {
      case Kind::kName:
        if (!node.IsScalar() || text.empty()) bad(describe(node));
        check_installed(spec.name, text, where);
        return text;
      case Kind::kChoice:
        if (!node.IsScalar() || !contains(spec.choices, text)) bad(describe(node));
        return text;
      case Kind::kText:
        if (!node.IsScalar() || text.empty()) bad(describe(node));
        return text;
      case Kind::kBool: {
        bool b = false;
        if (!plain || !parse_bool(text, &b)) bad(describe(node));
        return b;
      }
      case Kind::kInt: {
        int64_t i = 0;
        if (!plain || !parse_int(text, &i)) bad(describe(node));
        if (spec.has_min && (spec.min_exclusive ? i <= spec.min : i < spec.min)) bad(text);
        if (spec.max && i > *spec.max) bad(text);
        if (spec.name == "matmul_peak" && i > 0 && i < kMatmulPeakFloor)
          fail(where, "'matmul_peak' must be 0 (not measured) or at least " +
                          std::to_string(kMatmulPeakFloor) + ", got " + text +
                          ": a smaller FC forward is timed by its call overhead and its loss, not "
                          "by the GEMM, so its peak is far too low and the report's MFU "
                          "impossible (matmul_peak 1 measured 0.004 GFLOP/s: MFU 14662); 1024 to "
                          "2048 suit a CPU, 8192 a GPU");
        return i;
      }
      case Kind::kNumber: {
        if (!plain || !looks_like_number(text)) bad(describe(node));
        ordered_json v = scalar_to_json(node);
        if (!v.is_number()) bad(describe(node));  // an integer too large for int64
        const double d = v.get<double>();
        // 1e400 reads as inf: a timeout that ends the case at once, an lr written as null.
        if (!std::isfinite(d))
          fail(where, "'" + spec.name + "' must be a finite number, got " + text +
                          " (beyond the range of a double)");
        if (spec.has_min && (spec.min_exclusive ? d <= spec.min : d < spec.min)) bad(text);
        return v;
      }
      case Kind::kTags: {
        if (!node.IsSequence()) bad(describe(node));
        ordered_json tags = ordered_json::array();
        for (const YAML::Node& item : node) {
          if (!item.IsScalar()) {
            fail(where_of(item).line ? where_of(item) : where,
                 "'tags' must be a list of strings, got an entry that is " + describe(item));
          }
          tags.push_back(item.Scalar());
        }
        return tags;
      }
      case Kind::kOptions:
        return parse_options(node, where);
    }
    return nullptr;
  }

  ordered_json parse_options(const YAML::Node& node, const Where& where) const {
    if (!node.IsMap()) {
      fail(where, "'options' must be a map of plugin name -> map of option -> scalar, got " +
                      describe(node));
    }
    ordered_json options = ordered_json::object();
    for (const auto& [plugin_key, plugin_value] : checked_map_items(node)) {
      const std::string plugin = plugin_key.Scalar();
      check_option_plugin(plugin, where_of(plugin_key));
      if (!plugin_value.IsMap()) {
        fail(where_of_value(plugin_value, plugin_key),
             "'options." + plugin + "' must be a map of option -> scalar, got " +
                 describe(plugin_value));
      }
      ordered_json& map = options[plugin] = ordered_json::object();
      for (const auto& [option_key, option_value] : checked_map_items(plugin_value)) {
        const std::string option = option_key.Scalar();
        if (!option_value.IsScalar()) {
          fail(where_of_value(option_value, option_key),
               "'options." + plugin + "." + option +
                   "' must be a scalar (string, number or bool), got " + describe(option_value));
        }
        if (catalog_.check_option) {
          if (auto why = catalog_.check_option(plugin, option, option_value.Scalar()))
            fail(where_of_value(option_value, option_key), *why);
        }
        map[option] = scalar_to_json(option_value);
        if (map[option].is_number_float() && !std::isfinite(map[option].get<double>()))
          fail(where_of_value(option_value, option_key),
               "'options." + plugin + "." + option + "' must be a finite number, got " +
                   option_value.Scalar() + " (beyond the range of a double)");
      }
    }
    return options;
  }

  const KeySpec& case_key(const YAML::Node& key) const {
    const std::string& name = key.Scalar();
    const KeySpec* spec = find_key_spec(name);
    if (!spec) {
      const std::vector<std::string> names = case_key_names();
      fail(where_of(key),
           "unknown key '" + name + "'; valid keys: " + join(names) + did_you_mean(name, names));
    }
    return *spec;
  }

  // defaults, an include/exclude entry or a `cases` entry.
  KeyValues read_case_map(const YAML::Node& node, const YAML::Node& owner_key) const {
    KeyValues values;
    if (node.IsNull()) return values;
    if (!node.IsMap()) {
      fail(where_of_value(node, owner_key), "expected a map of case keys, got " + describe(node));
    }
    for (const auto& [key, value] : checked_map_items(node)) {
      const KeySpec& spec = case_key(key);
      const Where where = where_of_value(value, key);
      values.set(spec.name, {parse_value(spec, value, where), where});
    }
    return values;
  }

  std::vector<Value> read_axis(const KeySpec& spec, const YAML::Node& node, const Where& where,
                               bool in_matrix = true) const {
    std::vector<Value> values;
    if (node.IsSequence()) {
      for (const YAML::Node& item : node) {
        const Where item_where =
            where.override_text.empty() && !item.IsNull() && !item.Mark().is_null() ? where_of(item)
                                                                                    : where;
        values.push_back({parse_value(spec, item, item_where), item_where});
      }
    } else if (!node.IsNull()) {
      values.push_back({parse_value(spec, node, where), where});
    }
    if (values.empty()) {
      fail(where, (in_matrix ? "matrix axis '" : "the list of '") + spec.name +
                      "' is empty; give a value or a list of values");
    }
    return values;
  }

  std::vector<Entry> read_entry_list(const YAML::Node& key, const YAML::Node& node) const {
    const std::string name = key.Scalar();
    if (!node.IsSequence()) {
      fail(where_of_value(node, key),
           "'" + name + "' must be a list of maps of case keys, got " + describe(node));
    }
    std::vector<Entry> entries;
    for (const YAML::Node& item : node) {
      const Where where = item.IsNull() ? where_of(key) : where_of(item);
      if (!item.IsMap())
        fail(where, "an entry of '" + name + "' must be a map, got " + describe(item));
      Entry entry{read_case_map(item, key), where, false};
      if (entry.values.empty()) fail(where, "an entry of '" + name + "' is empty");
      entries.push_back(std::move(entry));
    }
    return entries;
  }

  void read_matrix(const YAML::Node& key, const YAML::Node& node) {
    matrix_where_ = where_of(key);
    if (!node.IsMap()) {
      fail(where_of_value(node, key),
           "'matrix' must be a map of axes (case key -> list of values), got " + describe(node));
    }
    // Indices, not Node copies: assigning to a yaml-cpp Node writes through to the document.
    const auto items = checked_map_items(node);
    size_t include_at = items.size(), exclude_at = items.size();
    for (size_t i = 0; i < items.size(); ++i) {
      const YAML::Node& axis_key = items[i].first;
      const YAML::Node& value = items[i].second;
      if (axis_key.Scalar() == "include") {
        include_at = i;
        continue;
      }
      if (axis_key.Scalar() == "exclude") {
        exclude_at = i;
        continue;
      }
      const std::string& name = axis_key.Scalar();
      const KeySpec* spec = find_key_spec(name);
      if (!spec) {
        std::vector<std::string> names = case_key_names();
        names.push_back("include");
        names.push_back("exclude");
        fail(where_of(axis_key),
             "unknown key '" + name + "'; valid keys: " + join(names) + did_you_mean(name, names));
      }
      axes_.push_back({name, read_axis(*spec, value, where_of_value(value, axis_key))});
    }
    if (exclude_at < items.size()) {
      excludes_ = read_entry_list(items[exclude_at].first, items[exclude_at].second);
      // An exclude key that is not an axis never matches, which would silently keep the cases
      // the user meant to remove.
      for (const YAML::Node& entry : items[exclude_at].second) {
        for (const auto& [entry_key, entry_value] : checked_map_items(entry)) {
          if (!axis(entry_key.Scalar())) {
            fail(where_of(entry_key), "exclude key '" + entry_key.Scalar() +
                                          "' is not a matrix axis; axes: " +
                                          (axes_.empty() ? std::string("none") : axis_names()));
          }
        }
      }
    }
    if (include_at < items.size()) {
      includes_ = read_entry_list(items[include_at].first, items[include_at].second);
    }
    if (axes_.empty() && includes_.empty()) {
      fail(matrix_where_, "the matrix has no axes; give at least one case key with its values");
    }
  }

  Axis* axis(const std::string& key) {
    for (Axis& a : axes_) {
      if (a.key == key) return &a;
    }
    return nullptr;
  }

  std::string axis_names() const {
    std::vector<std::string> names;
    for (const Axis& a : axes_) names.push_back(a.key);
    return join(names);
  }

  std::vector<Entry> read_cases(const YAML::Node& key, const YAML::Node& node) {
    if (node.IsSequence() && node.size() == 0) {
      fail(where_of(node), "'cases' is empty; give at least one case");
    }
    if (node.IsNull()) fail(where_of(key), "'cases' is empty; give at least one case");
    if (!node.IsSequence()) {
      fail(where_of(node), "'cases' must be a list of maps of case keys, got " + describe(node));
    }
    std::vector<Entry> entries;
    for (const YAML::Node& item : node) {
      const Where where = item.IsNull() ? where_of(key) : where_of(item);
      if (!item.IsMap()) fail(where, "an entry of 'cases' must be a map, got " + describe(item));
      if (item.size() == 0) fail(where, "an entry of 'cases' is empty");
      count_cases(swept_case_count(item), where, "this entry of 'cases'");
      for (KeyValues& values : read_swept_case_map(item)) {
        entries.push_back({std::move(values), where, false});
      }
    }
    return entries;
  }

  // How many cases read_swept_case_map makes of `node`: the product of its lists' lengths.
  size_t swept_case_count(const YAML::Node& node) const {
    size_t n = 1;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const KeySpec* spec = it->first.IsScalar() ? find_key_spec(it->first.Scalar()) : nullptr;
      if (it->second.IsSequence() && spec && spec->kind != Kind::kTags)
        n = capped_product(n, it->second.size());
    }
    return n;
  }

  // A list given to a single-valued key of a `cases` entry sweeps that key, so one entry can
  // stand for a row of a paper's table (one network, every thread count): the entry expands to
  // the product of its lists, in key order, as a small matrix of its own.
  std::vector<KeyValues> read_swept_case_map(const YAML::Node& node) const {
    std::vector<KeyValues> out(1);
    for (const auto& [key, value] : checked_map_items(node)) {
      const KeySpec& spec = case_key(key);
      const Where where = where_of_value(value, key);
      std::vector<Value> values;
      if (value.IsSequence() && spec.kind != Kind::kTags) {
        values = read_axis(spec, value, where, false);
      } else {
        values.push_back({parse_value(spec, value, where), where});
      }
      std::vector<KeyValues> next;
      for (const KeyValues& partial : out) {
        for (const Value& v : values) {
          next.push_back(partial);
          next.back().set(spec.name, v);
        }
      }
      out = std::move(next);
    }
    return out;
  }

  void apply_override(const std::string& text, bool has_matrix) {
    const Where where{0, 0, text};
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) fail(where, "expected key=value");
    const std::string key = text.substr(0, eq);
    const KeySpec* spec = find_key_spec(key);
    if (!spec) {
      const std::vector<std::string> names = case_key_names();
      fail(where,
           "unknown key '" + key + "'; valid keys: " + join(names) + did_you_mean(key, names));
    }
    const YAML::Node node = [&] {
      try {
        return YAML::Load(text.substr(eq + 1));
      } catch (const YAML::Exception& e) {
        fail(where, "cannot parse the value: " + e.msg);
      }
    }();
    if (Axis* a = axis(key)) {
      a->values = read_axis(*spec, node, where);
      a->narrowed = true;
    } else if (node.IsSequence() && spec->kind != Kind::kTags) {
      // A list sweeps the key: it becomes a new, last axis of the matrix.
      if (!has_matrix) {
        fail(where, "a list of values needs a matrix to sweep; this suite has only 'cases'");
      }
      axes_.push_back({key, read_axis(*spec, node, where)});
    } else {
      defaults_.set(key, {parse_value(*spec, node, where), where});
    }
  }

  static bool matches(const KeyValues& combination, const KeyValues& entry,
                      const std::vector<Axis>& axes) {
    for (const Axis& a : axes) {
      const Value* want = entry.find(a.key);
      if (!want) continue;
      const Value* have = combination.find(a.key);
      if (!have || have->v != want->v) return false;
    }
    return true;
  }

  // True when the include names a value that `--set` took off its axis: `--set network=lenet` on
  // a suite whose includes give each network its batch must not turn the other networks' includes
  // into cases of their own.
  bool names_a_narrowed_out_value(const Entry& inc) const {
    for (const Axis& a : axes_) {
      if (!a.narrowed) continue;
      const Value* v = inc.values.find(a.key);
      if (!v) continue;
      const bool kept = std::any_of(a.values.begin(), a.values.end(),
                                    [&](const Value& x) { return x.v == v->v; });
      if (!kept) return true;
    }
    return false;
  }

  // GitHub Actions semantics: the product in axis order (first axis outermost), minus excludes,
  // then each include either extends the original combinations it matches on their axes or, if
  // it matches none, becomes a case of its own; an include of a value `--set` narrowed away is
  // left out.
  std::vector<Entry> expand_matrix() const {
    std::vector<Entry> combinations;
    if (!axes_.empty()) combinations.push_back({{}, matrix_where_, true});
    for (const Axis& a : axes_) {
      std::vector<Entry> next;
      for (const Entry& c : combinations) {
        for (const Value& v : a.values) {
          Entry e = c;
          e.values.set(a.key, v);
          next.push_back(std::move(e));
        }
      }
      combinations = std::move(next);
    }
    combinations.erase(std::remove_if(combinations.begin(), combinations.end(),
                                      [this](const Entry& c) {
                                        for (const Entry& x : excludes_) {
                                          if (matches(c.values, x.values, axes_)) return true;
                                        }
                                        return false;
                                      }),
                       combinations.end());
    const size_t original = combinations.size();
    for (const Entry& inc : includes_) {
      if (names_a_narrowed_out_value(inc)) continue;
      bool matched = false;
      for (size_t i = 0; i < original; ++i) {
        if (!matches(combinations[i].values, inc.values, axes_)) continue;
        matched = true;
        for (const auto& [key, value] : inc.values.items()) {
          bool is_axis = false;
          for (const Axis& a : axes_) is_axis = is_axis || a.key == key;
          if (!is_axis) combinations[i].values.set(key, value);
        }
      }
      if (!matched) combinations.push_back(inc);
    }
    return combinations;
  }

  BuiltCase build_case(const Entry& entry) const {
    KeyValues merged = defaults_;
    for (const auto& [key, value] : entry.values.items()) merged.set(key, value);
    if (!merged.find("network")) {
      fail(entry.where, entry.from_matrix
                            ? "the matrix's cases have no 'network'; add a network axis or set "
                              "network in defaults"
                            : "this case has no 'network'; set it here or in defaults");
    }
    check_interconnect(merged);
    BuiltCase built;
    built.where = entry.where;
    built.spec.source = source_of(entry.where);
    ordered_json& params = built.spec.params = ordered_json::object();
    for (const KeySpec& spec : key_specs()) {
      if (const Value* v = merged.find(spec.name)) {
        params[spec.name] = v->v;
      } else if (spec.name == "backend") {
        params[spec.name] = preferred_backend(entry.where);
        built.spec.backend_by_priority = true;
      } else if (!spec.def.is_null()) {
        params[spec.name] = spec.def;
        // Built-in defaults were never checked against this machine's catalog.
        if (spec.kind == Kind::kName) {
          check_installed(spec.name, spec.def.get<std::string>(), entry.where, " (the default)");
        }
      }
    }
    // The case's keys typed, once it is whole; a value of the wrong type points at the case.
    CaseParams typed;
    try {
      typed = case_params(params);
    } catch (const CaseParamError& e) {
      fail(entry.where, e.what());
    }
    std::vector<std::string> reasons;
    for (const std::string& key : kCatalogKeys) {
      const std::string name = params[key].get<std::string>();
      if (!installed(key, name)) {
        auto note = catalog_.left_out.find(name);
        reasons.push_back(note != catalog_.left_out.end()
                              ? key + " '" + name + "' is not built here: " + note->second
                              : key + " '" + name + "' is not installed here (available: " +
                                    available_text(key) + ")");
      }
    }
    if (std::string why = thread_skip_reason(typed, host_cores_); !why.empty()) {
      reasons.push_back(why);
    }
    try {
      if (std::string why = data_skip_reason(typed); !why.empty()) reasons.push_back(why);
    } catch (const std::invalid_argument& e) {
      fail(entry.where, e.what());
    }
    if (catalog_.check_network) {
      if (auto why = catalog_.check_network(params)) {
        const Value* options = merged.find("options");
        fail(options != nullptr ? options->where : entry.where, *why);
      }
    }
    built.spec.skip_reason = join(reasons, "; ");
    return built;
  }

  // The link keys belong to `interconnect: custom`, which needs one of them; test hosts are
  // reached through mpirun's remote agent, so an emulated link needs launcher mpirun.
  void check_interconnect(const KeyValues& merged) const {
    const Value* profile = merged.find("interconnect");
    const std::string name =
        profile ? profile->v.get<std::string>() : key_default<std::string>("interconnect");
    const Value* gbit = merged.find("link_gbit");
    const Value* latency = merged.find("link_latency_us");
    for (const Value* v : {gbit, latency})
      if (v && name != "custom")
        fail(v->where, std::string(v == gbit ? "link_gbit" : "link_latency_us") +
                           " is for 'interconnect: custom'; this case's interconnect is " + name);
    if (name == "custom" && !gbit && !latency)
      fail(profile->where,
           "'interconnect: custom' needs link_gbit (bandwidth, Gbit/s) and/or "
           "link_latency_us (one-way latency)");
    const Value* launcher = merged.find("launcher");
    if (name != "loopback" && launcher &&
        !launcher_named(launcher->v.get<std::string>()).reaches_test_hosts()) {
      std::string reaching;
      for (const Launcher* l : launchers())
        if (l->reaches_test_hosts()) reaching += (reaching.empty() ? "" : " or ") + l->name();
      fail(launcher->where, "'interconnect: " + name + "' runs the ranks on test hosts that " +
                                reaching + " reaches; launcher " + launcher->v.get<std::string>() +
                                " cannot");
    }
  }

  // A case without `backend` runs on the usable backend of highest priority (plugin query()).
  std::string preferred_backend(const Where& where) const {
    if (!catalog_.preferred_backend.empty()) return catalog_.preferred_backend;
    if (!catalog_.backends.empty()) return catalog_.backends.front();
    fail(where, "this case sets no backend and no backend is installed here to choose");
  }

  void assign_ids(std::vector<BuiltCase>* built) const {
    static const std::set<std::string> kFixed = {"network", "backend", "batch", "threads"};
    static const std::set<std::string> kNamedWhenSet = {"data", "epochs", "epoch_size", "evaluate"};
    std::set<std::string> include_keys;
    for (const Entry& inc : includes_) {
      for (const auto& kv : inc.values.items()) include_keys.insert(kv.first);
    }
    std::vector<std::string> shown;
    for (const KeySpec& spec : key_specs()) {
      if (kFixed.count(spec.name)) continue;
      std::set<std::string> seen;
      for (const BuiltCase& b : *built) {
        const ordered_json& p = b.spec.params;
        seen.insert(p.contains(spec.name) ? p[spec.name].dump() : std::string());
      }
      if (seen.size() > 1 || include_keys.count(spec.name)) shown.push_back(spec.name);
    }
    std::map<std::string, const BuiltCase*> by_id;
    for (BuiltCase& b : *built) {
      const ordered_json& p = b.spec.params;
      std::string id = id_text(p["network"]) + "." + id_text(p["backend"]);
      if (p.contains("batch")) id += ".b" + id_text(p["batch"]);
      id += ".t" + id_text(p["threads"]);
      for (const std::string& key : shown) {
        // The real-data keys are named only where they leave their default, so adding a
        // real-data case to a suite keeps the ids (and results) of its synthetic cases.
        if (kNamedWhenSet.count(key) && p.contains(key) && p[key] == find_key_spec(key)->def)
          continue;
        // An empty map (an `options` axis's "no options" value) names nothing, as if absent.
        if (p.contains(key) && !(p[key].is_object() && p[key].empty()))
          id += "." + key + "=" + id_text(p[key]);
      }
      b.spec.id = sanitize_id(id);
      const auto [it, inserted] = by_id.emplace(b.spec.id, &b);
      if (!inserted) {
        fail(b.where, "duplicate case id '" + b.spec.id + "': the cases from " +
                          it->second->spec.source + " and " + b.spec.source +
                          " have the same values; remove one or make them differ");
      }
    }
  }

  std::string path_;
  std::optional<std::string> text_;  // the suite's text when it does not come from a file
  const SuiteCatalog& catalog_;
  int host_cores_;
  SuiteLimits limits_;
  size_t case_count_ = 0;
  std::map<std::string, std::set<std::string>> optional_;
  KeyValues defaults_;
  Where matrix_where_;
  std::vector<Axis> axes_;
  std::vector<Entry> includes_, excludes_;
};

}  // namespace

Suite load_suite(const std::string& path, const SuiteCatalog& catalog, int host_cores) {
  return load_suite(path, catalog, host_cores, {});
}

Suite load_suite(const std::string& path, const SuiteCatalog& catalog, int host_cores,
                 const std::vector<std::string>& overrides, const SuiteLimits& limits) {
  return Loader(path, catalog, host_cores, limits).load(overrides);
}

Suite load_suite_text(const std::string& text, const std::string& display_path,
                      const SuiteCatalog& catalog, int host_cores,
                      const std::vector<std::string>& overrides, const SuiteLimits& limits) {
  return Loader(display_path, catalog, host_cores, limits, text).load(overrides);
}

}  // namespace dlhost
