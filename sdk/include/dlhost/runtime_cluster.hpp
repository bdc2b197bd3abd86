// runtime_cluster.hpp — the text form of a tool runtime's cluster (dlhost_tool_runtime_args'
// `cluster`, ABI 1.5): every process of the job by role and where it listens, as the host hands
// it to each worker and each extra role: "worker=127.0.0.1:40101,127.0.0.1:40102;ps=127.0.0.1:
// 40103;scheduler=127.0.0.1:40104". The host writes it (format_runtime_cluster); a backend reads
// it (parse_runtime_cluster) to build TensorFlow's ServerDef or ps-lite's DMLC_PS_ROOT_URI/PORT.
//
// Header-only and compiled into both; nothing here crosses the ABI. Pure functions, thread-safe.
#ifndef DLHOST_RUNTIME_CLUSTER_HPP
#define DLHOST_RUNTIME_CLUSTER_HPP

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlhost/dlhost_device.h"

namespace dlhost::sdk {

// Where one process listens.
struct Endpoint {
  std::string address;
  int port = 0;
  std::string text() const { return address + ":" + std::to_string(port); }
};

// Role name ("worker", "ps", "scheduler") -> its processes in index order.
using RuntimeCluster = std::map<std::string, std::vector<Endpoint>>;

// The cluster text's name of a role: "worker", "ps", "scheduler"; "" for another value.
inline std::string runtime_role_name(int32_t role) {
  switch (role) {
    case DLHOST_RUNTIME_WORKER:
      return "worker";
    case DLHOST_RUNTIME_PARAMETER_SERVER:
      return "ps";
    case DLHOST_RUNTIME_SCHEDULER:
      return "scheduler";
    default:
      return "";
  }
}

// The role of a cluster text's name, or 0 for another name.
inline int32_t runtime_role_value(const std::string& name) {
  for (int32_t r = 1; r < DLHOST_RUNTIME_ROLE_LIMIT; ++r)
    if (!runtime_role_name(r).empty() && runtime_role_name(r) == name) return r;
  return 0;
}

// "worker=A:P,A:P;ps=A:P": workers first, then the other roles in the order of their values;
// roles without processes are left out.
inline std::string format_runtime_cluster(const RuntimeCluster& cluster) {
  std::string out;
  for (int32_t r = 1; r < DLHOST_RUNTIME_ROLE_LIMIT; ++r) {
    auto it = cluster.find(runtime_role_name(r));
    if (runtime_role_name(r).empty() || it == cluster.end() || it->second.empty()) continue;
    out += (out.empty() ? "" : ";") + it->first + "=";
    for (size_t i = 0; i < it->second.size(); ++i)
      out += (i == 0 ? "" : ",") + it->second[i].text();
  }
  return out;
}

// The cluster of that text; throws std::invalid_argument saying what is wrong and where (an
// unknown role, a role twice, an endpoint without ":PORT" or with a port outside 1..65535).
inline RuntimeCluster parse_runtime_cluster(const std::string& text) {
  RuntimeCluster cluster;
  auto bad = [&](const std::string& what) {
    return std::invalid_argument("runtime cluster '" + text + "': " + what);
  };
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(start, end - start);
    const size_t eq = part.find('=');
    if (eq == std::string::npos) throw bad("'" + part + "' is not NAME=ADDRESS:PORT,...");
    const std::string name = part.substr(0, eq);
    if (runtime_role_value(name) == 0) throw bad("unknown role '" + name + "'");
    if (cluster.count(name)) throw bad("role '" + name + "' given twice");
    std::vector<Endpoint>& list = cluster[name];
    size_t at = eq + 1;
    while (at <= part.size()) {
      size_t comma = part.find(',', at);
      if (comma == std::string::npos) comma = part.size();
      const std::string ep = part.substr(at, comma - at);
      const size_t colon = ep.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == ep.size())
        throw bad("'" + ep + "' of role " + name + " is not ADDRESS:PORT");
      Endpoint e{ep.substr(0, colon), 0};
      for (char c : ep.substr(colon + 1)) {
        if (c < '0' || c > '9' || e.port > 65535) throw bad("bad port in '" + ep + "'");
        e.port = e.port * 10 + (c - '0');
      }
      if (e.port < 1 || e.port > 65535) throw bad("bad port in '" + ep + "'");
      list.push_back(e);
      at = comma + 1;
    }
    start = end + 1;
  }
  return cluster;
}

}  // namespace dlhost::sdk

#endif  // DLHOST_RUNTIME_CLUSTER_HPP
