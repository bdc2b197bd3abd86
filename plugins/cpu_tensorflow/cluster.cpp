// cluster.cpp — see cluster.h. Field numbers from tensorflow/core/protobuf/
// tensorflow_server.proto, cluster.proto and config.proto (the wheel's *.pb.h say them too).
#include "cluster.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "dlhost/dlhost.hpp"
#include "tf_api.h"

namespace dlhost::cpu_tensorflow::cluster {

namespace sdk = dlhost::sdk;
using tf::pb::bytes_field;
using tf::pb::int_field;

std::string server_def(const std::vector<Job>& jobs, const std::string& job, int32_t task,
                       const std::string& config) {
  std::string cluster_def;
  for (const Job& j : jobs) {
    std::string def;
    bytes_field(def, 1, j.name);  // JobDef.name
    for (size_t k = 0; k < j.addresses.size(); ++k) {
      std::string entry;  // JobDef.tasks, map<int32, string>: {key = 1, value = 2}
      int_field(entry, 1, k);
      bytes_field(entry, 2, j.addresses[k]);
      bytes_field(def, 2, entry);
    }
    bytes_field(cluster_def, 1, def);  // ClusterDef.job
  }
  std::string out;
  bytes_field(out, 1, cluster_def);   // ServerDef.cluster
  bytes_field(out, 2, job);           // job_name
  int_field(out, 3, uint64_t(task));  // task_index
  bytes_field(out, 4, config);        // default_session_config
  bytes_field(out, 5, "grpc");        // protocol
  return out;
}

std::string session_config(int32_t intra_op_threads, int32_t inter_op_threads,
                           const std::vector<std::string>& device_filters,
                           const std::string& group_leader) {
  std::string config = tf::config_proto(intra_op_threads, inter_op_threads, false);
  for (const std::string& f : device_filters) bytes_field(config, 4, f);  // device_filters
  if (!group_leader.empty()) {
    std::string experimental;
    bytes_field(experimental, 1, group_leader);  // Experimental.collective_group_leader
    bytes_field(config, 16, experimental);       // ConfigProto.experimental
  }
  return config;
}

std::string run_options_with_graph_key(int64_t graph_key) {
  std::string experimental, options;
  int_field(experimental, 1, uint64_t(graph_key));  // Experimental.collective_graph_key
  bytes_field(options, 8, experimental);            // RunOptions.experimental
  return options;
}

std::string run_options_with_timeout(int64_t timeout_ms) {
  std::string options;
  int_field(options, 2, uint64_t(timeout_ms));  // RunOptions.timeout_in_ms
  return options;
}

int free_port(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.c_str(), "0", &hints, &found); e != 0)
    sdk::fail(DLHOST_CODE_UNAVAILABLE, "cpu_tensorflow: address " + host + ": " + gai_strerror(e));
  int port = -1, error = 0;
  for (addrinfo* a = found; a != nullptr && port < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0)
      port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    else
      error = errno;
    ::close(fd);
  }
  freeaddrinfo(found);
  if (port < 0)
    sdk::fail(DLHOST_CODE_UNAVAILABLE,
              "cpu_tensorflow: no free port on " + host + ": " + std::strerror(error));
  return port;
}

std::string host_port(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

std::string store_error(dlhost_status* status) {
  const std::string message = sdk::host()->status_message(status);
  sdk::host()->status_destroy(status);
  return message;
}

// A started server is never deleted (see cluster.h); the process leaves through _exit with the
// exit status it was given, once its output is flushed. Registered after the host's own exit
// handlers, it runs before them; the plugin is never unloaded (the host keeps its libraries).
void leave_without_teardown(int status, void*) {
  std::fflush(nullptr);
  _exit(status);
}

}  // namespace

void store_put(const std::string& key, const std::string& value, const std::string& what) {
  if (dlhost_status* s = sdk::host()->store_set(key.c_str(), value.data(), value.size()))
    sdk::fail(DLHOST_CODE_INTERNAL,
              "cpu_tensorflow: " + what + " (store key " + key + "): " + store_error(s));
}

std::string store_take(const std::string& key, int64_t timeout_ms, const std::string& what) {
  char value[512];
  size_t size = 0;
  if (dlhost_status* s =
          sdk::host()->store_get(key.c_str(), timeout_ms, value, sizeof value, &size))
    sdk::fail(DLHOST_CODE_DEADLINE_EXCEEDED,
              "cpu_tensorflow: " + what + " (store key " + key + "): " + store_error(s));
  return std::string(value, size);
}

TF_Server* start_server(const std::string& def, const std::string& where) {
  tf::StatusPtr status(TF_NewStatus());
  TF_Server* server = TF_NewServer(def.data(), def.size(), status.get());
  tf::check(status.get(), "TF_NewServer for " + where);
  static std::once_flag registered;
  std::call_once(registered, [] { on_exit(leave_without_teardown, nullptr); });
  TF_ServerStart(server, status.get());
  tf::check(status.get(), "TF_ServerStart for " + where);
  return server;
}

}  // namespace dlhost::cpu_tensorflow::cluster
