// served_store.h — the rendezvous store of one multi-rank job, served by this process for the
// job's life (one server per job: no key outlives it). The ranks are separate processes, maybe on
// other nodes; the server listens on the one address they use (distributed/store_address.h) and
// serves only those who present the job's fresh secret. Ranks find both through DLHOST_STORE
// (SECRET@HOST:PORT), which the job's environment carries: mpirun passes it on with -x
// (LaunchSpec::store), srun and dlhost's fork launcher by inheritance; never on a command line,
// which any user can read. The environment is built here: between fork and exec only
// async-signal-safe calls are allowed, and setenv is not one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/rendezvous_store.h"

namespace dlhost {

class ServedStore {
 public:
  // Serves on `address` (numeric). Throws std::runtime_error when it cannot listen there.
  explicit ServedStore(const std::string& address);
  ServedStore(const ServedStore&) = delete;
  ServedStore& operator=(const ServedStore&) = delete;

  // This process's environment with DLHOST_STORE set to the store, NULL-ended: for
  // SpawnOptions::env.
  char* const* job_environment() const { return env_.data(); }

 private:
  std::unique_ptr<RendezvousServer> server_;
  std::string variable_;    // DLHOST_STORE=SECRET@HOST:PORT
  std::vector<char*> env_;  // points into environ and variable_
};

}  // namespace dlhost
