// rendezvous_wire.h — the rendezvous store's wire codec, shared by its server
// (rendezvous_server.cpp) and its client (rendezvous_client.cpp): the protocol's constants, its
// big-endian integers, the hello, request and response heads as bytes, and the few socket and
// clock helpers both sides need. The protocol itself is described in rendezvous_store.h.
// Internal to host/distributed; nothing here keeps state, so every function is thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dlhost/dlhost.h"

namespace dlhost::store_wire {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<unsigned char>;

constexpr uint8_t kOpSet = 1;
constexpr uint8_t kOpGet = 2;
constexpr unsigned char kHelloMagic[4] = {'D', 'L', 'R', 'S'};
constexpr uint8_t kProtocolVersion = 1;
constexpr size_t kHelloHeadBytes = 4 + 1 + 2;     // magic, version, secret_len
constexpr size_t kHelloVersionAt = 4;             // where the version byte stands in a hello
constexpr size_t kHelloSecretLenAt = 5;           // where secret_len stands
constexpr size_t kRequestHeadBytes = 1 + 4;       // op, key_len
constexpr size_t kResponseHeadBytes = 1 + 8 + 4;  // code, size, message_len
constexpr size_t kMaxMessageBytes = 64 * 1024;    // a longer one is a broken stream
// Timeouts beyond a year are as good as forever and keep clock arithmetic from overflowing.
constexpr int64_t kMaxWaitMs = int64_t{365} * 24 * 3600 * 1000;

void put_u16(Bytes& b, uint16_t v);
void put_u32(Bytes& b, uint32_t v);
void put_u64(Bytes& b, uint64_t v);
uint16_t get_u16(const unsigned char* p);
uint32_t get_u32(const unsigned char* p);
uint64_t get_u64(const unsigned char* p);

// The hello that presents `secret` (cut at kMaxStoreSecretBytes: the server refuses it then).
Bytes hello(const std::string& secret);
// A request up to its SET value (the value follows on the wire as it is).
Bytes set_head(const std::string& key, uint64_t value_size);
Bytes get_head(const std::string& key, int64_t wait_ms, uint64_t capacity);
// The bytes of a request of `op` with a key of `key_len` before its SET value.
size_t request_fixed_bytes(uint8_t op, size_t key_len);

// A response's head and message, appended to `out` (a GET's value follows on the wire).
void put_response(Bytes& out, dlhost_code code, uint64_t size, const std::string& message);
struct ResponseHead {
  dlhost_code code = DLHOST_CODE_OK;
  uint64_t size = 0;  // the value's size (OK to a GET) or the size it needs (OUT_OF_RANGE)
  size_t message_len = 0;
};
// The kResponseHeadBytes at `p`; false when they are not the protocol (a code it does not
// know, a message longer than kMaxMessageBytes).
bool read_response_head(const unsigned char* p, ResponseHead* head);

// "'key'", for messages.
std::string quoted(const std::string& key);
// A GET's timeout clamped to [0, kMaxWaitMs].
int64_t clamp_wait(int64_t ms);
// Milliseconds from now to `deadline`, rounded up, for poll() (0 once it has passed).
int ms_until(Clock::time_point deadline);
// TCP_NODELAY: requests and answers are small and strictly alternate.
void set_nodelay(int fd);

}  // namespace dlhost::store_wire
