// rendezvous_server.cpp — the rendezvous store's server (rendezvous_store.h), on POSIX sockets.
// One thread multiplexes every connection with poll(): a GET whose key is not there yet is
// parked in a list and answered when the key is set or its deadline passes, so it never holds up
// other clients. The bytes on the wire are rendezvous_wire.h's; what is here is who is served,
// what it may cost, and when it is answered.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

#include "distributed/rendezvous_store.h"
#include "distributed/rendezvous_wire.h"

namespace dlhost {
using namespace store_wire;
namespace {

constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kKeepBufferBytes = 1024 * 1024;  // larger buffers are freed once drained
// Connections accepted per round of the serving loop: a flood of connections must not keep it
// accepting while the ranks' requests and deadlines wait.
constexpr int kAcceptsPerRound = 32;
// How long a refused connection is read and dropped after its answer, before it is closed:
// closing with unread input would reset the connection and lose the answer on the way.
constexpr int kLingerMs = 1000;
// Warnings about refused connections: each of the first few, then at powers of two, so that a
// flood cannot flood the case's log too.
constexpr uint64_t kWarnEach = 10;

void release_if_large(Bytes& b) {
  if (b.empty() && b.capacity() > kKeepBufferBytes) Bytes().swap(b);
}

bool secret_char(unsigned char ch) { return std::isalnum(ch) || ch == '_' || ch == '-'; }

void check_secret(const std::string& secret) {
  if (secret.size() < kMinStoreSecretBytes || secret.size() > kMaxStoreSecretBytes ||
      !std::all_of(secret.begin(), secret.end(), secret_char))
    throw std::invalid_argument("rendezvous store: a secret is " +
                                std::to_string(kMinStoreSecretBytes) + " to " +
                                std::to_string(kMaxStoreSecretBytes) +
                                " characters of [0-9A-Za-z_-] (make_store_secret() makes one)");
}

// Whether the `n` bytes at `got` are `secret`, in a time that depends on the secret's length
// only, so that timing answers tell a stranger nothing about how much of a guess was right.
bool same_secret(const std::string& secret, const unsigned char* got, size_t n) {
  unsigned char diff = n == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i)
    diff |= static_cast<unsigned char>(secret[i]) ^ (i < n ? got[i] : 0);
  return diff == 0;
}

// "ADDRESS:PORT" of a socket address, for the log.
std::string peer_name(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), port, sizeof(port),
              NI_NUMERICHOST | NI_NUMERICSERV);
  return addr.ss_family == AF_INET6 ? "[" + std::string(host) + "]:" + port
                                    : std::string(host) + ":" + port;
}

bool worth_a_warning(uint64_t count) { return count <= kWarnEach || (count & (count - 1)) == 0; }

}  // namespace

struct RendezvousServer::Impl {
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

  ~Impl() {
    for (auto& [id, c] : conns) close(c.fd);
    for (int fd : {listen_fd, wake[0], wake[1]})
      if (fd >= 0) close(fd);
  }

  void run() {
    try {
      serve();
    } catch (const std::exception& e) {
      spdlog::error("rendezvous store: stopped serving: {}", e.what());
    }
    // Closing is what tells every waiting client that the store is gone.
    for (auto& [id, c] : conns) close(c.fd);
    conns.clear();
    waiters.clear();
    if (unauthenticated + dropped_pending + over_cap + over_budget > 0)
      spdlog::warn(
          "rendezvous store on port {}: turned away {} connection(s) without the case's secret, "
          "dropped {} still to present it, refused {} over the cap of {}, and {} SET(s) over the "
          "limits",
          port, unauthenticated.load(), dropped_pending.load(), over_cap.load(),
          limits.max_connections, over_budget.load());
  }

