// plugin_gloo.cpp — the `gloo` comm plugin: its options, capabilities and entry symbol. The
// communicator is gloo_comm.cpp; Gloo's bootstrap goes through the host's rendezvous store
// (host_store.cpp), so a case runs with `launcher: local` (no MPI), mpirun or srun alike.
//
// Options (the case's `options: {gloo: {...}}`):
//   algorithm  all-reduce algorithm: ring (default), halving_doubling, bcube
//   timeout    seconds any wait may take (rendezvous, each collective); default 600, the suite
//              default of a case's timeout
//   hostname   address or name this rank listens on; iface: or that of this network interface
//              (default: loopback when every rank is on this node, else the address this
//              rank reaches the rendezvous store from, else this node's hostname)
// Thread-safety: capabilities and query from any thread; a comm as gloo_comm.h says.
#include <gloo/config.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include "gloo_comm.h"

namespace dlhost::comm_gloo {
namespace {

constexpr const char* kName = "gloo";

Algorithm parse_algorithm(const std::string& name) {
  if (name == "ring") return Algorithm::ring;
  if (name == "halving_doubling") return Algorithm::halving_doubling;
  if (name == "bcube") return Algorithm::bcube;
  sdk::invalid("gloo: option algorithm: '" + name +
               "' is not one of ring, halving_doubling, bcube");
}

std::chrono::milliseconds parse_timeout(const std::string& text) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(seconds) || seconds <= 0)
    sdk::invalid("gloo: option timeout: '" + text + "' is not a positive number of seconds");
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
}

Settings parse_settings(const dlhost_options* raw) {
  const sdk::Options options(raw);
  Settings s;
  if (auto a = options.get("algorithm")) s.algorithm = parse_algorithm(*a);
  if (auto t = options.get("timeout")) s.timeout = parse_timeout(*t);
  s.hostname = options.get("hostname").value_or("");
  s.iface = options.get("iface").value_or("");
  return s;
}

class GlooPlugin final : public sdk::CommPlugin {
 public:
  sdk::CommCaps capabilities() const override {
    sdk::CommCaps caps;
    caps.dtypes = (1u << DLHOST_DTYPE_F32) | (1u << DLHOST_DTYPE_F64) | (1u << DLHOST_DTYPE_I32) |
                  (1u << DLHOST_DTYPE_I64);
    return caps;
  }
  std::string library() const override {
    return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
           "." + std::to_string(GLOO_VERSION_PATCH) + " (TCP transport)";
  }
  // Below `mpi` (10): a suite that lets the host choose keeps MPI where it was.
  int32_t query() const override { return 5; }
  std::unique_ptr<sdk::Comm> init(const dlhost_comm_init_args& args) override {
    return std::make_unique<GlooComm>(args, parse_settings(args.options));
  }
};

}  // namespace
}  // namespace dlhost::comm_gloo

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::comm_plugin<dlhost::comm_gloo::GlooPlugin>(
      host, {dlhost::comm_gloo::kName, "0.1.0",
             "Collectives on Gloo over TCP, bootstrapped through the host's store (host memory)"});
}
