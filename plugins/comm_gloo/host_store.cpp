// host_store.cpp — gloo::rendezvous::Store over the host's rendezvous store (see host_store.h).
#include "host_store.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "dlhost/comm_kit.hpp"

namespace dlhost::comm_gloo {
namespace {

namespace sdk = dlhost::sdk;

constexpr size_t kMaxValueBytes = size_t{64} << 20;  // the host store's own limit

// How many comms this process made before under (prefix, rank): the same on every rank.
uint64_t next_generation(const std::string& prefix, int32_t rank) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int32_t>, uint64_t> made;
  std::lock_guard<std::mutex> lock(mutex);
  return made[{prefix, rank}]++;
}

// A store error, said with the key and what usually causes it.
[[noreturn]] void store_failed(const sdk::Error& e, const std::string& key) {
  std::string hint;
  if (e.code() == DLHOST_CODE_DEADLINE_EXCEEDED)
    hint =
        " (a rank did not reach the comm's init in time, or the ranks do not share one store: "
        "`dlhost run` serves one for each case; a bare launcher needs "
        "DLHOST_STORE=SECRET@HOST:PORT)";
  sdk::fail(e.code(), "gloo: rendezvous store, key '" + key + "': " + e.what() + hint);
}

}  // namespace

HostStore::HostStore(const char* prefix, int32_t rank, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  const std::string p = prefix == nullptr ? "" : prefix;
  scope_ = p + "gloo/" + std::to_string(next_generation(p, rank)) + "/";
}

void HostStore::set(const std::string& key, const std::vector<char>& data) {
  const std::string k = scope_ + key;
  try {
    sdk::check(sdk::host()->store_set(k.c_str(), data.data(), data.size()));
  } catch (const sdk::Error& e) {
    store_failed(e, k);
  }
}

bool HostStore::has_store_size() {
  // NULL in a host that grew the table to ABI 1.2 before it filled this entry.
  const dlhost_host_api* host = sdk::host();
  return DLHOST_HAS_FIELD(host, dlhost_host_api, store_size) && host->store_size != nullptr;
}

void HostStore::await(const std::string& key, std::chrono::milliseconds timeout) const {
  const dlhost_host_api* host = sdk::host();
  size_t size = 0;
  if (has_store_size()) return sdk::check(host->store_size(key.c_str(), timeout.count(), &size));
  // Without store_size, a get into no room blocks the same way; OUT_OF_RANGE means it is there.
  dlhost_status* s = host->store_get(key.c_str(), timeout.count(), nullptr, 0, &size);
  if (s != nullptr && host->status_code(s) == DLHOST_CODE_OUT_OF_RANGE) {
    host->status_destroy(s);
    return;
  }
  sdk::check(s);
}

std::vector<char> HostStore::get(const std::string& key) {
  const std::string k = scope_ + key;
  const dlhost_host_api* host = sdk::host();
  try {
    size_t size = 0;
    if (has_store_size()) sdk::check(host->store_size(k.c_str(), timeout_.count(), &size));
    // Without store_size: grow until the value fits (Gloo's values are addresses, a few KiB).
    for (std::vector<char> value(std::max<size_t>(size, 4096));; value.resize(value.size() * 2)) {
      dlhost_status* s =
          host->store_get(k.c_str(), timeout_.count(), value.data(), value.size(), &size);
      if (s == nullptr) {
        value.resize(size);
        return value;
      }
      if (host->status_code(s) != DLHOST_CODE_OUT_OF_RANGE || value.size() > kMaxValueBytes)
        sdk::check(s);
      host->status_destroy(s);
    }
  } catch (const sdk::Error& e) {
    store_failed(e, k);
  }
}

void HostStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void HostStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  // One deadline for all the keys, as Gloo means it.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    const std::string k = scope_ + key;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    try {
      await(k, std::max(left, std::chrono::milliseconds(0)));
    } catch (const sdk::Error& e) {
      store_failed(e, k);
    }
  }
}

}  // namespace dlhost::comm_gloo
