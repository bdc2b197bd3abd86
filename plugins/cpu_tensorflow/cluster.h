// cluster.h — what cpu_tensorflow's runtimes (collective.cpp's tf_collective, ps.cpp's tf_ps) need
// to stand up TensorFlow's distributed runtime from the C API (cluster.cpp): the serialized
// ServerDef, session ConfigProto and RunOptions, a free port, dlhost's rendezvous store, and a
// started server, which is never deleted: TF_ServerStop is not implemented and TF_DeleteServer
// aborts a started server, so a process with one leaves through _exit (an exit handler).
// Thread-safety: none of its own; called from the host's thread at attach or serve.
#ifndef DLHOST_CPU_TENSORFLOW_CLUSTER_H
#define DLHOST_CPU_TENSORFLOW_CLUSTER_H

#include <tensorflow/c/c_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dlhost::cpu_tensorflow::cluster {

// A job of the cluster: its name ("worker", "ps") and its tasks' "host:port", task k at k.
struct Job {
  std::string name;
  std::vector<std::string> addresses;
};

// tensorflow.ServerDef of task `task` of job `job` in `jobs` (gRPC), with `config` as its default
// session config.
std::string server_def(const std::vector<Job>& jobs, const std::string& job, int32_t task,
                       const std::string& config);

// tensorflow.ConfigProto: the thread pools (0: TensorFlow's default), the devices a session sees
// (device_filters, e.g. "/job:worker/task:1"), and the collective group's leader ("" none).
std::string session_config(int32_t intra_op_threads, int32_t inter_op_threads,
                           const std::vector<std::string>& device_filters,
                           const std::string& group_leader);

// tensorflow.RunOptions with experimental.collective_graph_key.
std::string run_options_with_graph_key(int64_t graph_key);
// tensorflow.RunOptions with timeout_in_ms: the run (and every op blocked in it, a queue's
// dequeue, an accumulator's take) fails with DEADLINE_EXCEEDED after `timeout_ms`.
std::string run_options_with_timeout(int64_t timeout_ms);

// A port free on `host` now (bound to port 0, then released: TensorFlow's gRPC server turns
// SO_REUSEPORT off, so it cannot be held until the server binds it).
int free_port(const std::string& host);
// "host:port", "[v6]:port" for an IPv6 literal (gRPC's form).
std::string host_port(const std::string& host, int port);

// dlhost's rendezvous store (the host's store_set / store_get); errors name `what` and the key.
void store_put(const std::string& key, const std::string& value, const std::string& what);
std::string store_take(const std::string& key, int64_t timeout_ms, const std::string& what);

// Creates and starts the server of `def` (errors name `where`). The first call registers the
// exit handler that flushes stdio and _exits with the exit status: the server is never deleted.
TF_Server* start_server(const std::string& def, const std::string& where);

}  // namespace dlhost::cpu_tensorflow::cluster

#endif  // DLHOST_CPU_TENSORFLOW_CLUSTER_H
