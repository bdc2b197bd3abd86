// tool_runtimes.h — the tools' own distributed runtimes a case may name as its comm besides the
// comm plugins (issue 41; the case's run is run/tool_runtime.h): each is owned by one backend,
// which accepts it or has the case SKIPPED. Only runtimes a backend backs are listed.
#ifndef DLHOST_SUITE_TOOL_RUNTIMES_H
#define DLHOST_SUITE_TOOL_RUNTIMES_H

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace dlhost {

// "torch_ddp": PyTorch's DistributedDataParallel (c10d's Reducer over Gloo), cpu_libtorch2's;
// "mxnet_kvstore": MXNet's kvstore dist_sync (ps-lite: a scheduler and servers), cpu_mxnet's;
// "tf_collective": TensorFlow's CollectiveReduceV2 over its gRPC servers (MultiWorkerMirrored
// Strategy's all-reduce), cpu_tensorflow's; "tf_ps": TensorFlow's parameter servers
// (asynchronous; its ps tasks are extra roles), cpu_tensorflow's; "bigdl_spark": BigDL's
// DistriOptimizer on a Spark standalone cluster (its master an extra role, a worker in every
// rank's process, the driver in rank 0's), cpu_bigdl's.
inline const std::vector<std::string>& tool_runtime_names() {
  static const std::vector<std::string> names = {"torch_ddp", "mxnet_kvstore", "tf_collective",
                                                 "tf_ps", "bigdl_spark"};
  return names;
}

// An extra role a runtime needs (ABI 1.5's dlhost_runtime_role: a parameter server, a
// scheduler) and how many processes of it (run/tool_runtime.h's tool_runtime_roles).
struct RuntimeRoleCount {
  int32_t role = 0;
  int count = 0;
};

inline bool is_tool_runtime(const std::string& comm) {
  const auto& names = tool_runtime_names();
  return std::find(names.begin(), names.end(), comm) != names.end();
}

}  // namespace dlhost

#endif  // DLHOST_SUITE_TOOL_RUNTIMES_H
