// case_names.h — short display names of cases, for the console and for plot labels: a case is
// named by the keys that vary within its group (its suite's matrix part, CaseSpec::source or a
// record's suite.source; or a report's group), not by its full id, which names every key that
// varies anywhere in the suite ("fcn5.cpu_onednn.b64.t1.comm=none.ranks=1.launcher=mpirun...").
// Display only: `--case`, `--resume` and the records keep the full id.
//
// Its own library (dlhost_case_names: nlohmann_json alone), so that the report, which links no
// suite loader, names cases the same way. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlhost {

struct NamedCase {
  std::string id;                 // the full case id: the name of last resort
  nlohmann::ordered_json params;  // the case's keys (CaseSpec::params, a record's params)
  std::string group;              // the cases named against each other
};

struct ShortNameOptions {
  // Keys named whether or not they vary, first and in this order: the console names every case
  // by its id's head, network.backend.bB.tT, so that a line read alone says what ran.
  std::vector<std::string> always;
  // Names unique over all the cases given, not only within each group: where two groups give
  // the same name to different cases, the key that tells most of them apart is added to them,
  // and so on until the names differ.
  bool unique_overall = true;
};

// The id's head (network, backend, batch, threads) always, the group's varying keys after it.
ShortNameOptions console_name_options();

// One name per case, in order. A key is written as the id writes it: network and backend by
// value, "b64" for batch, "t2" for threads, "key=value" for the others, and a plugin's option as
// "plugin.option=value" (options: {cpu_tensorflow: {mode: xla}} -> "cpu_tensorflow.mode=xla");
// parts are joined by ".". A key a case leaves unset is not written. Cases with the same id get
// the same name. A case whose name would be empty (nothing varies in its group and no `always`
// key) or stays ambiguous is named by its id.
std::vector<std::string> short_case_names(const std::vector<NamedCase>& cases,
                                          const ShortNameOptions& options = {});

// A key whose values differ among some cases, with those values in order of first appearance:
// {"threads", {"4", "8"}}, {"cpu_tensorflow.mode", {"xla", "(unset)"}}. A plugin's option is
// named "plugin.option"; a case that leaves the key unset gives "(unset)".
struct VaryingKey {
  std::string key;
  std::vector<std::string> values;
};
// In the order the cases give the keys (the schema's order for CaseSpec::params).
std::vector<VaryingKey> varying_keys(const std::vector<nlohmann::ordered_json>& params);

}  // namespace dlhost
