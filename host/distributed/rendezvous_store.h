// rendezvous_store.h — the rendezvous key-value store of a multi-rank case as a small TCP
// service, so that a value one rank sets (NCCL's unique id, an address) reaches the other ranks,
// which are separate processes, possibly on other nodes.
//
// The parent (`dlhost run`) starts a RendezvousServer for each multi-rank case before it
// launches the ranks and stops it once they are gone; every rank finds it through the
// environment variable DLHOST_STORE=SECRET@HOST:PORT and talks to it with a RendezvousClient
// (see host_api.cpp).
//
// Scoping: one server per case. A case's keys live and die with its server, so no key of one
// case can be read by the next, and no key prefix or cleanup protocol is needed. A rank left
// over from an earlier case cannot write into a later one either: the parent kills the case's
// whole process group before it stops that case's server, and the later case has another secret.
//
// Who may use it: only the case's ranks. The server holds a per-case random secret (128 bits,
// make_store_secret()) that reaches the ranks inside DLHOST_STORE (the environment, never the
// command line, which any user of the host can read); every connection must present it before
// any request is served, compared in constant time. A connection that does not (no hello, a
// wrong secret) is answered PERMISSION_DENIED, closed, counted, and the case's log says so with
// the peer's address and the count. One that presents nothing within
// StoreLimits::hello_timeout_ms is closed and counted the same way but answered UNAVAILABLE
// ("connect again"): a rank descheduled between its connect and its hello on a loaded machine
// connects again (the client retries it) instead of failing its case. Input that arrived is
// read before that deadline is judged. The server listens on the one address the ranks use
// (store_address.h), not on every interface.
//
// What a client can cost it, bounded (StoreLimits): connections still to present the secret
// (the oldest is dropped for a new one, so idle strangers cannot lock the ranks out), connections
// at once, key and value sizes, and the bytes the whole case holds (keys + values + a fixed
// overhead per key, plus the value a SET is still receiving). A GET's value is sent from the
// stored copy, and a connection's next request is not read before its last answer is sent, so a
// client that never reads costs one answer. Nothing a client sends can stop the server.
//
// Wire protocol, every integer big-endian, one request then one response per connection at a
// time:
//   hello (once, first on a connection): magic "DLRS", version u8 (1), secret_len u16, secret
//   request:  op u8 (1 = SET, 2 = GET), key_len u32, key bytes, then
//             SET: value_len u64, value bytes
//             GET: timeout_ms i64, capacity u64 (the most value bytes the client can take)
//   response: code u8 (a dlhost_code), size u64, message_len u32, message bytes, then `size`
//             value bytes only when a GET is answered OK. For OUT_OF_RANGE, `size` is the size
//             the value needs and no bytes follow.
// The hello gets no answer of its own (a connection costs no extra round trip): a refused one
// is answered, in place of its first request, PERMISSION_DENIED (no or wrong secret) or
// RESOURCE_EXHAUSTED (over the connection cap), then closed. UNAVAILABLE from the server means
// "not served, connect again" (a connection dropped before it presented its secret, or one that
// presented nothing in time); the client retries it within its connect timeout, and at least
// twice. Keys over kMaxStoreKeyBytes and values over
// kMaxStoreValueBytes are INVALID_ARGUMENT; a server that receives such a header answers it and
// closes the connection (it cannot skip an unbounded body safely). A SET over the case's budget
// is RESOURCE_EXHAUSTED; its body is read and dropped, so the connection stays usable.
//
// Thread-safety: RendezvousServer serves from its own thread and its methods may be called from
// any thread; RendezvousClient is thread-safe, and concurrent calls never wait on each other's
// blocking GET (each in-flight call has its own connection; idle ones are reused, so a process
// that calls one at a time keeps a single connection).
//
// Where it is done: rendezvous_wire.h (the bytes above, both sides), rendezvous_server_impl.h with
// rendezvous_server.cpp (the serving loop) and rendezvous_requests.cpp (what is served and how it
// is answered), rendezvous_client.cpp.
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
constexpr size_t kMaxStoreSecretBytes = 256;
constexpr size_t kMinStoreSecretBytes = 16;