  void serve() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    for (;;) {
      fds.clear();
      ids.clear();
      fds.push_back({wake[0], POLLIN, 0});
      fds.push_back({Clock::now() >= accept_paused_until ? listen_fd : -1, POLLIN, 0});
      for (const auto& [id, c] : conns) {
        short events = 0;
        if ((!c.waiting && !c.closing && c.out_left() == 0) || c.lingering) events |= POLLIN;
        if (c.out_left() > 0) events |= POLLOUT;
        fds.push_back({c.fd, events, 0});
        ids.push_back(id);
      }
      int ready = poll(fds.data(), fds.size(), poll_timeout_ms());
      if (ready < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
      }
      if (fds[0].revents != 0) return;
      if (fds[1].revents & POLLIN) accept_all();
      for (size_t k = 2; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        auto it = conns.find(ids[k - 2]);
        if (it == conns.end() || it->second.dead) continue;
        Conn& c = it->second;
        if (fds[k].revents & POLLOUT) {
          flush(c);
          if (c.out_left() == 0 && !c.in.empty()) runnable.push_back(it->first);
        }
        if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) read_from(it->first, c);
      }
      // What arrived is served before deadlines are judged: a hello that came in time is not
      // refused because this thread was slow to read it (a loaded machine).
      run_runnable();
      expire();
      run_runnable();
      reap();
    }
  }

  void run_runnable() {
    while (!runnable.empty()) {
      uint64_t id = runnable.back();
      runnable.pop_back();
      auto it = conns.find(id);
      if (it != conns.end() && !it->second.dead) process(id, it->second);
    }
  }

  void reap() {
    auto now = Clock::now();
    for (auto it = conns.begin(); it != conns.end();) {
      Conn& c = it->second;
      if (c.closing && !c.lingering && c.out_left() == 0) {
        shutdown(c.fd, SHUT_WR);  // the answer, then EOF; the client's bytes still in flight
        c.lingering = true;       // are read and dropped, so that no reset overtakes it
        c.linger_end = now + std::chrono::milliseconds(kLingerMs);
      }
      if (c.lingering && now >= c.linger_end) c.dead = true;
      if (!c.dead) {
        ++it;
        continue;
      }
      close(c.fd);
      reserved_bytes -= c.reserved;
      uint64_t id = it->first;
      waiters.remove_if([id](const Waiter& w) { return w.conn == id; });
      it = conns.erase(it);
      accept_paused_until = {};  // a descriptor is free again
    }
  }

  int poll_timeout_ms() const {
    auto next = Clock::time_point::max();
    for (const Waiter& w : waiters) next = std::min(next, w.deadline);
    for (const auto& [id, c] : conns) {
      if (!c.authenticated && !c.closing) next = std::min(next, c.hello_deadline);
      if (c.lingering) next = std::min(next, c.linger_end);
    }
    if (accept_paused_until > Clock::now()) next = std::min(next, accept_paused_until);
    return next == Clock::time_point::max() ? -1 : ms_until(next);
  }

  size_t count(bool authenticated) const {
    return static_cast<size_t>(std::count_if(conns.begin(), conns.end(), [&](const auto& kv) {
      return !kv.second.dead && kv.second.authenticated == authenticated;
    }));
  }

  void accept_all() {
    for (int round = 0; round < kAcceptsPerRound; ++round) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        // Out of descriptors or memory: the pending connection stays queued and would wake
        // poll at once, forever; listen again once a connection closes (or shortly).
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          accept_paused_until = Clock::now() + std::chrono::milliseconds(200);
        // EAGAIN: all taken. Anything else (a connection reset while queued) is the client's
        // problem; the listener stays up either way.
        return;
      }
      set_nodelay(fd);
      // A new connection pushes out the oldest still to present the secret: strangers that
      // connect and say nothing cannot keep the ranks out, they only churn among themselves.
      while (count(false) >= std::max<size_t>(limits.max_pending, 1)) drop_oldest_pending();
      Conn c;
      c.fd = fd;
      c.peer = peer_name(addr, len);
      c.hello_deadline = Clock::now() + std::chrono::milliseconds(limits.hello_timeout_ms);
      uint64_t id = next_id++;
      Conn& added = conns.emplace(id, std::move(c)).first->second;
      // A rank sends its hello with its first request right after connecting: read it now, so
      // that it is served before a flood that follows can push it out.
      read_from(id, added);
      run_runnable();
    }
  }

  void drop_oldest_pending() {
    // First one already refused (its answer is out, it only lingers), then the oldest silent one.
    for (auto& [id, c] : conns)
      if (!c.dead && !c.authenticated && c.closing) {
        c.dead = true;
        return;
      }
    for (auto& [id, c] : conns) {
      if (c.dead || c.authenticated) continue;
      uint64_t n = ++dropped_pending;
      if (worth_a_warning(n))
        spdlog::warn(
            "rendezvous store: dropped a connection from {} that had not presented the case's "
            "secret yet, for a newer one ({} pending at most; {} dropped so far)",
            c.peer, limits.max_pending, n);
      // UNAVAILABLE: not served, so a rank that was slow to say hello connects again.
      reply(c, DLHOST_CODE_UNAVAILABLE, 0,
            "rendezvous store: too many connections waiting to present the secret; connect "
            "again");
      c.dead = true;
      return;
    }
  }

  void read_from(uint64_t id, Conn& c) {
    if (c.lingering) {
      char drop[4096];
      ssize_t n = recv(c.fd, drop, sizeof(drop), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        c.dead = true;
      return;
    }
    // Only as much as the next step needs: a hello (the request behind it stays in the kernel
    // until the secret is checked), the body of a SET, the value being dropped.
    size_t want = kReadChunk;
    if (!c.authenticated) {
      size_t hello_max = kHelloHeadBytes + kMaxStoreSecretBytes;
      want = c.in.size() < hello_max ? hello_max - c.in.size() : 1;
    } else if (c.discard > 0) {
      want = static_cast<size_t>(std::min<uint64_t>(kReadChunk, c.discard));
    } else if (c.need > c.in.size()) {
      want = std::min(kReadChunk, c.need - c.in.size());
    }
    size_t old = c.in.size();
    c.in.resize(old + want);
    ssize_t n = recv(c.fd, c.in.data() + old, want, 0);
    c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) {
      runnable.push_back(id);
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      c.dead = true;
    }
  }

  void flush(Conn& c) {
    while (c.out_left() > 0) {
      iovec iov[2];
      int parts = 0;
      if (c.sent < c.out.size()) iov[parts++] = {c.out.data() + c.sent, c.out.size() - c.sent};
      if (c.body != nullptr) {
        size_t off = c.sent > c.out.size() ? c.sent - c.out.size() : 0;
        // sendmsg does not write through iov_base; the stored value stays as it is.
        iov[parts++] = {const_cast<unsigned char*>(c.body->data()) + off, c.body->size() - off};
      }
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = static_cast<size_t>(parts);
      ssize_t n = sendmsg(c.fd, &m, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        c.dead = true;
        return;
      }
    }
    c.out.clear();
    c.body = nullptr;
    c.sent = 0;
    release_if_large(c.out);
  }

  void reply(Conn& c, dlhost_code code, uint64_t size, const std::string& message,
             const Bytes* value = nullptr) {
    put_response(c.out, code, size, message);
    c.body = value != nullptr && !value->empty() ? value : nullptr;
    flush(c);
  }

  // A header the connection cannot be read past (its body's length is not to be trusted).
  void refuse(Conn& c, const std::string& message) {
    reply(c, DLHOST_CODE_INVALID_ARGUMENT, 0, message);
    c.closing = true;
  }

  // Counted, and told in the case's log now and then, whatever the connection is answered.
  void count_unauthenticated(const Conn& c, const std::string& why) {
    uint64_t n = ++unauthenticated;
    if (worth_a_warning(n))
      spdlog::warn(
          "rendezvous store: closed a connection from {} that did not present the case's secret "
          "({}); {} such connection(s) so far",
          c.peer, why, n);
  }

  void refuse_unauthenticated(Conn& c, const std::string& why) {
    count_unauthenticated(c, why);
    reply(c, DLHOST_CODE_PERMISSION_DENIED, 0,
          "rendezvous store: this connection did not present the case's secret (" + why +
              "); a rank finds it in DLHOST_STORE=SECRET@HOST:PORT");
    c.closing = true;
  }

  void answer_get(Conn& c, const std::string& key, uint64_t capacity) {
    const Bytes& v = values.at(key);
    if (v.size() > capacity) {
      reply(c, DLHOST_CODE_OUT_OF_RANGE, v.size(),
            "store_get: key " + quoted(key) + " holds " + std::to_string(v.size()) +
                " bytes, the buffer " + std::to_string(capacity));
    } else {
      reply(c, DLHOST_CODE_OK, v.size(), "", &v);
    }
  }

  void wake_waiters(const std::string& key) {
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (it->key != key) {
        ++it;
        continue;
      }
      auto c = conns.find(it->conn);
      if (c != conns.end()) {
        answer_get(c->second, key, it->capacity);
        c->second.waiting = false;
        runnable.push_back(it->conn);
      }
      it = waiters.erase(it);
    }
  }

  void expire() {
    auto now = Clock::now();
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      auto c = conns.find(it->conn);
      if (c != conns.end()) {
        reply(c->second, DLHOST_CODE_DEADLINE_EXCEEDED, 0,
              "store_get: key " + quoted(it->key) + " not set within " +
                  std::to_string(it->timeout_ms) + " ms");
        c->second.waiting = false;
        runnable.push_back(it->conn);
      }
      it = waiters.erase(it);
    }
    for (auto& [id, c] : conns)
      if (!c.authenticated && !c.closing && !c.dead && c.hello_deadline <= now)
        refuse_late_hello(c);
  }

  // No hello within hello_timeout_ms: closed and counted like a stranger, but answered
  // UNAVAILABLE ("connect again"), not PERMISSION_DENIED: nothing wrong was presented, and a rank
  // descheduled between its connect and its hello on a loaded machine connects again and is
  // served, instead of failing its case.
  void refuse_late_hello(Conn& c) {
    const std::string why =
        "none within " + std::to_string(limits.hello_timeout_ms) + " ms of connecting";
    count_unauthenticated(c, why);
    reply(c, DLHOST_CODE_UNAVAILABLE, 0,
          "rendezvous store: this connection presented no secret (" + why + "); connect again");
    c.closing = true;
  }

  // Handles the whole requests at the front of c.in, up to a parked GET, an answer not yet
  // sent, or a refusal.
  void process(uint64_t id, Conn& c) {
    size_t pos = 0;
    c.need = 0;
    while (!c.waiting && !c.closing && !c.dead && c.out_left() == 0) {
      size_t used = c.authenticated ? handle_one(id, c, pos) : handle_hello(c, pos);
      if (used == 0) break;
      pos += used;
    }
    if (c.closing) pos = c.in.size();
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
    release_if_large(c.in);
  }

  // The hello at c.in[pos], checked; its size once the secret matched, 0 while incomplete or
  // refused.
  size_t handle_hello(Conn& c, size_t pos) {
    size_t avail = c.in.size() - pos;
    const unsigned char* p = c.in.data() + pos;
    // Refused at the first wrong byte: a client of the old protocol, or a stranger, says so at
    // once and is not kept waiting for bytes that never come.
    for (size_t i = 0; i < std::min<size_t>(avail, sizeof(kHelloMagic)); ++i)
      if (p[i] != kHelloMagic[i]) {
        refuse_unauthenticated(c, "no hello");
        return 0;
      }
    if (avail < kHelloHeadBytes) return 0;
    if (p[kHelloVersionAt] != kProtocolVersion) {
      refuse_unauthenticated(c, "protocol version " + std::to_string(p[kHelloVersionAt]) +
                                    ", this store speaks " + std::to_string(kProtocolVersion));
      return 0;
    }
    size_t len = get_u16(p + kHelloSecretLenAt);
    if (len > kMaxStoreSecretBytes) {
      refuse_unauthenticated(c, "a secret of " + std::to_string(len) + " bytes");
      return 0;
    }
    if (avail < kHelloHeadBytes + len) return 0;
    if (!same_secret(secret, p + kHelloHeadBytes, len)) {
      refuse_unauthenticated(c, len == 0 ? "an empty secret" : "a wrong secret");
      return 0;
    }
    if (count(true) >= limits.max_connections) {
      uint64_t n = ++over_cap;
      if (worth_a_warning(n))
        spdlog::warn(
            "rendezvous store: refused a connection from {}: {} connections are open, the cap; {} "
            "refused so far",
            c.peer, limits.max_connections, n);
      reply(c, DLHOST_CODE_RESOURCE_EXHAUSTED, 0,
            "rendezvous store: " + std::to_string(limits.max_connections) +
                " connections are open, the most it takes at once");
      c.closing = true;
      return 0;
    }
    c.authenticated = true;
    return kHelloHeadBytes + len;
  }

  // A SET this store will not keep: answered, and its value read and dropped as it arrives.
  void refuse_value(Conn& c, uint64_t size, const std::string& message) {
    uint64_t n = ++over_budget;
    if (worth_a_warning(n))
      spdlog::warn("rendezvous store: {} (from {}; {} refused so far)", message, c.peer, n);
    reply(c, DLHOST_CODE_RESOURCE_EXHAUSTED, 0, message);
    c.discard = size;
  }

  // The bytes of the request at c.in[pos], handled; 0 while it is incomplete.
  size_t handle_one(uint64_t id, Conn& c, size_t pos) {
    size_t avail = c.in.size() - pos;
    if (c.discard > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(avail, c.discard));
      c.discard -= n;
      return n;
    }
    if (avail < kRequestHeadBytes) return 0;
    const unsigned char* p = c.in.data() + pos;
    uint8_t op = p[0];
    size_t key_len = get_u32(p + 1);
    if (op != kOpSet && op != kOpGet) {
      refuse(c, "rendezvous store: unknown operation " + std::to_string(op));
      return avail;
    }
    if (key_len > kMaxStoreKeyBytes) {
      refuse(c, "rendezvous store: a key of " + std::to_string(key_len) +
                    " bytes is over the limit of " + std::to_string(kMaxStoreKeyBytes));
      return avail;
    }
    size_t fixed = request_fixed_bytes(op, key_len);
    if (avail < fixed) {
      c.need = fixed;
      return 0;
    }
    std::string key(reinterpret_cast<const char*>(p + kRequestHeadBytes), key_len);
    const unsigned char* rest = p + kRequestHeadBytes + key_len;
    if (op == kOpSet) return handle_set(c, pos, fixed, key, rest);
    handle_get(id, c, key, rest);
    return fixed;
  }

  // A SET whose `fixed` bytes up to its value are in c.in at `pos`, its value_len at `rest`: the
  // bytes used (0 while the value is still to come, all of c.in for a header it cannot read past).
  size_t handle_set(Conn& c, size_t pos, size_t fixed, const std::string& key,
                    const unsigned char* rest) {
    const size_t avail = c.in.size() - pos;
    uint64_t size = get_u64(rest);
    if (size > kMaxStoreValueBytes) {
      refuse(c, "store_set: a value of " + std::to_string(size) + " bytes is over the limit of " +
                    std::to_string(kMaxStoreValueBytes));
      return avail;
    }
    if (size > limits.max_value_bytes) {
      refuse_value(c, size,
                   "store_set: key " + quoted(key) + ": a value of " + std::to_string(size) +
                       " bytes is over this store's limit of " +
                       std::to_string(limits.max_value_bytes));
      return fixed;
    }
    const size_t cost = key.size() + size + kStoreEntryOverheadBytes;
    if (c.reserved == 0) {
      // Held from the header on, so that values being received at once cannot together
      // exceed the budget either.
      if (stored_bytes + reserved_bytes + cost > limits.max_stored_bytes) {
        refuse_value(c, size,
                     "store_set: key " + quoted(key) + ": the case's store holds " +
                         std::to_string(stored_bytes + reserved_bytes) + " of its " +
                         std::to_string(limits.max_stored_bytes) + " bytes; " +
                         std::to_string(cost) + " more do not fit");
        return fixed;
      }
      c.reserved = cost;
      reserved_bytes += cost;
    }
    if (avail - fixed < size) {
      c.in.reserve(pos + fixed + size);  // one allocation for a large value
      c.need = fixed + size;
      return 0;
    }
    reserved_bytes -= c.reserved;
    c.reserved = 0;
    const unsigned char* v = rest + 8;
    if (values.emplace(key, Bytes(v, v + size)).second) {
      stored_bytes += cost;
      reply(c, DLHOST_CODE_OK, 0, "");
      wake_waiters(key);
    } else {
      reply(c, DLHOST_CODE_ALREADY_EXISTS, 0, "store_set: key " + quoted(key) + " already set");
    }
    return fixed + size;
  }

  // A GET, its timeout_ms and capacity at `rest`: answered now, or parked until the key is set.
  void handle_get(uint64_t id, Conn& c, const std::string& key, const unsigned char* rest) {
    int64_t timeout_ms = clamp_wait(static_cast<int64_t>(get_u64(rest)));
    uint64_t capacity = get_u64(rest + 8);
    if (values.count(key) != 0) {
      answer_get(c, key, capacity);
    } else if (timeout_ms == 0) {
      reply(c, DLHOST_CODE_DEADLINE_EXCEEDED, 0, "store_get: key " + quoted(key) + " not set");
    } else {
      waiters.push_back(
          {id, key, capacity, timeout_ms, Clock::now() + std::chrono::milliseconds(timeout_ms)});
      c.waiting = true;
    }
  }
};

