// host_store.h — Gloo's rendezvous store interface (gloo::rendezvous::Store) carried by the
// host's rendezvous key-value store (dlhost_host_api.store_set/store_get/store_size), so Gloo
// bootstraps with whatever the host serves for a case (`launcher: local`, mpirun, srun) and needs
// no Redis, file system or MPI.
//
// Every key Gloo asks for is put under a namespace: the host's store_prefix for this comm (empty
// when the host sets none), "gloo/", and the number of comms this process made before under the
// same prefix and rank. Comms are made collectively in the same order on every rank, so the
// numbers agree across ranks and two comms of one case never share a key, even under a host
// that sets no prefix.
//
// Thread-safety: Gloo calls one store from the thread that connects the comm; the host's store
// functions are thread-safe, so several stores (ranks on threads of one process) may run at once.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dlhost::comm_gloo {

class HostStore final : public gloo::rendezvous::Store {
 public:
  // `prefix` may be NULL (no prefix); `timeout` bounds every wait for a key.
  HostStore(const char* prefix, int32_t rank, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The namespace every key goes under ("case/comm0/gloo/0/").
  const std::string& scope() const { return scope_; }

 private:
  // Whether the host fills store_size (ABI 1.2); else sizes are found by growing a buffer.
  static bool has_store_size();
  // Blocks until `key` exists, at most `timeout`.
  void await(const std::string& key, std::chrono::milliseconds timeout) const;

  std::string scope_;
  std::chrono::milliseconds timeout_;
};

}  // namespace dlhost::comm_gloo
