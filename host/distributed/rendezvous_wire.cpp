// rendezvous_wire.cpp — see rendezvous_wire.h; also the DLHOST_STORE value's pieces
// (make_store_secret, store_variable_value) declared in rendezvous_store.h.
#include "distributed/rendezvous_wire.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <stdexcept>

#include "distributed/rendezvous_store.h"

namespace dlhost {
namespace store_wire {

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

Bytes hello(const std::string& secret) {
  const size_t len = std::min(secret.size(), kMaxStoreSecretBytes);
  Bytes b(std::begin(kHelloMagic), std::end(kHelloMagic));
  b.push_back(kProtocolVersion);
  put_u16(b, static_cast<uint16_t>(len));
  b.insert(b.end(), secret.begin(), secret.begin() + static_cast<std::ptrdiff_t>(len));
  return b;
}

namespace {
Bytes request_head(uint8_t op, const std::string& key) {
  Bytes head{op};
  put_u32(head, static_cast<uint32_t>(key.size()));
  head.insert(head.end(), key.begin(), key.end());
  return head;
}
}  // namespace

Bytes set_head(const std::string& key, uint64_t value_size) {
  Bytes head = request_head(kOpSet, key);
  put_u64(head, value_size);
  return head;
}

Bytes get_head(const std::string& key, int64_t wait_ms, uint64_t capacity) {
  Bytes head = request_head(kOpGet, key);
  put_u64(head, static_cast<uint64_t>(wait_ms));
  put_u64(head, capacity);
  return head;
}

size_t request_fixed_bytes(uint8_t op, size_t key_len) {
  // SET: value_len u64; GET: timeout_ms i64, capacity u64.
  return kRequestHeadBytes + key_len + (op == kOpSet ? 8 : 16);
}

void put_response(Bytes& out, dlhost_code code, uint64_t size, const std::string& message) {
  out.push_back(static_cast<unsigned char>(code));
  put_u64(out, size);
  put_u32(out, static_cast<uint32_t>(message.size()));
  out.insert(out.end(), message.begin(), message.end());
}

bool read_response_head(const unsigned char* p, ResponseHead* head) {
  head->code = static_cast<dlhost_code>(p[0]);
  head->size = get_u64(p + 1);
  head->message_len = get_u32(p + 9);
  return p[0] <= DLHOST_CODE_DATA_LOSS && head->message_len <= kMaxMessageBytes;
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

}  // namespace store_wire

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

}  // namespace dlhost
