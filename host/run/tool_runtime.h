// tool_runtime.h — a case whose comm is a tool's own distributed runtime (issue 41; ABI 1.5,
// DLHOST_EXT_TOOL_RUNTIME): `comm: torch_ddp` is PyTorch's DistributedDataParallel inside
// cpu_libtorch2. The host starts no comm plugin and does no all-reduce of its own for such a case;
// it launches the ranks, serves the rendezvous store and handles timeouts and rank faults as for
// any multi-rank case, hands the compiled model to the backend's runtime, and afterwards combines
// the ranks' figures through the store (the slowest rank's step, the mean loss) and reads the
// runtime's own communication time per step.
#ifndef DLHOST_RUN_TOOL_RUNTIME_H
#define DLHOST_RUN_TOOL_RUNTIME_H

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "control_plane/control_plane.h"
#include "distributed/rank_env.h"
#include "run/step_loop.h"
#include "suite/tool_runtimes.h"

namespace dlhost {

// Why `backend` cannot run `runtime`, or nullopt when it can: a plugin before ABI 1.5 or without
// DLHOST_EXT_TOOL_RUNTIME, a runtime it does not own, or its own query's reason (a build without
// the runtime). The case is SKIPPED with it.
std::optional<std::string> tool_runtime_refusal(const LoadedPlugin& backend,
                                                const std::string& runtime);

class ToolRuntime {
 public:
  // Joins this rank's model to the runtime (blocks until every rank has, or `timeout_s`).
  ToolRuntime(const LoadedPlugin& backend, dlhost_model* model, const RankEnv& world,
              const std::string& runtime, const dlhost_options& options, double timeout_s);
  ToolRuntime(const ToolRuntime&) = delete;
  ToolRuntime& operator=(const ToolRuntime&) = delete;

  // After the timed steps, on every rank: s.allreduce becomes the runtime's communication time of
  // the timed steps (empty when it exposes none), then every figure the slowest rank's and the
  // loss the ranks' mean, as the host's own data parallelism reports them.
  void reduce(Samples& s);
  // The record's `distributed` fields of the runtime (runtime, mode, library, what the comm time
  // is or why it is absent).
  nlohmann::ordered_json describe() const;
  bool has_comm_time() const { return comm_time_.has_value(); }

 private:
  const dlhost_tool_runtime_ext* ext_;
  dlhost_model* model_;
  RankEnv world_;
  std::string runtime_, mode_, library_;
  std::optional<std::string> comm_time_;  // what it measures; nullopt: absent, for no_comm_time_
  std::string no_comm_time_;
  std::unique_ptr<ControlPlane> control_;
};

}  // namespace dlhost

#endif  // DLHOST_RUN_TOOL_RUNTIME_H