// What one case's store lets its clients cost it.
struct StoreLimits {
  size_t max_connections = 256;  // presented the secret and open at once; more are refused
  size_t max_pending = 64;       // still to present it; a new one drops the oldest
  int hello_timeout_ms = 5000;   // to present it, from the accept
  size_t max_value_bytes = kMaxStoreValueBytes;  // at most kMaxStoreValueBytes
  // Keys + values + kStoreEntryOverheadBytes per key, plus values still being received.
  size_t max_stored_bytes = size_t{256} * 1024 * 1024;
};
// What a key costs beyond its key and value bytes (map node, vector), for the budget.
constexpr size_t kStoreEntryOverheadBytes = 96;

// What the server turned away, since it started.
struct StoreCounters {
  uint64_t unauthenticated = 0;  // closed without the case's secret (none, wrong, too late)
  uint64_t dropped_pending = 0;  // dropped before their hello for newer ones (max_pending)
  uint64_t over_cap = 0;         // presented it but over max_connections
  uint64_t over_budget = 0;      // SETs refused for max_stored_bytes or max_value_bytes
};

// A fresh secret for one case: 128 bits from the kernel's random source (getrandom), as 32
// lowercase hex digits. Throws std::runtime_error when the kernel gives none.
std::string make_store_secret();

// "SECRET@HOST:PORT" (an IPv6 literal HOST in brackets): the value of DLHOST_STORE.
std::string store_variable_value(const std::string& secret, const std::string& host, uint16_t port);

// The outcome of a store call: OK or a dlhost code with its message.
struct StoreStatus {
  dlhost_code code = DLHOST_CODE_OK;
  std::string message;
  bool ok() const { return code == DLHOST_CODE_OK; }
};

class RendezvousServer {
 public:
  // Listens on `bind_address` (a numeric address or a name: "127.0.0.1", "10.0.0.1", "::1") and
  // `port` (0: any free port) and starts serving those who present `secret` (16 to 256 bytes
  // of [0-9A-Za-z_-]). Throws std::invalid_argument for a bad secret, std::runtime_error when
  // the socket cannot be set up.
  RendezvousServer(std::string secret, const std::string& bind_address, uint16_t port = 0,
                   StoreLimits limits = {});
  // Stops serving, closes every connection (a client waiting in a GET gets UNAVAILABLE) and
  // joins the thread; logs how many connections it turned away, if any.
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // The port actually bound.
  uint16_t port() const;
  // DLHOST_STORE's value for ranks that reach this server at `host`.
  std::string variable_value(const std::string& host) const;
  StoreCounters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class RendezvousClient {
 public:
  // `store` is DLHOST_STORE's value, "SECRET@HOST:PORT" (HOST a name, an IPv4 literal or a
  // bracketed IPv6 literal); without "SECRET@" the client presents no secret and the server
  // refuses it. Nothing is connected until the first call, which retries refused connections
  // for `connect_timeout_ms`.
  explicit RendezvousClient(std::string store, int connect_timeout_ms = 5000);
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  // The ABI's store_set / store_get semantics (see dlhost_abi.h); on OUT_OF_RANGE *size is the
  // size needed. A lost or unreachable server is UNAVAILABLE; a refused secret is
  // PERMISSION_DENIED; over the server's limits is RESOURCE_EXHAUSTED.
  StoreStatus set(const std::string& key, const void* value, size_t size);
  StoreStatus get(const std::string& key, int64_t timeout_ms, void* value, size_t capacity,
                  size_t* size);

 private:
  // A connected socket for one call: an idle one, or a new one (*fresh: its hello is still to
  // be sent).
  int acquire(bool* fresh, StoreStatus* error);
  void release(int fd);
  // One request: `head` up to the SET value, `body` the value (or none).
  StoreStatus call(const std::string& what, const std::vector<unsigned char>& head,
                   const void* body, size_t body_size, int64_t wait_ms, void* value,
                   size_t capacity, size_t* size);

  std::string address_;  // HOST:PORT
  std::vector<unsigned char> hello_;
  int connect_timeout_ms_;
  std::mutex mutex_;
  std::vector<int> idle_;  // connected, hello sent, not in use
  pid_t owner_ = 0;        // the process whose sockets idle_ holds (a forked child reconnects)
};

}  // namespace dlhost
