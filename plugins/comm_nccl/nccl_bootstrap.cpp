// nccl_bootstrap.cpp — see nccl_bootstrap.h.
#include "nccl_bootstrap.h"

#include <atomic>
#include <cstring>

#include "nccl_support.h"

namespace dlhost::comm_nccl {
namespace {

// Re-throws a store error with the key and the rank's role in it.
void check_store(dlhost_status* status, const std::string& what) {
  if (status == nullptr) return;
  const dlhost_host_api* h = sdk::host();
  const dlhost_code code = static_cast<dlhost_code>(h->status_code(status));
  std::string message = "nccl: " + what + ": " + h->status_message(status);
  h->status_destroy(status);
  if (code == DLHOST_CODE_DEADLINE_EXCEEDED)
    message += " (rank 0 never published it: is rank 0 alive and in the same case?)";
  sdk::fail(code, message);
}

}  // namespace

std::string unique_id_key(const std::string& prefix) {
  if (!prefix.empty()) return prefix + "nccl/unique_id";
  static std::atomic<uint64_t> comms{0};
  return "nccl/" + std::to_string(comms.fetch_add(1)) + "/unique_id";
}

ncclUniqueId exchange_unique_id(const std::string& key, int32_t rank, int64_t timeout_ms) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  const dlhost_host_api* h = sdk::host();
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    check_store(h->store_set(key.c_str(), &id, sizeof(id)), "publishing the unique id at " + key);
    return id;
  }
  size_t size = 0;
  check_store(h->store_get(key.c_str(), timeout_ms, &id, sizeof(id), &size),
              "rank " + std::to_string(rank) + " reading the unique id at " + key);
  if (size != sizeof(id))
    sdk::fail(DLHOST_CODE_DATA_LOSS, "nccl: the value at " + key + " holds " +
                                         std::to_string(size) + " bytes, not an NCCL unique id (" +
                                         std::to_string(sizeof(id)) + ")");
  return id;
}

}  // namespace dlhost::comm_nccl
