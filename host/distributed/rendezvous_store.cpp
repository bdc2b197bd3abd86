// rendezvous_store.cpp — see rendezvous_store.h. POSIX sockets. The server is one thread that
// multiplexes every connection with poll(): a GET whose key is not there yet is parked in a list
// and answered when the key is set or its deadline passes, so it never holds up other clients.
#include "distributed/rendezvous_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <list>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

namespace dlhost {
namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<unsigned char>;

constexpr uint8_t kOpSet = 1;
constexpr uint8_t kOpGet = 2;
constexpr unsigned char kHelloMagic[4] = {'D', 'L', 'R', 'S'};
constexpr uint8_t kProtocolVersion = 1;
constexpr size_t kHelloHeadBytes = 4 + 1 + 2;     // magic, version, secret_len
constexpr size_t kRequestHeadBytes = 1 + 4;       // op, key_len
constexpr size_t kResponseHeadBytes = 1 + 8 + 4;  // code, size, message_len
constexpr size_t kMaxMessageBytes = 64 * 1024;    // a longer one is a broken stream
constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kKeepBufferBytes = 1024 * 1024;  // larger buffers are freed once drained
// Connections accepted per round of the serving loop: a flood of connections must not keep it
// accepting while the ranks' requests and deadlines wait.
constexpr int kAcceptsPerRound = 32;
// How long a refused connection is read and dropped after its answer, before it is closed:
// closing with unread input would reset the connection and lose the answer on the way.
constexpr int kLingerMs = 1000;
// Timeouts beyond a year are as good as forever and keep clock arithmetic from overflowing.
constexpr int64_t kMaxWaitMs = int64_t{365} * 24 * 3600 * 1000;
// How long past a call's own timeout the client waits for the answer before it gives the server
// up: only a host that vanished without closing the connection takes that long.
constexpr int64_t kReplyMarginMs = 60 * 1000;
// Warnings about refused connections: each of the first few, then at powers of two, so that a
// flood cannot flood the case's log too.
constexpr uint64_t kWarnEach = 10;

void put_u16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<unsigned char>(v >> 8));
  b.push_back(static_cast<unsigned char>(v));
}
void put_u32(Bytes& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>(v >> shift));
}
void put_u64(Bytes& b, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>(v >> shift));
}
uint16_t get_u16(const unsigned char* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

std::string quoted(const std::string& key) { return "'" + key + "'"; }

int64_t clamp_wait(int64_t ms) { return std::clamp<int64_t>(ms, 0, kMaxWaitMs); }

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

void set_nodelay(int fd) {
  // Requests and answers are small and strictly alternate: Nagle would only add latency.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

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

std::string make_store_secret() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw std::runtime_error(std::string("rendezvous store: getrandom: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string secret;
  for (unsigned char b : bytes) {
    secret.push_back(kHex[b >> 4]);
    secret.push_back(kHex[b & 15]);
  }
  return secret;
}

std::string store_variable_value(const std::string& secret, const std::string& host,
                                 uint16_t port) {
  bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return secret + "@" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// ------------------------------------------------------------------------------------------------
// Server

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
    c.out.push_back(static_cast<unsigned char>(code));
    put_u64(c.out, size);
    put_u32(c.out, static_cast<uint32_t>(message.size()));
    c.out.insert(c.out.end(), message.begin(), message.end());
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
    if (p[4] != kProtocolVersion) {
      refuse_unauthenticated(c, "protocol version " + std::to_string(p[4]) +
                                    ", this store speaks " + std::to_string(kProtocolVersion));
      return 0;
    }
    size_t len = get_u16(p + 5);
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
    size_t fixed = kRequestHeadBytes + key_len + (op == kOpSet ? 8 : 16);
    if (avail < fixed) {
      c.need = fixed;
      return 0;
    }
    std::string key(reinterpret_cast<const char*>(p + kRequestHeadBytes), key_len);
    const unsigned char* rest = p + kRequestHeadBytes + key_len;
    if (op == kOpSet) {
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
      const size_t cost = key_len + size + kStoreEntryOverheadBytes;
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
    return fixed;
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

// ------------------------------------------------------------------------------------------------
// Client

namespace {

// "host:port" or "[v6]:port".
bool split_address(const std::string& address, std::string* host, std::string* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  if (port->empty() || port->size() > 5 ||
      !std::all_of(port->begin(), port->end(), [](unsigned char ch) { return std::isdigit(ch); }))
    return false;
  int n = std::stoi(*port);
  return !host->empty() && n > 0 && n <= 65535;
}

// One attempt at every address `host` resolves to; the socket, or -1 with the reason in *why.
int try_connect(const std::string& host, const std::string& port, Clock::time_point deadline,
                std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    *why = std::string("cannot resolve ") + host + ": " + gai_strerror(rc);
    return -1;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      *why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      // Non-blocking, so that an unreachable node costs the deadline, not the kernel's minutes.
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int n = poll(&p, 1, ms_until(deadline));
        socklen_t len = sizeof(err);
        if (n == 1) {
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        } else {
          err = n == 0 ? ETIMEDOUT : errno;
        }
      }
    }
    if (err == 0) {
      set_nodelay(fd);
      return fd;
    }
    close(fd);
    *why = std::strerror(err);
  }
  return -1;
}

// Writes or reads all `n` bytes before `deadline`; false with the reason in *why otherwise.
bool send_all(int fd, const void* data, size_t n, Clock::time_point deadline, std::string* why) {
  auto p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      int ready = poll(&pfd, 1, ms_until(deadline));
      if (ready == 0) {
        *why = "the store took no data before the deadline";
        return false;
      }
      if (ready < 0 && errno != EINTR) {
        *why = std::string("poll: ") + std::strerror(errno);
        return false;
      }
      continue;
    }
    *why = std::string("send: ") + std::strerror(errno);
    return false;
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n, Clock::time_point deadline, std::string* why) {
  auto p = static_cast<unsigned char*>(data);
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) {
      *why = "the store closed the connection";
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd pfd{fd, POLLIN, 0};
      int ready = poll(&pfd, 1, ms_until(deadline));
      if (ready == 0) {
        *why = "no answer from the store before the deadline";
        return false;
      }
      if (ready < 0 && errno != EINTR) {
        *why = std::string("poll: ") + std::strerror(errno);
        return false;
      }
      continue;
    }
    *why = std::string("recv: ") + std::strerror(errno);
    return false;
  }
  return true;
}

