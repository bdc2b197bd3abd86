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
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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
constexpr size_t kRequestHeadBytes = 1 + 4;       // op, key_len
constexpr size_t kResponseHeadBytes = 1 + 8 + 4;  // code, size, message_len
constexpr size_t kMaxMessageBytes = 64 * 1024;    // a longer one is a broken stream
constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kKeepBufferBytes = 1024 * 1024;  // larger buffers are freed once drained
// Timeouts beyond a year are as good as forever and keep clock arithmetic from overflowing.
constexpr int64_t kMaxWaitMs = int64_t{365} * 24 * 3600 * 1000;
// How long past a call's own timeout the client waits for the answer before it gives the server
// up: only a host that vanished without closing the connection takes that long.
constexpr int64_t kReplyMarginMs = 60 * 1000;

void put_u32(Bytes& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>(v >> shift));
}
void put_u64(Bytes& b, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>(v >> shift));
}
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

}  // namespace

// ------------------------------------------------------------------------------------------------
// Server

struct RendezvousServer::Impl {
  struct Conn {
    int fd = -1;
    Bytes in;  // received, not yet handled
    Bytes out;
    size_t sent = 0;
    bool waiting = false;  // its GET is parked; what it sends next stays unread until answered
    bool closing = false;  // refused a request it cannot read past; closed once `out` is sent
    bool dead = false;
  };
  struct Waiter {
    uint64_t conn;
    std::string key;
    uint64_t capacity;
    int64_t timeout_ms;
    Clock::time_point deadline;
  };

  int listen_fd = -1;
  int wake[2] = {-1, -1};  // a byte here ends serve()
  uint16_t port = 0;
  std::thread thread;

