// rendezvous_store.h — the rendezvous key-value store of a multi-rank case as a small TCP
// service, so that a value one rank sets (NCCL's unique id, an address) reaches the other ranks,
// which are separate processes, possibly on other nodes.
//
// The parent (`dlhost run`) starts a RendezvousServer for each multi-rank case before it
// launches the ranks and stops it once they are gone; every rank finds it through the
// environment variable DLHOST_STORE=host:port and talks to it with a RendezvousClient (see
// host_api.cpp).
//
// Scoping: one server per case. A case's keys live and die with its server, so no key of one
// case can be read by the next, and no key prefix or cleanup protocol is needed. A rank left
// over from an earlier case cannot write into a later one either: the parent kills the case's
// whole process group before it stops that case's server.
//
// Wire protocol, every integer big-endian, one request then one response per connection at a
// time:
//   request:  op u8 (1 = SET, 2 = GET), key_len u32, key bytes, then
//             SET: value_len u64, value bytes
//             GET: timeout_ms i64, capacity u64 (the most value bytes the client can take)
//   response: code u8 (a dlhost_code), size u64, message_len u32, message bytes, then `size`
//             value bytes only when a GET is answered OK. For OUT_OF_RANGE, `size` is the size
//             the value needs and no bytes follow.
// Keys over kMaxStoreKeyBytes and values over kMaxStoreValueBytes are INVALID_ARGUMENT; a
// server that receives such a header answers it and closes the connection (it cannot skip an
// unbounded body safely).
//
// Thread-safety: RendezvousServer serves from its own thread and its methods may be called from
// any thread; RendezvousClient is thread-safe, and concurrent calls never wait on each other's
// blocking GET (each in-flight call has its own connection; idle ones are reused, so a process
// that calls one at a time keeps a single connection).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dlhost/dlhost.h"

namespace dlhost {

constexpr size_t kMaxStoreKeyBytes = 4 * 1024;
constexpr size_t kMaxStoreValueBytes = 64 * 1024 * 1024;

// The outcome of a store call: OK or a dlhost code with its message.
struct StoreStatus {
  dlhost_code code = DLHOST_CODE_OK;
  std::string message;
  bool ok() const { return code == DLHOST_CODE_OK; }
};

class RendezvousServer {
 public:
  // Listens on `bind_address` ("0.0.0.0", "127.0.0.1", "::"...) and `port` (0: any free port)
  // and starts serving. Throws std::runtime_error when the socket cannot be set up.
  explicit RendezvousServer(const std::string& bind_address = "0.0.0.0", uint16_t port = 0);
  // Stops serving, closes every connection (a client waiting in a GET gets UNAVAILABLE) and
  // joins the thread.
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // The port actually bound.
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class RendezvousClient {
 public:
  // `address` is "host:port" (a name, an IPv4 literal or a bracketed IPv6 literal). Nothing is
  // connected until the first call, which retries refused connections for `connect_timeout_ms`.
  explicit RendezvousClient(std::string address, int connect_timeout_ms = 5000);
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  // The ABI's store_set / store_get semantics (see dlhost_abi.h); on OUT_OF_RANGE *size is the
  // size needed. A lost or unreachable server is UNAVAILABLE.
  StoreStatus set(const std::string& key, const void* value, size_t size);
  StoreStatus get(const std::string& key, int64_t timeout_ms, void* value, size_t capacity,
                  size_t* size);

 private:
  // A connected socket for one call: an idle one, or a new one.
  int acquire(StoreStatus* error);
  void release(int fd);

  std::string address_;
  int connect_timeout_ms_;
  std::mutex mutex_;
  std::vector<int> idle_;  // connected, not in use
  pid_t owner_ = 0;        // the process whose sockets idle_ holds (a forked child reconnects)
};

}  // namespace dlhost