// One request on a connected socket, after the hello on a new one. `head` holds everything up to
// the SET value, which is sent from the caller's memory as it is (up to 64 MiB, not worth a copy).
// For a GET (`get_out` set) the value lands in `value` and its size in *get_out->size.
struct GetOut {
  void* value;
  size_t capacity;
  size_t* size;
};
bool exchange(int fd, const Bytes* hello, const Bytes& head, const void* body, size_t body_size,
              int64_t wait_ms, const GetOut* get_out, StoreStatus* result, std::string* why) {
  auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms + kReplyMarginMs);
  if (hello != nullptr) {
    Bytes first = *hello;  // in one segment with the head: served at the accept, if it can be
    first.insert(first.end(), head.begin(), head.end());
    if (!send_all(fd, first.data(), first.size(), deadline, why)) return false;
  } else if (!send_all(fd, head.data(), head.size(), deadline, why)) {
    return false;
  }
  if (body_size > 0 && !send_all(fd, body, body_size, deadline, why)) return false;
  unsigned char r[kResponseHeadBytes];
  if (!recv_all(fd, r, sizeof(r), deadline, why)) return false;
  auto code = static_cast<dlhost_code>(r[0]);
  uint64_t size = get_u64(r + 1);
  size_t message_len = get_u32(r + 9);
  if (r[0] > DLHOST_CODE_DATA_LOSS || message_len > kMaxMessageBytes) {
    *why = "the store's answer is not the rendezvous protocol";
    return false;
  }
  std::string message(message_len, '\0');
  if (!recv_all(fd, message.data(), message_len, deadline, why)) return false;
  if (get_out != nullptr && code == DLHOST_CODE_OK) {
    if (size > get_out->capacity) {
      *why = "the store sent more than the buffer holds";
      return false;
    }
    if (!recv_all(fd, get_out->value, size, deadline, why)) return false;
  }
  if (get_out != nullptr && (code == DLHOST_CODE_OK || code == DLHOST_CODE_OUT_OF_RANGE))
    *get_out->size = size;
  *result = {code, std::move(message)};
  return true;
}

// Whether the server keeps a connection open after answering `code` (it closes those it refused).
bool connection_kept(dlhost_code code) {
  return code == DLHOST_CODE_OK || code == DLHOST_CODE_ALREADY_EXISTS ||
         code == DLHOST_CODE_DEADLINE_EXCEEDED || code == DLHOST_CODE_OUT_OF_RANGE;
}

}  // namespace

RendezvousClient::RendezvousClient(std::string store, int connect_timeout_ms)
    : connect_timeout_ms_(connect_timeout_ms), owner_(getpid()) {
  // SECRET@HOST:PORT; a secret holds no '@' (check_secret), so the first one ends it.
  size_t at = store.find('@');
  std::string secret = at == std::string::npos ? "" : store.substr(0, at);
  address_ = at == std::string::npos ? store : store.substr(at + 1);
  if (at != std::string::npos) {
    hello_.assign(std::begin(kHelloMagic), std::end(kHelloMagic));
    hello_.push_back(kProtocolVersion);
    put_u16(hello_, static_cast<uint16_t>(std::min(secret.size(), kMaxStoreSecretBytes)));
    hello_.insert(hello_.end(), secret.begin(),
                  secret.begin() +
                      static_cast<std::ptrdiff_t>(std::min(secret.size(), kMaxStoreSecretBytes)));
  }
}

RendezvousClient::~RendezvousClient() {
  for (int fd : idle_) close(fd);
}

