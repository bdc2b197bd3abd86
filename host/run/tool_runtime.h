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

#include "control_plane/control_plane.h"
#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "distributed/rank_env.h"
#include "record/blocks.h"
#include "run/step_loop.h"
#include "suite/tool_runtimes.h"

namespace dlhost {

// The runtimes that take the case's `bucket_mb` (torch_ddp: DDP's bucket_cap_mb); the others
// are not handed it.
bool takes_bucket_mb(const std::string& runtime);

// The runtimes whose job rank 0 drives alone (bigdl_spark: the Spark driver runs every step of
// the cluster; the other ranks' processes host its workers and time nothing): the case's figures
// are rank 0's, its loss not averaged over the ranks.
bool driven_by_rank_0(const std::string& runtime);

// Why `backend` cannot run `runtime`, or nullopt when it can: a plugin before ABI 1.5 or without
// DLHOST_EXT_TOOL_RUNTIME, a runtime it does not own, or its own query's reason (a build without
// the runtime). The case is SKIPPED with it.
std::optional<std::string> tool_runtime_refusal(const LoadedPlugin& backend,
                                                const std::string& runtime);

// The extra roles `runtime` needs beside `workers` workers with the backend's `options`, in the
// order of their values; empty when it needs none (or its extension has no runtime_roles).
// Throws Error with the backend's status when it refuses the options.
std::vector<RuntimeRoleCount> tool_runtime_roles(const LoadedPlugin& backend,
                                                 const std::string& runtime, int workers,
                                                 const dlhost_options& options);

// What a worker or an extra role hands the runtime beside its rank: the cluster text (ABI 1.5's
// dlhost_tool_runtime_args.cluster; "" when the runtime has no extra roles) and the case's
// optimizer (null: none).
struct RuntimeJob {
  std::string cluster;
  const dlhost_optimizer_desc* optimizer = nullptr;
};

// Runs one process of an extra role of `runtime` (`role`, `index` among that role's processes,
// beside `workers` workers) through the backend's runtime_serve, until the job is over. Throws
// Error with the backend's status when it fails.
void serve_tool_runtime_role(const LoadedPlugin& backend, const std::string& runtime, int32_t role,
                             int index, int workers, const RuntimeJob& job,
                             const dlhost_options& options, double timeout_s);

class ToolRuntime {
 public:
  // Joins this rank's model to the runtime (blocks until every rank has, or `timeout_s`).
  // `options`: the backend's, and the case's `bucket_mb` (torch_ddp: DDP's bucket_cap_mb).
  ToolRuntime(const LoadedPlugin& backend, dlhost_model* model, const RankEnv& world,
              const std::string& runtime, const dlhost_options& options, double timeout_s,
              const RuntimeJob& job = {});
  ToolRuntime(const ToolRuntime&) = delete;
  ToolRuntime& operator=(const ToolRuntime&) = delete;

  // After the timed steps, on every rank: s.allreduce becomes the runtime's communication time of
  // the timed steps (empty when it exposes none), then every figure the slowest rank's and the
  // loss the ranks' mean, as the host's own data parallelism reports them (rank 0's loss for a
  // runtime driven by rank 0, whose other ranks report zeros).
  void reduce(Samples& s);
  // The record's `distributed` fields of the runtime (runtime, mode, library, what the comm time
  // is or why it is absent).
  record::ToolRuntimeFields describe() const;
  bool has_comm_time() const { return comm_time_.has_value(); }

 private:
  const dlhost_tool_runtime_ext* ext_;
  dlhost_model* model_;
  RankEnv world_;
  std::string runtime_, mode_, library_;
  std::string bucket_mb_;  // the case's bucket_mb, for a runtime that takes it (torch_ddp)
  std::optional<std::string> comm_time_;  // what it measures; nullopt: absent, for no_comm_time_
  std::string no_comm_time_;
  std::unique_ptr<ControlPlane> control_;
};

}  // namespace dlhost

#endif  // DLHOST_RUN_TOOL_RUNTIME_H
