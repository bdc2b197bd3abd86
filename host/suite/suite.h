// suite.h — loads a benchmark suite (YAML) and expands it into the cases dlhost runs.
//
// The format is documented in docs/suite-format.md. Every mistake in a suite is reported as one
// SuiteError that points at the offending node, so a suite is either fully valid or not run at
// all: a half-run sweep with a typo in its last case wastes hours of machine time.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlhost {

// The message starts with "FILE:LINE:COL: " (1-based), or "FILE: " when there is no position
// (a file that cannot be opened, a command-line override).
class SuiteError : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

// What is available on this machine; names outside it are errors unless the suite lists them
// under `optional`, in which case their cases are skipped.
struct SuiteCatalog {
  std::vector<std::string> networks, backends, comms;
  // What a case that leaves `backend` unset runs on: the usable backend of highest priority
  // here. Empty: the first of `backends`.
  std::string preferred_backend;
  // Checks one option a suite gives a plugin (`options: {plugin: {option: value}}`): the reason
  // it is wrong (an unknown option, a mistyped value), or nullopt. Unset: options are not checked.
  std::function<std::optional<std::string>(const std::string& plugin, const std::string& option,
                                           const std::string& value)>
      check_option;
  // Plugins the build left out, by name, with why (PluginRegistry::left_out): the skip reason of
  // their cases says it instead of only "not installed".
  std::map<std::string, std::string> left_out;
  // Why a case's network does not build with the options the case gives it (the network
  // plugin's own rule), or nullopt; the suite is refused at the `options` key. Unset: not checked.
  std::function<std::optional<std::string>(const nlohmann::ordered_json& params)> check_network;
  // Every plugin's name, of any kind (network plugins such as networks_transformer too): an
  // `options` key must name one of them, one the build left out, or one listed under `optional`.
  // Empty: the plugin names of `options` are not checked.
  std::vector<std::string> plugins;
};

struct CaseSpec {
  std::string id;                    // stable, unique, readable; selects the case with --case
  nlohmann::ordered_json params;     // every case key, defaults filled, in the documented key order
  std::string source;                // "FILE:LINE" of the matrix/include/cases entry it came from
  std::string skip_reason;           // non-empty: the case is reported as SKIPPED and not run
  bool backend_by_priority = false;  // the suite left `backend` unset: the host chose it
};

struct Suite {
  std::string path, name, description;
  std::vector<CaseSpec> cases;  // in expansion order
};

// Bounds on what a suite may ask for, checked before anything is built for it: a suite of 200
// bytes whose keys are aliases of one list asks for 10^9 cases, and /dev/zero never ends.
struct SuiteLimits {
  size_t max_cases = 10000;     // expanded cases, counted before they are built (--max-cases)
  size_t max_bytes = 4u << 20;  // of the suite file
  int max_depth = 64;           // nesting of [ ] and { } (yaml-cpp recurses once per level)
};

// host_cores <= 0 means unknown: no case is skipped for its thread count.
Suite load_suite(const std::string& path, const SuiteCatalog& catalog, int host_cores);
// `overrides` are "key=value" strings from the command line; the value is parsed as a YAML
// scalar or list. They replace the suite's defaults, and replace a matrix axis of the same key.
// Only regular files are read.
Suite load_suite(const std::string& path, const SuiteCatalog& catalog, int host_cores,
                 const std::vector<std::string>& overrides, const SuiteLimits& limits = {});

// The same from text in memory (fuzzing, tests); errors name `display_path`.
Suite load_suite_text(const std::string& text, const std::string& display_path,
                      const SuiteCatalog& catalog, int host_cores,
                      const std::vector<std::string>& overrides = {},
                      const SuiteLimits& limits = {});

}  // namespace dlhost