int RendezvousClient::acquire(bool* fresh, StoreStatus* error) {
  *fresh = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A forked child shares its parent's sockets: talking on them would mix the two streams.
    if (owner_ != getpid()) {
      for (int fd : idle_) close(fd);
      idle_.clear();
      owner_ = getpid();
    }
    if (!idle_.empty()) {
      int fd = idle_.back();
      idle_.pop_back();
      return fd;
    }
  }
  std::string host, port;
  if (!split_address(address_, &host, &port)) {
    *error = {DLHOST_CODE_INVALID_ARGUMENT,
              "rendezvous store address '" + address_ + "' is not host:port"};
    return -1;
  }
  // The parent starts the store before the ranks, but a loaded node may be slow to route the
  // first connection: refused and unreachable are retried until the deadline.
  auto deadline = Clock::now() + std::chrono::milliseconds(connect_timeout_ms_);
  std::string why;
  for (;;) {
    int fd = try_connect(host, port, deadline, &why);
    if (fd >= 0) {
      *fresh = true;
      return fd;
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(50), std::chrono::milliseconds(ms_until(deadline))));
  }
  *error = {DLHOST_CODE_UNAVAILABLE, "cannot reach the rendezvous store at " + address_ +
                                         " within " + std::to_string(connect_timeout_ms_) +
                                         " ms: " + why};
  return -1;
}

void RendezvousClient::release(int fd) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (owner_ == getpid()) {
    idle_.push_back(fd);
  } else {
    close(fd);
  }
}

StoreStatus RendezvousClient::call(const std::string& what, const Bytes& head, const void* body,
                                   size_t body_size, int64_t wait_ms, void* value, size_t capacity,
                                   size_t* size) {
  GetOut out{value, capacity, size};
  auto deadline = Clock::now() + std::chrono::milliseconds(connect_timeout_ms_);
  for (int attempt = 1;; ++attempt) {
    StoreStatus result;
    bool fresh = false;
    int fd = acquire(&fresh, &result);
    if (fd < 0) return result;
    std::string why;
    if (!exchange(fd, fresh ? &hello_ : nullptr, head, body, body_size, wait_ms,
                  size != nullptr ? &out : nullptr, &result, &why)) {
      close(fd);
      return {DLHOST_CODE_UNAVAILABLE, what + ": rendezvous store at " + address_ + ": " + why};
    }
    if (connection_kept(result.code)) {
      release(fd);
      return result;
    }
    close(fd);
    // UNAVAILABLE from the server itself: dropped before it served anything (a flood of
    // strangers pushed this connection out before its hello was read, or this process was
    // descheduled past the hello deadline); connect again, until the connect timeout, and at
    // least twice more: a hello late by the whole timeout has used it up already.
    if (result.code == DLHOST_CODE_UNAVAILABLE && (Clock::now() < deadline || attempt < 3)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (result.code == DLHOST_CODE_PERMISSION_DENIED || result.code == DLHOST_CODE_UNAVAILABLE)
      result.message = what + ": rendezvous store at " + address_ + ": " + result.message;
    return result;
  }
}

StoreStatus RendezvousClient::set(const std::string& key, const void* value, size_t size) {
  if (key.size() > kMaxStoreKeyBytes)
    return {DLHOST_CODE_INVALID_ARGUMENT, "store_set: a key of " + std::to_string(key.size()) +
                                              " bytes is over the limit of " +
                                              std::to_string(kMaxStoreKeyBytes)};
  if (size > kMaxStoreValueBytes)
    return {DLHOST_CODE_INVALID_ARGUMENT, "store_set: a value of " + std::to_string(size) +
                                              " bytes is over the limit of " +
                                              std::to_string(kMaxStoreValueBytes)};
  Bytes head{kOpSet};
  put_u32(head, static_cast<uint32_t>(key.size()));
  head.insert(head.end(), key.begin(), key.end());
  put_u64(head, size);
  return call("store_set: key " + quoted(key), head, value, size, 0, nullptr, 0, nullptr);
}

StoreStatus RendezvousClient::get(const std::string& key, int64_t timeout_ms, void* value,
                                  size_t capacity, size_t* size) {
  if (key.size() > kMaxStoreKeyBytes)
    return {DLHOST_CODE_INVALID_ARGUMENT, "store_get: a key of " + std::to_string(key.size()) +
                                              " bytes is over the limit of " +
                                              std::to_string(kMaxStoreKeyBytes)};
  int64_t wait_ms = clamp_wait(timeout_ms);
  if (value == nullptr) capacity = 0;
  Bytes head{kOpGet};
  put_u32(head, static_cast<uint32_t>(key.size()));
  head.insert(head.end(), key.begin(), key.end());
  put_u64(head, static_cast<uint64_t>(wait_ms));
  put_u64(head, capacity);
  return call("store_get: key " + quoted(key), head, nullptr, 0, wait_ms, value, capacity, size);
}

}  // namespace dlhost
