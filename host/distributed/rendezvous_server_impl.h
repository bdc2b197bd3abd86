// rendezvous_server_impl.h — the state of one rendezvous store server (rendezvous_store.h) and
// its steps, internal to host/distributed. Two files define them, along the server's own seam:
//   rendezvous_server.cpp    the serving loop: poll, accept, read, write, linger, close;
//   rendezvous_requests.cpp  what a connection's bytes ask and how it is answered: the hello and
//                            its secret, SET within the budget, GET now or parked, deadlines.
// Thread-safety: everything but the counters and what the constructor sets before the thread
// starts belongs to the serving thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "distributed/rendezvous_store.h"
#include "distributed/rendezvous_wire.h"

namespace dlhost {

namespace store_server {
// Buffers larger than this are freed once drained.
constexpr size_t kKeepBufferBytes = 1024 * 1024;
// Warnings about refused connections: each of the first few, then at powers of two, so that a
// flood cannot flood the case's log too.
constexpr uint64_t kWarnEach = 10;

inline void release_if_large(store_wire::Bytes& b) {
  if (b.empty() && b.capacity() > kKeepBufferBytes) store_wire::Bytes().swap(b);
}
inline bool worth_a_warning(uint64_t count) {
  return count <= kWarnEach || (count & (count - 1)) == 0;
}
}  // namespace store_server

struct RendezvousServer::Impl {
  using Clock = store_wire::Clock;
  using Bytes = store_wire::Bytes;

  struct Conn {
    int fd = -1;
    std::string peer;  // ADDRESS:PORT, for the log
    Clock::time_point hello_deadline;
    bool authenticated = false;   // presented the secret
    Bytes in;                     // received, not yet handled
    size_t need = 0;              // bytes `in` must hold for the request at its front (0: unknown)
    Bytes out;                    // the answer's head and message
    const Bytes* body = nullptr;  // a GET's value, sent after `out` from the stored copy
    size_t sent = 0;              // of `out`, then of `body`
    uint64_t discard = 0;         // bytes of a refused SET's value still to read and drop
    size_t reserved = 0;          // budget held for the SET value being received
    bool waiting = false;    // its GET is parked; what it sends next stays unread until answered
    bool closing = false;    // refused; `out` is sent, then input drained until EOF or linger_end
    bool lingering = false;  // `out` sent and the write side shut: reading to drop, then close
    Clock::time_point linger_end;
    bool dead = false;
    size_t out_left() const { return out.size() + (body ? body->size() : 0) - sent; }
  };
  struct Waiter {
    uint64_t conn;
    std::string key;
    uint64_t capacity;
    int64_t timeout_ms;
    Clock::time_point deadline;
  };

  std::string secret;
  StoreLimits limits;
  int listen_fd = -1;
  int wake[2] = {-1, -1};  // a byte here ends serve()
  uint16_t port = 0;
  std::thread thread;
  std::atomic<uint64_t> unauthenticated{0}, dropped_pending{0}, over_cap{0}, over_budget{0};

  // Owned by the serving thread once it runs.
  std::map<std::string, Bytes> values;  // never erased while serving: answers point into it
  size_t stored_bytes = 0;              // what `values` costs the budget
  size_t reserved_bytes = 0;            // what SETs still being received hold of it
  std::map<uint64_t, Conn> conns;       // by id, not fd: a closed fd's number comes back
  std::list<Waiter> waiters;
  std::vector<uint64_t> runnable;  // connections with input to look at (again)
  uint64_t next_id = 1;
  Clock::time_point accept_paused_until;  // out of file descriptors: accept again then

  // --- the serving loop (rendezvous_server.cpp) ---
  ~Impl();
  // serve() until the wake pipe says stop, then close every connection and log what was refused.
  void run();
  void serve();
  // Processes the connections in `runnable` until none is left.
  void run_runnable();
  // Starts lingering the refused connections whose answer is out, closes the dead ones.
  void reap();
  // Until the nearest deadline (a parked GET, a hello, a linger, accepting again); -1: none.
  int poll_timeout_ms() const;
  // Live connections that have (or have not yet) presented the secret.
  size_t count(bool authenticated) const;
  void accept_all();
  // For a new connection: the oldest one still to present the secret goes.
  void drop_oldest_pending();
  void read_from(uint64_t id, Conn& c);
  // Sends what it can of c's answer without blocking.
  void flush(Conn& c);
  // Queues an answer (and a GET's stored value) and starts sending it.
  void reply(Conn& c, dlhost_code code, uint64_t size, const std::string& message,
             const Bytes* value = nullptr);

  // --- requests (rendezvous_requests.cpp) ---
  // A header the connection cannot be read past (its body's length is not to be trusted).
  void refuse(Conn& c, const std::string& message);
  // Counted, and told in the case's log now and then, whatever the connection is answered.
  void count_unauthenticated(const Conn& c, const std::string& why);
  void refuse_unauthenticated(Conn& c, const std::string& why);
  // A GET of a key that is set: its value, or OUT_OF_RANGE with the size it needs.
  void answer_get(Conn& c, const std::string& key, uint64_t capacity);
  // Answers the GETs parked on `key`, just set.
  void wake_waiters(const std::string& key);
  // Answers the parked GETs past their deadline, refuses the hellos past theirs.
  void expire();
  // No hello within hello_timeout_ms: closed and counted like a stranger, but answered
  // UNAVAILABLE ("connect again"), not PERMISSION_DENIED: nothing wrong was presented, and a rank
  // descheduled between its connect and its hello on a loaded machine connects again and is
  // served, instead of failing its case.
  void refuse_late_hello(Conn& c);
  // Handles the whole requests at the front of c.in, up to a parked GET, an answer not yet
  // sent, or a refusal.
  void process(uint64_t id, Conn& c);
  // The hello at c.in[pos], checked; its size once the secret matched, 0 while incomplete or
  // refused.
  size_t handle_hello(Conn& c, size_t pos);
  // A SET this store will not keep: answered, and its value read and dropped as it arrives.
  void refuse_value(Conn& c, uint64_t size, const std::string& message);
  // The bytes of the request at c.in[pos], handled; 0 while it is incomplete.
  size_t handle_one(uint64_t id, Conn& c, size_t pos);
  // A SET whose `fixed` bytes up to its value are in c.in at `pos`, its value_len at `rest`: the
  // bytes used (0 while the value is still to come, all of c.in for a header it cannot read past).
  size_t handle_set(Conn& c, size_t pos, size_t fixed, const std::string& key,
                    const unsigned char* rest);
  // A GET, its timeout_ms and capacity at `rest`: answered now, or parked until the key is set.
  void handle_get(uint64_t id, Conn& c, const std::string& key, const unsigned char* rest);
};

}  // namespace dlhost
