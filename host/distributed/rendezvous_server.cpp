// rendezvous_server.cpp — the rendezvous store's server (rendezvous_store.h), on POSIX sockets:
// its serving loop. One thread multiplexes every connection with poll(): a GET whose key is not
// there yet is parked in a list and answered when the key is set or its deadline passes, so it
// never holds up other clients. What a connection's bytes ask, and how it is answered, is
// rendezvous_requests.cpp; the bytes on the wire are rendezvous_wire.h's.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "distributed/rendezvous_server_impl.h"

namespace dlhost {
using namespace store_wire;
using namespace store_server;
namespace {

constexpr size_t kReadChunk = 256 * 1024;
// Connections accepted per round of the serving loop: a flood of connections must not keep it
// accepting while the ranks' requests and deadlines wait.
constexpr int kAcceptsPerRound = 32;
// How long a refused connection is read and dropped after its answer, before it is closed:
// closing with unread input would reset the connection and lose the answer on the way.
constexpr int kLingerMs = 1000;

bool secret_char(unsigned char ch) { return std::isalnum(ch) || ch == '_' || ch == '-'; }

void check_secret(const std::string& secret) {
  if (secret.size() < kMinStoreSecretBytes || secret.size() > kMaxStoreSecretBytes ||
      !std::all_of(secret.begin(), secret.end(), secret_char))
    throw std::invalid_argument("rendezvous store: a secret is " +
                                std::to_string(kMinStoreSecretBytes) + " to " +
                                std::to_string(kMaxStoreSecretBytes) +
                                " characters of [0-9A-Za-z_-] (make_store_secret() makes one)");
}

// "ADDRESS:PORT" of a socket address, for the log.
std::string peer_name(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), port, sizeof(port),
              NI_NUMERICHOST | NI_NUMERICSERV);
  return addr.ss_family == AF_INET6 ? "[" + std::string(host) + "]:" + port
                                    : std::string(host) + ":" + port;
}

}  // namespace

RendezvousServer::Impl::~Impl() {
  for (auto& [id, c] : conns) close(c.fd);
  for (int fd : {listen_fd, wake[0], wake[1]})
    if (fd >= 0) close(fd);
}

void RendezvousServer::Impl::run() {
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

void RendezvousServer::Impl::serve() {
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

void RendezvousServer::Impl::run_runnable() {
  while (!runnable.empty()) {
    uint64_t id = runnable.back();
    runnable.pop_back();
    auto it = conns.find(id);
    if (it != conns.end() && !it->second.dead) process(id, it->second);
  }
}

void RendezvousServer::Impl::reap() {
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

int RendezvousServer::Impl::poll_timeout_ms() const {
  auto next = Clock::time_point::max();
  for (const Waiter& w : waiters) next = std::min(next, w.deadline);
  for (const auto& [id, c] : conns) {
    if (!c.authenticated && !c.closing) next = std::min(next, c.hello_deadline);
    if (c.lingering) next = std::min(next, c.linger_end);
  }
  if (accept_paused_until > Clock::now()) next = std::min(next, accept_paused_until);
  return next == Clock::time_point::max() ? -1 : ms_until(next);
}

size_t RendezvousServer::Impl::count(bool authenticated) const {
  return static_cast<size_t>(std::count_if(conns.begin(), conns.end(), [&](const auto& kv) {
    return !kv.second.dead && kv.second.authenticated == authenticated;
  }));
}

void RendezvousServer::Impl::accept_all() {
  for (int round = 0; round < kAcceptsPerRound; ++round) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd =
        accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
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

void RendezvousServer::Impl::drop_oldest_pending() {
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

void RendezvousServer::Impl::read_from(uint64_t id, Conn& c) {
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

void RendezvousServer::Impl::flush(Conn& c) {
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

void RendezvousServer::Impl::reply(Conn& c, dlhost_code code, uint64_t size,
                                   const std::string& message, const Bytes* value) {
  put_response(c.out, code, size, message);
  c.body = value != nullptr && !value->empty() ? value : nullptr;
  flush(c);
}

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
