// runner.h — runs one case of a suite in this process and makes its result record: builds the
// network's graph, compiles it on the backend, initializes weights and resident synthetic data,
// runs warm-up then timed training steps (forward, backward, update, each ended by a
// synchronize), and summarizes. Never throws: every failure becomes the record's status.
// Not thread-safe (backends bound threads per process).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/networks.h"
#include "distributed/rank_env.h"
#include "record/record.h"
#include "run/memory_need.h"
#include "suite/suite.h"
#include "suite/tool_runtimes.h"

namespace dlhost {

class PluginRegistry;

struct RunContext {
  const PluginRegistry* registry = nullptr;
  const std::vector<NetworkRef>* networks = nullptr;
  nlohmann::ordered_json environment;  // from capture_environment
  std::string suite_name, suite_path;
  RankEnv rank;  // this process's place in the case's world (a world of 1 without a launcher)
  // Called as every training step (warm-up included) enters each phase: 0 forward, 1 backward,
  // 2 gradient all-reduce, 3 update; for progress reports that name a rank that hangs.
  std::function<void(int64_t step, int phase)> on_progress;
  // Called as a rank of a multi-rank case enters each start-up stage before its first step:
  // "comm" (the comm's init) and "weights" (the weights' broadcast from rank 0 and a barrier),
  // where it waits for the other ranks, then "ready"; so that a start-up where the ranks wait
  // for each other is named, and ended, before the case's timeout (case_process.h).
  std::function<void(const char* stage)> on_stage;
  // Called once the case's graph is built, before its compile, with the least its network needs
  // (run/memory_need.h): so that the parent of a process that dies under memory_limit_mb can
  // tell an allocation the limit refused from a crash of another cause.
  std::function<void(const TensorNeed& need)> on_need;
  // Every process of a tool runtime with extra roles and where it listens (ABI 1.5's cluster
  // text, isolate/runtime_roles.h); "" for other cases.
  std::string runtime_cluster;
};

// Result statuses: the record module's (record/record.h).
using record::kStatusCrashed;
using record::kStatusFailed;
using record::kStatusOk;
using record::kStatusOom;
using record::kStatusSkipped;
using record::kStatusTimeout;

nlohmann::ordered_json run_case(const CaseSpec& input, const RunContext& context);

// One process of an extra role (`role`: dlhost_runtime_role, `index` among its processes) of the
// case's tool runtime (its comm), with context.runtime_cluster: the backend's runtime_serve with
// the case's backend options and optimizer, until the job is over. Throws Error when it fails.
void serve_runtime_role(const CaseSpec& input, const RunContext& context, int32_t role, int index);

// The extra roles of the case's tool runtime (its comm), as its backend asks for them; empty for
// another comm, a backend not found or not usable (the case's own run says why), or a runtime
// without roles. Throws Error with the backend's refusal of the case's options.
std::vector<RuntimeRoleCount> case_runtime_role_counts(const nlohmann::ordered_json& params,
                                                       const RunContext& context);

// Why the case's backend cannot run its network, read from what the plugins publish without
// opening a device: an op or attribute newer than the backend's ABI minor, an op missing from its
// capabilities, a precision it lacks ("" when none of these, or when the backend or network is
// not found: the case's own run says why). Builds the network's graph at mini-batch 1. What
// `dlhost validate` counts as skipped here; `run` records such a case SKIPPED at compile.
std::string capability_skip_reason(const PluginRegistry& registry,
                                   const std::vector<NetworkRef>& networks,
                                   const nlohmann::ordered_json& params);

// Why the case's network does not build with the options the case gives its plugin (the network
// plugin's own check of them, at mini-batch 1: "option seq=100000 must be in [1, 64]"), or
// nullopt (also when the case gives its network plugin no options, or the network is not found).
// The suite loader refuses such a suite for `validate` and `run` alike (SuiteCatalog).
std::optional<std::string> network_options_error(const std::vector<NetworkRef>& networks,
                                                 const nlohmann::ordered_json& params);

}  // namespace dlhost
