// case_env_command.cpp — `dlhost case-env`: the runtime environment a case's process gets
// (run/runtime_settings.h: allocator, OpenBLAS core, OpenMP wait policy, the frameworks'
// variables), for the case keys given, as JSON. bench/ asks it for each peer, so that a
// framework in its own Python runs under exactly what dlhost's backend of that framework gets.
// Loads no plugin.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/host_api.h"
#include "dlhost/cpu_info.hpp"
#include "run/runtime_settings.h"
#include "suite/case_params.h"
#include "suite/schema.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;

// The keys case-env reads: what decides a case's runtime environment.
const std::vector<std::string> kEnvironmentKeys = {"backend", "threads", "allocator",
                                                   "openblas_coretype", "omp_wait_policy"};

// KEY=VALUE, checked against the key table as a suite's value would be. Throws Error.
void add_setting(json& params, const std::string& text) {
  const size_t eq = text.find('=');
  const std::string key = text.substr(0, eq),
                    value = eq == std::string::npos ? "" : text.substr(eq + 1);
  const KeySpec* spec = find_key_spec(key);
  bool known = false;
  for (const std::string& k : kEnvironmentKeys) known = known || k == key;
  if (eq == std::string::npos || spec == nullptr || !known) {
    std::string keys;
    for (const std::string& k : kEnvironmentKeys) keys += (keys.empty() ? "" : ", ") + k;
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                "--set " + text + ": expected KEY=VALUE with KEY one of " + keys);
  }
  if (spec->kind == KeyKind::kChoice) {
    bool listed = false;
    std::string choices;
    for (const std::string& c : spec->choices) {
      listed = listed || c == value;
      choices += (choices.empty() ? "" : ", ") + c;
    }
    if (!listed)
      throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                  "--set " + text + ": '" + key + "' must be one of " + choices);
    params[key] = value;
  } else if (spec->kind == KeyKind::kInt) {
    size_t used = 0;
    int64_t n = -1;
    try {
      n = std::stoll(value, &used);
    } catch (const std::exception&) {
    }
    if (used != value.size() || n < 0)
      throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                  "--set " + text + ": '" + key + "' must be an integer >= 0");
    params[key] = n;
  } else {
    params[key] = value;
  }
}

}  // namespace

Command add_case_env_command(CLI::App& app) {
  auto settings = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand(
      "case-env",
      "Print the runtime environment (allocator, OpenBLAS core, OpenMP and framework variables) "
      "that a case with these keys runs under, as JSON: what bench/ gives a framework's peer");
  sub->add_option("--set", *settings,
                  "KEY=VALUE of backend, threads, allocator, openblas_coretype, omp_wait_policy "
                  "(repeatable)");
  Command c;
  c.sub = sub;
  c.run_without_plugins = [settings] {
    json params = json::object();
    try {
      for (const std::string& s : *settings) add_setting(params, s);
    } catch (const Error& e) {
      std::fprintf(stderr, "dlhost case-env: %s\n", e.what());
      return 2;
    }
    const CaseEnvironment env =
        case_environment(case_params(params), allocator_folders(), sdk::cpu_info().flags);
    json out = case_environment_json(env);
    std::printf("%s\n", out.dump(2).c_str());
    return env.allocator.skip_reason.empty() ? 0 : 3;
  };
  return c;
}

}  // namespace dlhost