RendezvousServer::RendezvousServer(std::string secret, const std::string& bind_address,
                                   uint16_t port, StoreLimits limits)
    : impl_(std::make_unique<Impl>()) {
  check_secret(secret);
  impl_->secret = std::move(secret);
  limits.max_value_bytes = std::min(limits.max_value_bytes, kMaxStoreValueBytes);
  impl_->limits = limits;
  auto fail = [&](const std::string& what) {
    throw std::runtime_error("rendezvous store on " + bind_address + ":" + std::to_string(port) +
                             ": " + what);
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(bind_address.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) fail(std::string("cannot resolve the address: ") + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  found->ai_protocol);
  if (fd < 0) fail(std::string("socket: ") + std::strerror(errno));
  impl_->listen_fd = fd;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, found->ai_addr, found->ai_addrlen) != 0)
    fail(std::string("bind: ") + std::strerror(errno));
  if (listen(fd, SOMAXCONN) != 0) fail(std::string("listen: ") + std::strerror(errno));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0)
    fail(std::string("getsockname: ") + std::strerror(errno));
  impl_->port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  if (pipe2(impl_->wake, O_CLOEXEC | O_NONBLOCK) != 0)
    fail(std::string("pipe: ") + std::strerror(errno));
  Impl* impl = impl_.get();
  impl_->thread = std::thread([impl] { impl->run(); });
}

RendezvousServer::~RendezvousServer() {
  char stop = 1;
  while (write(impl_->wake[1], &stop, 1) < 0 && errno == EINTR) {
  }
  impl_->thread.join();
}

uint16_t RendezvousServer::port() const { return impl_->port; }

std::string RendezvousServer::variable_value(const std::string& host) const {
  return store_variable_value(impl_->secret, host, impl_->port);
}

StoreCounters RendezvousServer::counters() const {
  return {impl_->unauthenticated.load(), impl_->dropped_pending.load(), impl_->over_cap.load(),
          impl_->over_budget.load()};
}
}  // namespace dlhost