  // Owned by the serving thread once it runs.
  std::map<std::string, Bytes> values;
  std::map<uint64_t, Conn> conns;  // by id, not fd: a closed fd's number comes back
  std::list<Waiter> waiters;
  std::vector<uint64_t> runnable;  // connections with input to look at (again)
  uint64_t next_id = 1;

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
  }

  void serve() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    for (;;) {
      fds.clear();
      ids.clear();
      fds.push_back({wake[0], POLLIN, 0});
      fds.push_back({listen_fd, POLLIN, 0});
      for (const auto& [id, c] : conns) {
        short events = 0;
        if (!c.waiting && !c.closing) events |= POLLIN;
        if (c.sent < c.out.size()) events |= POLLOUT;
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
        if (it == conns.end()) continue;
        if (fds[k].revents & POLLOUT) flush(it->second);
        if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) read_from(it->first, it->second);
      }
      expire();
      while (!runnable.empty()) {
        uint64_t id = runnable.back();
        runnable.pop_back();
        auto it = conns.find(id);
        if (it != conns.end() && !it->second.dead) process(id, it->second);
      }
      for (auto it = conns.begin(); it != conns.end();) {
        Conn& c = it->second;
        if (c.closing && c.sent == c.out.size()) c.dead = true;
        if (!c.dead) {
          ++it;
          continue;
        }
        close(c.fd);
        uint64_t id = it->first;
        waiters.remove_if([id](const Waiter& w) { return w.conn == id; });
        it = conns.erase(it);
      }
    }
  }

  int poll_timeout_ms() const {
    if (waiters.empty()) return -1;
    auto first =
        std::min_element(waiters.begin(), waiters.end(),
                         [](const Waiter& a, const Waiter& b) { return a.deadline < b.deadline; });
    return ms_until(first->deadline);
  }

  void accept_all() {
    for (;;) {
      int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        // EAGAIN: all taken. Anything else (a connection reset while queued, out of fds) is the
        // client's problem or passes; the listener stays up either way.
        if (errno == EINTR) continue;
        return;
      }
      set_nodelay(fd);
      Conn c;
      c.fd = fd;
      conns.emplace(next_id++, std::move(c));
    }
  }

  void read_from(uint64_t id, Conn& c) {
    size_t old = c.in.size();
    c.in.resize(old + kReadChunk);
    ssize_t n = recv(c.fd, c.in.data() + old, kReadChunk, 0);
    c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) {
      runnable.push_back(id);
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      c.dead = true;
    }
  }

  void flush(Conn& c) {
    while (c.sent < c.out.size()) {
      ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
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
    c.sent = 0;
    release_if_large(c.out);
  }

  void reply(Conn& c, dlhost_code code, uint64_t size, const std::string& message,
             const Bytes* value = nullptr) {
    c.out.push_back(static_cast<unsigned char>(code));
    put_u64(c.out, size);
    put_u32(c.out, static_cast<uint32_t>(message.size()));
    c.out.insert(c.out.end(), message.begin(), message.end());
    if (value != nullptr) c.out.insert(c.out.end(), value->begin(), value->end());
    flush(c);
  }

  // A header the connection cannot be read past (its body's length is not to be trusted).
  void refuse(Conn& c, const std::string& message) {
    reply(c, DLHOST_CODE_INVALID_ARGUMENT, 0, message);
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
  }

  // Handles the whole requests at the front of c.in, up to a parked GET or a refusal.
  void process(uint64_t id, Conn& c) {
    size_t pos = 0;
    while (!c.waiting && !c.closing) {
      size_t used = handle_one(id, c, pos);
      if (used == 0) break;
      pos += used;
    }
    if (c.closing) pos = c.in.size();
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
    release_if_large(c.in);
  }

  // The bytes of the request at c.in[pos], handled; 0 while it is incomplete.
  size_t handle_one(uint64_t id, Conn& c, size_t pos) {
    size_t avail = c.in.size() - pos;
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
    if (avail < fixed) return 0;
    std::string key(reinterpret_cast<const char*>(p + kRequestHeadBytes), key_len);
    const unsigned char* rest = p + kRequestHeadBytes + key_len;
    if (op == kOpSet) {
      uint64_t size = get_u64(rest);
      if (size > kMaxStoreValueBytes) {
        refuse(c, "store_set: a value of " + std::to_string(size) + " bytes is over the limit of " +
                      std::to_string(kMaxStoreValueBytes));
        return avail;
      }
      if (avail - fixed < size) {
        c.in.reserve(pos + fixed + size);  // one allocation for a large value
        return 0;
      }
      const unsigned char* v = rest + 8;
      if (values.emplace(key, Bytes(v, v + size)).second) {
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

RendezvousServer::RendezvousServer(const std::string& bind_address, uint16_t port)
    : impl_(std::make_unique<Impl>()) {
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

// One request on a connected socket. `head` holds everything up to the SET value, which is sent
// from the caller's memory as it is (up to 64 MiB, not worth a copy). For a GET (`get_out` set)
// the value lands in `value` and its size in *get_out->size.
struct GetOut {
  void* value;
  size_t capacity;
  size_t* size;
};
bool exchange(int fd, const Bytes& head, const void* body, size_t body_size, int64_t wait_ms,
              const GetOut* get_out, StoreStatus* result, std::string* why) {
  auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms + kReplyMarginMs);
  if (!send_all(fd, head.data(), head.size(), deadline, why)) return false;
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

}  // namespace

RendezvousClient::RendezvousClient(std::string address, int connect_timeout_ms)
    : address_(std::move(address)), connect_timeout_ms_(connect_timeout_ms), owner_(getpid()) {}

RendezvousClient::~RendezvousClient() {
  for (int fd : idle_) close(fd);
}

int RendezvousClient::acquire(StoreStatus* error) {
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
    if (fd >= 0) return fd;
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
  StoreStatus result;
  int fd = acquire(&result);
  if (fd < 0) return result;
  std::string why;
  if (!exchange(fd, head, value, size, 0, nullptr, &result, &why)) {
    close(fd);
    return {DLHOST_CODE_UNAVAILABLE,
            "store_set: key " + quoted(key) + ": rendezvous store at " + address_ + ": " + why};
  }
  release(fd);
  return result;
}

StoreStatus RendezvousClient::get(const std::string& key, int64_t timeout_ms, void* value,
                                  size_t capacity, size_t* size) {
  if (key.size() > kMaxStoreKeyBytes)
    return {DLHOST_CODE_INVALID_ARGUMENT, "store_get: a key of " + std::to_string(key.size()) +
                                              " bytes is over the limit of " +
                                              std::to_string(kMaxStoreKeyBytes)};
  int64_t wait_ms = clamp_wait(timeout_ms);
  Bytes head{kOpGet};
  put_u32(head, static_cast<uint32_t>(key.size()));
  head.insert(head.end(), key.begin(), key.end());
  put_u64(head, static_cast<uint64_t>(wait_ms));
  put_u64(head, value != nullptr ? capacity : 0);
  StoreStatus result;
  int fd = acquire(&result);
  if (fd < 0) return result;
  GetOut out{value, value != nullptr ? capacity : 0, size};
  std::string why;
  if (!exchange(fd, head, nullptr, 0, wait_ms, &out, &result, &why)) {
    close(fd);
    return {DLHOST_CODE_UNAVAILABLE,
            "store_get: key " + quoted(key) + ": rendezvous store at " + address_ + ": " + why};
  }
  release(fd);
  return result;
}

}  // namespace dlhost
