// rendezvous_requests.cpp — what a connection to the rendezvous store's server asks and how it
// is answered (rendezvous_server_impl.h): the hello and its secret (refused, counted and logged
// when wrong, late or over the connection cap), SET within the case's byte budget, GET answered
// at once or parked until its key is set or its deadline passes.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "distributed/rendezvous_server_impl.h"

namespace dlhost {
using namespace store_wire;
using namespace store_server;
namespace {

// Whether the `n` bytes at `got` are `secret`, in a time that depends on the secret's length
// only, so that timing answers tell a stranger nothing about how much of a guess was right.
bool same_secret(const std::string& secret, const unsigned char* got, size_t n) {
  unsigned char diff = n == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i)
    diff |= static_cast<unsigned char>(secret[i]) ^ (i < n ? got[i] : 0);
  return diff == 0;
}

}  // namespace

// A header the connection cannot be read past (its body's length is not to be trusted).
void RendezvousServer::Impl::refuse(Conn& c, const std::string& message) {
  reply(c, DLHOST_CODE_INVALID_ARGUMENT, 0, message);
  c.closing = true;
}

void RendezvousServer::Impl::count_unauthenticated(const Conn& c, const std::string& why) {
  uint64_t n = ++unauthenticated;
  if (worth_a_warning(n))
    spdlog::warn(
        "rendezvous store: closed a connection from {} that did not present the case's secret "
        "({}); {} such connection(s) so far",
        c.peer, why, n);
}

void RendezvousServer::Impl::refuse_unauthenticated(Conn& c, const std::string& why) {
  count_unauthenticated(c, why);
  reply(c, DLHOST_CODE_PERMISSION_DENIED, 0,
        "rendezvous store: this connection did not present the case's secret (" + why +
            "); a rank finds it in DLHOST_STORE=SECRET@HOST:PORT");
  c.closing = true;
}

void RendezvousServer::Impl::answer_get(Conn& c, const std::string& key, uint64_t capacity) {
  const Bytes& v = values.at(key);
  if (v.size() > capacity) {
    reply(c, DLHOST_CODE_OUT_OF_RANGE, v.size(),
          "store_get: key " + quoted(key) + " holds " + std::to_string(v.size()) +
              " bytes, the buffer " + std::to_string(capacity));
  } else {
    reply(c, DLHOST_CODE_OK, v.size(), "", &v);
  }
}

void RendezvousServer::Impl::wake_waiters(const std::string& key) {
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

void RendezvousServer::Impl::expire() {
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
    if (!c.authenticated && !c.closing && !c.dead && c.hello_deadline <= now) refuse_late_hello(c);
}

void RendezvousServer::Impl::refuse_late_hello(Conn& c) {
  const std::string why =
      "none within " + std::to_string(limits.hello_timeout_ms) + " ms of connecting";
  count_unauthenticated(c, why);
  reply(c, DLHOST_CODE_UNAVAILABLE, 0,
        "rendezvous store: this connection presented no secret (" + why + "); connect again");
  c.closing = true;
}

void RendezvousServer::Impl::process(uint64_t id, Conn& c) {
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

size_t RendezvousServer::Impl::handle_hello(Conn& c, size_t pos) {
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

void RendezvousServer::Impl::refuse_value(Conn& c, uint64_t size, const std::string& message) {
  uint64_t n = ++over_budget;
  if (worth_a_warning(n))
    spdlog::warn("rendezvous store: {} (from {}; {} refused so far)", message, c.peer, n);
  reply(c, DLHOST_CODE_RESOURCE_EXHAUSTED, 0, message);
  c.discard = size;
}

size_t RendezvousServer::Impl::handle_one(uint64_t id, Conn& c, size_t pos) {
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

size_t RendezvousServer::Impl::handle_set(Conn& c, size_t pos, size_t fixed, const std::string& key,
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
                       std::to_string(limits.max_stored_bytes) + " bytes; " + std::to_string(cost) +
                       " more do not fit");
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

void RendezvousServer::Impl::handle_get(uint64_t id, Conn& c, const std::string& key,
                                        const unsigned char* rest) {
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

}  // namespace dlhost
