// rendezvous_client.cpp — the rendezvous store's client (rendezvous_store.h), on POSIX sockets:
// one blocking call at a time per connection, each bounded by a deadline, with refused and
// dropped connections retried within the connect timeout. The bytes on the wire are
// rendezvous_wire.h's.
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "distributed/rendezvous_store.h"
#include "distributed/rendezvous_wire.h"

namespace dlhost {
using namespace store_wire;
namespace {

// How long past a call's own timeout the client waits for the answer before it gives the server
// up: only a host that vanished without closing the connection takes that long.
constexpr int64_t kReplyMarginMs = 60 * 1000;

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

// Moves all `n` bytes through `io` (one send or recv of the bytes left, as the system call
// answers) on a non-blocking socket before `deadline`, waiting in poll() for `event`; false with
// the reason in *why otherwise.
template <typename Io>
bool transfer_all(int fd, short event, size_t n, Clock::time_point deadline, std::string* why,
                  Io io) {
  const bool sending = event == POLLOUT;
  for (size_t done = 0; done < n;) {
    ssize_t k = io(done, n - done);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) {
      *why = "the store closed the connection";
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd pfd{fd, event, 0};
      int ready = poll(&pfd, 1, ms_until(deadline));
      if (ready == 0) {
        *why = sending ? "the store took no data before the deadline"
                       : "no answer from the store before the deadline";
        return false;
      }
      if (ready < 0 && errno != EINTR) {
        *why = std::string("poll: ") + std::strerror(errno);
        return false;
      }
      continue;
    }
    *why = std::string(sending ? "send: " : "recv: ") + std::strerror(errno);
    return false;
  }
  return true;
}

bool send_all(int fd, const void* data, size_t n, Clock::time_point deadline, std::string* why) {
  auto p = static_cast<const unsigned char*>(data);
  return transfer_all(fd, POLLOUT, n, deadline, why, [&](size_t done, size_t left) {
    return send(fd, p + done, left, MSG_NOSIGNAL);
  });
}

bool recv_all(int fd, void* data, size_t n, Clock::time_point deadline, std::string* why) {
  auto p = static_cast<unsigned char*>(data);
  return transfer_all(fd, POLLIN, n, deadline, why,
                      [&](size_t done, size_t left) { return recv(fd, p + done, left, 0); });
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
  ResponseHead response;
  if (!read_response_head(r, &response)) {
    *why = "the store's answer is not the rendezvous protocol";
    return false;
  }
  const dlhost_code code = response.code;
  const uint64_t size = response.size;
  const size_t message_len = response.message_len;
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
  if (at != std::string::npos) hello_ = hello(secret);
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
  return call("store_set: key " + quoted(key), set_head(key, size), value, size, 0, nullptr, 0,
              nullptr);
}

StoreStatus RendezvousClient::get(const std::string& key, int64_t timeout_ms, void* value,
                                  size_t capacity, size_t* size) {
  if (key.size() > kMaxStoreKeyBytes)
    return {DLHOST_CODE_INVALID_ARGUMENT, "store_get: a key of " + std::to_string(key.size()) +
                                              " bytes is over the limit of " +
                                              std::to_string(kMaxStoreKeyBytes)};
  int64_t wait_ms = clamp_wait(timeout_ms);
  if (value == nullptr) capacity = 0;
  return call("store_get: key " + quoted(key), get_head(key, wait_ms, capacity), nullptr, 0,
              wait_ms, value, capacity, size);
}

}  // namespace dlhost
