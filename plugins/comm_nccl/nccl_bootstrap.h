// nccl_bootstrap.h — how the ranks of an `nccl` comm meet: rank 0 makes NCCL's unique id and
// publishes it in the host's rendezvous store (dlhost_host_api.store_set) under the comm's
// store_prefix; every other rank reads it from there (store_get, which waits for the key). No MPI,
// no side channel: the store is what the host gives every rank of a case.
//
// Thread-safety: thread-safe (the store is); the sequence behind unique_id_key is atomic.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <string>

namespace dlhost::comm_nccl {

// The key of one comm's unique id. A 1.2 host hands every comm of a case its own `prefix`; with
// an empty prefix (an older host) the key carries this process's count of comms instead, which
// every rank reaches in the same order since comm init is collective.
std::string unique_id_key(const std::string& prefix);

// Rank 0: a fresh id, stored under `key`. Other ranks: the id stored there, waiting at most
// `timeout_ms` (DEADLINE_EXCEEDED naming the key and rank 0 otherwise; DATA_LOSS when the value
// is not an id). Errors of the store come back as its status, with the key named.
ncclUniqueId exchange_unique_id(const std::string& key, int32_t rank, int64_t timeout_ms);

}  // namespace dlhost::comm_nccl
