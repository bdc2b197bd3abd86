// case_job.h — what `dlhost run` hands a case's worker (the job, as JSON on its command line) and
// what the case's keys say about where its ranks run (the interconnect and its test hosts).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/plugin_registry.h"
#include "launch/test_hosts.h"
#include "run/runner.h"
#include "suite/case_params.h"

namespace dlhost {

struct CaseJob {
  CaseSpec input;
  std::string suite_name, suite_path;
  std::vector<std::string> plugin_folders;    // searched by the worker, in order
  std::vector<RefusedPlugin> unsafe_plugins;  // refused by dlhost's probe: never loaded again
  // The files of the plugins the case names (backend, comm, network), resolved by dlhost. When
  // set, the worker loads these alone: dlopening every plugin found (libtorch, cuDNN, cuBLAS,
  // NCCL) would cost each case hundreds of MB of resident memory and seconds of start-up, counted
  // in its peak memory. Empty: the worker searches plugin_folders (the case's plugins are unknown).
  std::vector<std::string> plugin_files;
  // Where rank 0 also writes its record (best effort; "" = stdout only). Open MPI's output
  // forwarding can tear a long stdout line between ranks; a file on this host cannot be torn.
  std::string record_file;
  // Every process of a tool runtime with extra roles and where it listens (ABI 1.5's cluster
  // text: isolate/runtime_roles.h); "" for other cases.
  std::string runtime_cluster;
};

nlohmann::ordered_json job_to_json(const CaseJob& job);
CaseJob job_from_json(const nlohmann::json& j);

nlohmann::ordered_json job_to_json(const CaseJob& job);
CaseJob job_from_json(const nlohmann::json& j);

// The case's interconnect; loopback when the key is absent.
Interconnect case_interconnect(const CaseParams& params);

// The test hosts a multi-rank case with an emulated interconnect runs on: ranks / ranks_per_node
// (1 rank per host unless the case sets ranks_per_node), rounded up.
int test_host_count(const CaseParams& params);

}  // namespace dlhost
