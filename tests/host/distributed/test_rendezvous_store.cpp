// test_rendezvous_store.cpp — the TCP rendezvous store that the ranks of a multi-rank case share:
// its ABI semantics (wait, timeout, duplicate, small buffer, limits), many clients at once,
// clients in another process, the server going away under a waiting client, and the host API
// switching to it when DLHOST_STORE is set; then who may use it and what they can cost it: a
// stranger without the case's secret or with a wrong one can neither read nor write and is
// counted, a silent connection is closed, a flood of connections or of oversized values leaves
// the ranks' rendezvous intact, the connection cap and the byte budget answer with clear errors.
// Every wait is bounded so a bug fails, never hangs.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/host_api.h"
#include "distributed/rendezvous_store.h"

namespace {

using dlhost::RendezvousClient;
using dlhost::RendezvousServer;
using dlhost::StoreStatus;
using Clock = std::chrono::steady_clock;

using dlhost::StoreLimits;

// One secret for the test process; a case gets a fresh one each time.
const std::string& secret() {
  static const std::string s = dlhost::make_store_secret();
  return s;
}

// DLHOST_STORE's value for a server on loopback: SECRET@127.0.0.1:PORT.
std::string address_of(const RendezvousServer& server) {
  return server.variable_value("127.0.0.1");
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// get() into a string, for short values.
StoreStatus get_text(RendezvousClient& c, const std::string& key, int64_t timeout_ms,
                     std::string* out) {
  std::vector<char> buf(256);
  size_t size = 0;
  StoreStatus s = c.get(key, timeout_ms, buf.data(), buf.size(), &size);
  if (s.ok()) *out = std::string(buf.data(), size);
  return s;
}

StoreStatus set_text(RendezvousClient& c, const std::string& key, const std::string& value) {
  return c.set(key, value.data(), value.size());
}

// A client of our own making, speaking the wire protocol byte by byte (rendezvous_store.h).
using Bytes = std::vector<unsigned char>;

int raw_connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{5, 0};  // every read below is bounded
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void put_be(Bytes& b, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

Bytes hello(const std::string& secret) {
  Bytes b{'D', 'L', 'R', 'S', 1};
  put_be(b, secret.size(), 2);
  b.insert(b.end(), secret.begin(), secret.end());
  return b;
}

Bytes get_request(const std::string& key, uint64_t capacity) {
  Bytes b{2};
  put_be(b, key.size(), 4);
  b.insert(b.end(), key.begin(), key.end());
  put_be(b, 0, 8);  // timeout_ms
  put_be(b, capacity, 8);
  return b;
}

Bytes set_head(const std::string& key, uint64_t size) {
  Bytes b{1};
  put_be(b, key.size(), 4);
  b.insert(b.end(), key.begin(), key.end());
  put_be(b, size, 8);
  return b;
}

bool send_bytes(int fd, const Bytes& b) {
  return send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
}

// One answer: its code, size and message, any bytes after it, and whether the server closed.
struct RawAnswer {
  int code = -1;
  uint64_t size = 0;
  std::string message;
  size_t more = 0;  // bytes that followed the message
  bool closed = false;
};
RawAnswer read_answer(int fd, bool until_closed = true) {
  RawAnswer a;
  unsigned char head[13] = {};
  if (recv(fd, head, sizeof(head), MSG_WAITALL) != static_cast<ssize_t>(sizeof(head))) return a;
  a.code = head[0];
  for (int i = 1; i < 9; ++i) a.size = (a.size << 8) | head[i];
  uint32_t len = 0;
  for (int i = 9; i < 13; ++i) len = (len << 8) | head[i];
  a.message.resize(len);
  if (len > 0 && recv(fd, a.message.data(), len, MSG_WAITALL) != static_cast<ssize_t>(len))
    return a;
  if (!until_closed) return a;
  std::vector<char> rest(4096);
  ssize_t n = 0;
  while ((n = recv(fd, rest.data(), rest.size(), 0)) > 0) a.more += static_cast<size_t>(n);
  a.closed = n == 0;
  return a;
}

TEST(RendezvousStore, SetThenGetFromAnotherClient) {
  RendezvousServer server(secret(), "127.0.0.1");
  ASSERT_NE(server.port(), 0);
  RendezvousClient a(address_of(server)), b(address_of(server));
  ASSERT_TRUE(set_text(a, "nccl_id", "abcd").ok());
  std::string got;
  StoreStatus s = get_text(b, "nccl_id", 1000, &got);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(got, "abcd");
  // An empty value is a value.
  ASSERT_TRUE(b.set("empty", nullptr, 0).ok());
  size_t size = 99;
  EXPECT_TRUE(a.get("empty", 0, nullptr, 0, &size).ok());
  EXPECT_EQ(size, 0u);
}

TEST(RendezvousStore, ManyClientsExchangeKeys) {
  RendezvousServer server(secret(), "127.0.0.1");
  constexpr int kClients = 8;
  std::vector<std::string> errors(kClients);
  std::vector<std::thread> threads;
  for (int r = 0; r < kClients; ++r) {
    threads.emplace_back([&, r] {
      RendezvousClient c(address_of(server));
      StoreStatus s = set_text(c, "rank/" + std::to_string(r), std::to_string(r * 10));
      if (!s.ok()) errors[r] = "set: " + s.message;
      // Every client waits on keys others may not have set yet.
      for (int q = 0; q < kClients && errors[r].empty(); ++q) {
        std::string got;
        s = get_text(c, "rank/" + std::to_string(q), 3000, &got);
        if (!s.ok() || got != std::to_string(q * 10))
          errors[r] = "get " + std::to_string(q) + ": '" + got + "' " + s.message;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kClients; ++r) EXPECT_EQ(errors[r], "") << "client " << r;
}

TEST(RendezvousStore, GetWaitsForALaterSet) {
  RendezvousServer server(secret(), "127.0.0.1");
  // One client shared by both threads: the waiting GET must not hold up the SET that ends it.
  RendezvousClient shared(address_of(server));
  auto start = Clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(set_text(shared, "late", "value").ok());
  });
  std::string got;
  StoreStatus s = get_text(shared, "late", 4000, &got);
  double waited = ms_since(start);
  writer.join();
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(got, "value");
  EXPECT_GE(waited, 90.0);
  EXPECT_LT(waited, 2000.0);
}

TEST(RendezvousStore, GetTimesOutWithoutHoldingUpOthers) {
  RendezvousServer server(secret(), "127.0.0.1");
  RendezvousClient waiter(address_of(server)), other(address_of(server));
  std::atomic<bool> waiter_done{false};
  StoreStatus timed_out;
  double waited = 0;
  std::thread t([&] {
    auto start = Clock::now();
    std::string got;
    timed_out = get_text(waiter, "never", 600, &got);
    waited = ms_since(start);
    waiter_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Served while the other GET is parked.
  ASSERT_TRUE(set_text(other, "meanwhile", "x").ok());
  std::string got;
  ASSERT_TRUE(get_text(other, "meanwhile", 0, &got).ok());
  EXPECT_FALSE(waiter_done.load());
  t.join();
  EXPECT_EQ(timed_out.code, DLHOST_CODE_DEADLINE_EXCEEDED) << timed_out.message;
  EXPECT_NE(timed_out.message.find("'never'"), std::string::npos) << timed_out.message;
  EXPECT_GE(waited, 590.0);
  EXPECT_LT(waited, 600.0 + 1000.0);
  // Zero and negative timeouts answer at once.
  auto start = Clock::now();
  EXPECT_EQ(get_text(other, "never", 0, &got).code, DLHOST_CODE_DEADLINE_EXCEEDED);
  EXPECT_EQ(get_text(other, "never", -5, &got).code, DLHOST_CODE_DEADLINE_EXCEEDED);
  EXPECT_LT(ms_since(start), 500.0);
}

TEST(RendezvousStore, DuplicateSetIsAlreadyExists) {
  RendezvousServer server(secret(), "127.0.0.1");
  RendezvousClient a(address_of(server)), b(address_of(server));
  ASSERT_TRUE(set_text(a, "once", "first").ok());
  StoreStatus dup = set_text(b, "once", "second");
  EXPECT_EQ(dup.code, DLHOST_CODE_ALREADY_EXISTS);
  EXPECT_NE(dup.message.find("'once'"), std::string::npos) << dup.message;
  std::string got;
  ASSERT_TRUE(get_text(a, "once", 0, &got).ok());
  EXPECT_EQ(got, "first");
}

TEST(RendezvousStore, SmallBufferIsOutOfRangeWithTheSize) {
  RendezvousServer server(secret(), "127.0.0.1");
  RendezvousClient c(address_of(server));
  ASSERT_TRUE(set_text(c, "id", "0123456789").ok());
  char buf[4] = {};
  size_t size = 0;
  StoreStatus s = c.get("id", 0, buf, sizeof(buf), &size);
  EXPECT_EQ(s.code, DLHOST_CODE_OUT_OF_RANGE);
  EXPECT_EQ(size, 10u);
  // The connection is still in step: the retry with the right size works.
  std::vector<char> big(size);
  ASSERT_TRUE(c.get("id", 0, big.data(), big.size(), &size).ok());
  EXPECT_EQ(std::string(big.data(), size), "0123456789");
}

TEST(RendezvousStore, LargeValueRoundTrip) {
  RendezvousServer server(secret(), "127.0.0.1");
  RendezvousClient a(address_of(server)), b(address_of(server));
  std::vector<unsigned char> value(8 << 20);
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<unsigned char>(i * 131 + 7);
  ASSERT_TRUE(a.set("blob", value.data(), value.size()).ok());
  std::vector<unsigned char> back(value.size());
  size_t size = 0;
  StoreStatus s = b.get("blob", 1000, back.data(), back.size(), &size);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(size, value.size());
  EXPECT_TRUE(back == value);
}

TEST(RendezvousStore, LimitsAreInvalidArgument) {
  RendezvousServer server(secret(), "127.0.0.1");
  RendezvousClient c(address_of(server));
  std::string key_at_limit(dlhost::kMaxStoreKeyBytes, 'k');
  EXPECT_TRUE(set_text(c, key_at_limit, "ok").ok());
  std::string got;
  EXPECT_EQ(get_text(c, key_at_limit + "k", 0, &got).code, DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(set_text(c, key_at_limit + "k", "x").code, DLHOST_CODE_INVALID_ARGUMENT);
  std::vector<unsigned char> huge(dlhost::kMaxStoreValueBytes + 1);
  StoreStatus s = c.set("huge", huge.data(), huge.size());
  EXPECT_EQ(s.code, DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("limit"), std::string::npos) << s.message;

  // A client that ignores the limits: the server refuses the header without reading the body.
  int fd = raw_connect(server.port());
  ASSERT_GE(fd, 0);
  send_bytes(fd, hello(secret()));
  send_bytes(fd, {1, 0, 0, 0x20, 0});  // SET, key of 8 KiB
  RawAnswer a = read_answer(fd);
  EXPECT_EQ(a.code, DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_TRUE(a.closed) << "the server closes the connection after refusing";
  EXPECT_FALSE(a.message.empty()) << "the refusal carries a message";
  close(fd);
  // Others are still served.
  EXPECT_TRUE(get_text(c, key_at_limit, 0, &got).ok());
}

TEST(RendezvousStore, ClientsInAForkedChild) {
  RendezvousServer server(secret(), "127.0.0.1");
  // Used before the fork, so the child inherits its open connection and must not talk on it.
  RendezvousClient inherited(address_of(server));
  ASSERT_TRUE(set_text(inherited, "before_fork", "1").ok());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    std::string got;
    if (!set_text(inherited, "child", "from child").ok()) code = 10;
    RendezvousClient own(address_of(server));
    if (code == 0 && (!get_text(own, "parent", 4000, &got).ok() || got != "from parent")) code = 11;
    if (code == 0 && (!get_text(inherited, "before_fork", 0, &got).ok() || got != "1")) code = 12;
    _exit(code);
  }
  ASSERT_TRUE(set_text(inherited, "parent", "from parent").ok());
  std::string got;
  StoreStatus s = get_text(inherited, "child", 4000, &got);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(got, "from child");
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: set, 11: get of the parent's key, 12: inherited client";
}

TEST(RendezvousStore, ServerShutdownEndsAWaitingGet) {
  auto server = std::make_unique<RendezvousServer>(secret(), "127.0.0.1");
  RendezvousClient c(address_of(*server), 500);
  ASSERT_TRUE(set_text(c, "warm", "connection").ok());
  StoreStatus s;
  double waited = 0;
  std::thread t([&] {
    auto start = Clock::now();
    std::string got;
    s = get_text(c, "never", 20000, &got);
    waited = ms_since(start);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.reset();
  t.join();
  EXPECT_EQ(s.code, DLHOST_CODE_UNAVAILABLE) << s.message;
  EXPECT_LT(waited, 3000.0);
  // Nobody listens any more: the next call gives up after the connect timeout.
  auto start = Clock::now();
  std::string got;
  EXPECT_EQ(get_text(c, "warm", 0, &got).code, DLHOST_CODE_UNAVAILABLE);
  EXPECT_LT(ms_since(start), 3000.0);
}

TEST(RendezvousStore, BadAddressIsInvalidArgument) {
  RendezvousClient c("no-port-here");
  std::string got;
  EXPECT_EQ(get_text(c, "k", 0, &got).code, DLHOST_CODE_INVALID_ARGUMENT);
  RendezvousClient zero("127.0.0.1:0");
  EXPECT_EQ(set_text(zero, "k", "v").code, DLHOST_CODE_INVALID_ARGUMENT);
}

TEST(RendezvousStore, HostApiUsesTheServerWhenDlhostStoreIsSet) {
  RendezvousServer server(secret(), "127.0.0.1");
  RendezvousClient direct(address_of(server));
  ASSERT_TRUE(set_text(direct, "from_direct", "xyz").ok());
  // In a child process: the host API reads DLHOST_STORE once per process, as a rank does.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setenv("DLHOST_STORE", address_of(server).c_str(), 1) != 0) _exit(9);
    const dlhost_host_api* h = dlhost::host_api();
    dlhost::StatusPtr set(h->store_set("via_host_api", "abc", 3));
    if (set != nullptr) _exit(10);
    char buf[2] = {};
    size_t size = 0;
    dlhost::StatusPtr small(h->store_get("from_direct", 1000, buf, sizeof(buf), &size));
    // ABI 1.2: *size untouched on error; store_size says how much room the value needs.
    if (small == nullptr || small->code != DLHOST_CODE_OUT_OF_RANGE || size != 0) _exit(11);
    dlhost::StatusPtr sized(h->store_size("from_direct", 1000, &size));
    if (sized != nullptr || size != 3) _exit(13);
    dlhost::StatusPtr late(h->store_get("never", 50, buf, sizeof(buf), &size));
    if (late == nullptr || late->code != DLHOST_CODE_DEADLINE_EXCEEDED) _exit(12);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "9: setenv, 10: store_set, 11: OUT_OF_RANGE leaving the size, 12: DEADLINE_EXCEEDED, "
         "13: store_size";
  std::string got;
  ASSERT_TRUE(get_text(direct, "via_host_api", 0, &got).ok());
  EXPECT_EQ(got, "abc");
}

// ------------------------------------------------------------------------------------------------
// Who may use the store, and what a client can cost it.

// `ranks` clients, each in its own thread, set "<prefix>/<rank>" and read every other rank's key,
// as a comm's bootstrap does; the first error of each rank ("" when it got every key right).
std::vector<std::string> rendezvous(const std::string& store, int ranks,
                                    const std::string& prefix) {
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      RendezvousClient c(store);
      std::string& error = errors[static_cast<size_t>(r)];
      StoreStatus s =
          set_text(c, prefix + "/" + std::to_string(r), "value of " + std::to_string(r));
      if (!s.ok()) error = "set: " + s.message;
      for (int q = 0; q < ranks && error.empty(); ++q) {
        std::string got;
        s = get_text(c, prefix + "/" + std::to_string(q), 10000, &got);
        if (!s.ok() || got != "value of " + std::to_string(q))
          error = "get " + std::to_string(q) + ": '" + got + "' " + s.message;
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Waits up to 20 s for `ready`; whether it came.
template <class Ready>
bool wait_until(Ready ready) {
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!ready()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(RendezvousStoreSecurity, SecretsAreFresh128BitHex) {
  std::string a = dlhost::make_store_secret(), b = dlhost::make_store_secret();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  for (char ch : a) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(ch))) << a;
  EXPECT_EQ(dlhost::store_variable_value(a, "10.0.0.1", 7), a + "@10.0.0.1:7");
  EXPECT_EQ(dlhost::store_variable_value(a, "::1", 7), a + "@[::1]:7");
  // A short or odd secret is refused: it would be guessable or break DLHOST_STORE's format.
  EXPECT_THROW(RendezvousServer("short", "127.0.0.1"), std::invalid_argument);
  EXPECT_THROW(RendezvousServer(std::string(20, 'a') + "@x", "127.0.0.1"), std::invalid_argument);
}

TEST(RendezvousStoreSecurity, StrangerWithoutTheSecretCanNeitherReadNorWrite) {
  RendezvousServer server(secret(), "127.0.0.1");
  RendezvousClient rank(address_of(server));
  ASSERT_TRUE(set_text(rank, "nccl_id", "the case's own").ok());
  // A client on the same address that knows the port but not the secret.
  RendezvousClient stranger("127.0.0.1:" + std::to_string(server.port()));
  std::string got;
  StoreStatus read = get_text(stranger, "nccl_id", 0, &got);
  EXPECT_EQ(read.code, DLHOST_CODE_PERMISSION_DENIED) << read.message;
  EXPECT_EQ(got, "");
  EXPECT_NE(read.message.find("secret"), std::string::npos) << read.message;
  StoreStatus write = set_text(stranger, "planted", "by a stranger");
  EXPECT_EQ(write.code, DLHOST_CODE_PERMISSION_DENIED) << write.message;
  // A stranger speaking the protocol of old, no hello: answered and closed, no value sent.
  int fd = raw_connect(server.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_bytes(fd, get_request("nccl_id", 1024)));
  RawAnswer a = read_answer(fd);
  close(fd);
  EXPECT_EQ(a.code, DLHOST_CODE_PERMISSION_DENIED) << a.message;
  EXPECT_EQ(a.size, 0u);
  EXPECT_EQ(a.more, 0u) << "no value bytes reach a stranger";
  EXPECT_TRUE(a.closed);
  // Nothing was written; the case's key is intact; each refusal was counted.
  EXPECT_EQ(get_text(rank, "planted", 0, &got).code, DLHOST_CODE_DEADLINE_EXCEEDED);
  ASSERT_TRUE(get_text(rank, "nccl_id", 0, &got).ok());
  EXPECT_EQ(got, "the case's own");
  EXPECT_EQ(server.counters().unauthenticated, 3u);
}

TEST(RendezvousStoreSecurity, WrongSecretIsRefusedAndCounted) {
  RendezvousServer server(secret(), "127.0.0.1");
  RendezvousClient rank(address_of(server));
  ASSERT_TRUE(set_text(rank, "k", "v").ok());
  const std::string at = "@127.0.0.1:" + std::to_string(server.port());
  std::string last_wrong = secret();
  last_wrong.back() = last_wrong.back() == 'a' ? 'b' : 'a';
  const std::vector<std::string> wrong = {
      dlhost::make_store_secret(),              // another case's
      secret().substr(0, secret().size() - 1),  // a prefix of the right one
      secret() + "0",                           // the right one and more
      last_wrong,                               // one character off
  };
  for (const std::string& w : wrong) {
    RendezvousClient guess(w + at);
    std::string got;
    EXPECT_EQ(get_text(guess, "k", 0, &got).code, DLHOST_CODE_PERMISSION_DENIED) << w;
    EXPECT_EQ(set_text(guess, "k2", "x").code, DLHOST_CODE_PERMISSION_DENIED) << w;
  }
  // An empty secret and one over the limit, by hand.
  for (const Bytes& h : {hello(""), hello(std::string(300, 'a'))}) {
    int fd = raw_connect(server.port());
    ASSERT_GE(fd, 0);
    send_bytes(fd, h);
    send_bytes(fd, get_request("k", 16));
    RawAnswer a = read_answer(fd);
    close(fd);
    EXPECT_EQ(a.code, DLHOST_CODE_PERMISSION_DENIED) << a.message;
    EXPECT_EQ(a.more, 0u);
  }
  EXPECT_EQ(server.counters().unauthenticated, 2 * wrong.size() + 2);
  std::string got;
  EXPECT_EQ(get_text(rank, "k2", 0, &got).code, DLHOST_CODE_DEADLINE_EXCEEDED);
}

TEST(RendezvousStoreSecurity, SilentConnectionIsClosedAfterTheHelloTimeout) {
  StoreLimits limits;
  limits.hello_timeout_ms = 200;
  RendezvousServer server(secret(), "127.0.0.1", 0, limits);
  int fd = raw_connect(server.port());
  ASSERT_GE(fd, 0);
  auto start = Clock::now();
  RawAnswer a = read_answer(fd);  // says nothing, waits to be thrown out
  close(fd);
  // Closed and counted; told to connect again, since nothing wrong was presented (a rank that was
  // descheduled before its hello does, and is served).
  EXPECT_EQ(a.code, DLHOST_CODE_UNAVAILABLE) << a.message;
  EXPECT_NE(a.message.find("connect again"), std::string::npos) << a.message;
  EXPECT_TRUE(a.closed);
  EXPECT_GE(ms_since(start), 150.0);
  EXPECT_LT(ms_since(start), 3000.0);
  EXPECT_EQ(server.counters().unauthenticated, 1u);
}

TEST(RendezvousStoreSecurity, HelloAfterTheDeadlineIsNotServedAndTheRankConnectsAgain) {
  // A rank whose hello comes after the deadline (descheduled between its connect and its first
  // send on a loaded machine): its request is not served, it is told to connect again, and a
  // fresh connection with the hello in time is served.
  StoreLimits limits;
  limits.hello_timeout_ms = 200;
  RendezvousServer server(secret(), "127.0.0.1", 0, limits);
  int fd = raw_connect(server.port());
  ASSERT_GE(fd, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  Bytes late = hello(secret());
  Bytes set = set_head("late", 1);
  late.insert(late.end(), set.begin(), set.end());
  late.push_back('x');
  send_bytes(fd, late);  // may fail once the server has closed: the answer is what counts
  RawAnswer a = read_answer(fd);
  close(fd);
  EXPECT_EQ(a.code, DLHOST_CODE_UNAVAILABLE) << a.message;
  EXPECT_NE(a.message.find("within 200 ms"), std::string::npos) << a.message;
  EXPECT_EQ(server.counters().unauthenticated, 1u);
  RendezvousClient rank(address_of(server));
  std::string got;
  EXPECT_EQ(get_text(rank, "late", 0, &got).code, DLHOST_CODE_DEADLINE_EXCEEDED)
      << "the late request was not served";
  ASSERT_TRUE(set_text(rank, "late", "y").ok());
  ASSERT_TRUE(get_text(rank, "late", 0, &got).ok());
  EXPECT_EQ(got, "y");
}

// A stand-in store on loopback that answers each connection's first request with the frame
// `answers[i]` (code, message) after `delay_ms[i]`, having read `request_bytes` from it first.
struct ScriptedStore {
  int listen_fd = -1;
  uint16_t port = 0;
  std::thread thread;
  std::atomic<int> served{0};
  ScriptedStore(std::vector<std::pair<int, std::string>> answers, std::vector<int> delay_ms,
                size_t request_bytes) {
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listen_fd, 8);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    thread = std::thread([this, answers, delay_ms, request_bytes] {
      for (size_t i = 0; i < answers.size(); ++i) {
        int fd = accept(listen_fd, nullptr, nullptr);
        if (fd < 0) return;
        timeval tv{5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        std::vector<char> request(request_bytes);
        recv(fd, request.data(), request.size(), MSG_WAITALL);
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms[i]));
        Bytes frame{static_cast<unsigned char>(answers[i].first)};
        put_be(frame, 0, 8);
        put_be(frame, answers[i].second.size(), 4);
        frame.insert(frame.end(), answers[i].second.begin(), answers[i].second.end());
        ++served;  // before the answer: the client may check the count as soon as it has it
        send_bytes(fd, frame);
        close(fd);
      }
    });
  }
  ~ScriptedStore() {
    shutdown(listen_fd, SHUT_RDWR);
    thread.join();
    close(listen_fd);
  }
};

TEST(RendezvousStoreSecurity, ClientConnectsAgainWhenToldToEvenPastItsConnectTimeout) {
  // The first connection is told UNAVAILABLE only after the client's whole connect timeout (the
  // store judged the hello late): the client still connects again and is served, instead of
  // failing the rank.
  const std::string key = "k", value = "v";
  const size_t request = 4 + 1 + 2 + secret().size() + 1 + 4 + key.size() + 8 + value.size();
  ScriptedStore store({{DLHOST_CODE_UNAVAILABLE, "connect again"}, {DLHOST_CODE_OK, ""}}, {300, 0},
                      request);
  RendezvousClient rank(secret() + "@127.0.0.1:" + std::to_string(store.port),
                        /*connect_timeout_ms=*/100);
  StoreStatus s = set_text(rank, key, value);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(store.served.load(), 2);
}

TEST(RendezvousStoreSecurity, ClientGivesUpClearlyWhenNeverServed) {
  // Told to connect again every time: a bounded number of attempts, then UNAVAILABLE naming the
  // store and the key, never a wait without end.
  const size_t request = 4 + 1 + 2 + secret().size() + 1 + 4 + 1 + 8 + 1;
  ScriptedStore store({{DLHOST_CODE_UNAVAILABLE, "connect again"},
                       {DLHOST_CODE_UNAVAILABLE, "connect again"},
                       {DLHOST_CODE_UNAVAILABLE, "connect again"}},
                      {150, 150, 150}, request);
  RendezvousClient rank(secret() + "@127.0.0.1:" + std::to_string(store.port), 100);
  auto start = Clock::now();
  StoreStatus s = set_text(rank, "k", "v");
  EXPECT_EQ(s.code, DLHOST_CODE_UNAVAILABLE) << s.message;
  EXPECT_NE(s.message.find("store_set: key 'k'"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("127.0.0.1:" + std::to_string(store.port)), std::string::npos)
      << s.message;
  EXPECT_EQ(store.served.load(), 3);
  EXPECT_LT(ms_since(start), 3000.0);
}

TEST(RendezvousStoreSecurity, ConnectionFloodDoesNotKeepTheRanksOut) {
  StoreLimits limits;
  limits.max_pending = 8;
  RendezvousServer server(secret(), "127.0.0.1", 0, limits);
  std::atomic<bool> stop{false};
  std::atomic<int> opened{0};
  // Strangers: some hold connections open and say nothing, some send garbage, all the time.
  std::vector<std::thread> flood;
  for (int t = 0; t < 3; ++t) {
    flood.emplace_back([&, t] {
      std::vector<int> held;
      while (!stop) {
        int fd = raw_connect(server.port());
        if (fd < 0) continue;
        ++opened;
        if (t == 2) {
          send_bytes(fd, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
          close(fd);
          continue;
        }
        held.push_back(fd);
        if (held.size() > 64) {  // stay well inside this process's descriptors
          close(held.front());
          held.erase(held.begin());
        }
      }
      for (int fd : held) close(fd);
    });
  }
  // The flood is on: silent strangers are being pushed out by newer ones, garbage refused.
  bool flooding = wait_until([&] {
    dlhost::StoreCounters n = server.counters();
    return n.dropped_pending >= 20 && n.unauthenticated >= 20;
  });
  // The ranks meet while the flood goes on, twice, each time on new connections.
  std::vector<std::string> errors = rendezvous(address_of(server), 4, "during_flood");
  std::vector<std::string> again = rendezvous(address_of(server), 4, "still_flooded");
  stop = true;
  for (auto& t : flood) t.join();
  EXPECT_TRUE(flooding) << "the flood did not get going";
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(again[r], "") << "rank " << r;
  }
  dlhost::StoreCounters n = server.counters();
  std::printf("flood: %d stranger connections, %llu dropped pending, %llu refused\n", opened.load(),
              static_cast<unsigned long long>(n.dropped_pending),
              static_cast<unsigned long long>(n.unauthenticated));
}

TEST(RendezvousStoreSecurity, ConnectionsOverTheCapAreRefused) {
  StoreLimits limits;
  limits.max_connections = 2;
  RendezvousServer server(secret(), "127.0.0.1", 0, limits);
  // Each client keeps its connection open between calls.
  auto a = std::make_unique<RendezvousClient>(address_of(server));
  RendezvousClient b(address_of(server)), c(address_of(server));
  ASSERT_TRUE(set_text(*a, "a", "1").ok());
  ASSERT_TRUE(set_text(b, "b", "1").ok());
  StoreStatus over = set_text(c, "c", "1");
  EXPECT_EQ(over.code, DLHOST_CODE_RESOURCE_EXHAUSTED) << over.message;
  EXPECT_NE(over.message.find("connections"), std::string::npos) << over.message;
  EXPECT_EQ(server.counters().over_cap, 1u);
  // Once one leaves, the next is served (the server notices the close on its next round).
  a.reset();
  StoreStatus later;
  for (int i = 0; i < 100; ++i) {
    later = set_text(c, "c", "1");
    if (later.code != DLHOST_CODE_RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(later.ok()) << later.message;
}

TEST(RendezvousStoreSecurity, FloodOfOversizedValuesDoesNotTakeTheCaseDown) {
  StoreLimits limits;
  limits.max_value_bytes = 1 << 20;
  limits.max_stored_bytes = 4 << 20;
  RendezvousServer server(secret(), "127.0.0.1", 0, limits);
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0}, wrong{0};
  std::vector<std::thread> flood;
  // A buggy rank: values over the store's limit, again and again on one connection (each is
  // read and dropped, the connection stays usable).
  flood.emplace_back([&] {
    RendezvousClient buggy(address_of(server));
    std::vector<unsigned char> big((1 << 20) + 1, 7);
    for (int i = 0; !stop && i < 100; ++i) {
      StoreStatus s = buggy.set("big/" + std::to_string(i), big.data(), big.size());
      (s.code == DLHOST_CODE_RESOURCE_EXHAUSTED ? refused : wrong)++;
    }
  });
  // Strangers claiming values of a terabyte, with and without the secret's format.
  flood.emplace_back([&] {
    for (int i = 0; !stop && i < 1000; ++i) {
      int fd = raw_connect(server.port());
      if (fd < 0) continue;
      if (i % 2 == 0) send_bytes(fd, hello(secret()));
      send_bytes(fd, set_head("huge", uint64_t{1} << 40));
      RawAnswer a = read_answer(fd);
      close(fd);
      bool expected =
          a.code == (i % 2 == 0 ? DLHOST_CODE_INVALID_ARGUMENT : DLHOST_CODE_PERMISSION_DENIED);
      if (!expected) ++wrong;
    }
  });
  // The ranks meet once both floods are under way.
  bool flooding =
      wait_until([&] { return refused >= 3 && server.counters().unauthenticated >= 3; });
  std::vector<std::string> errors = rendezvous(address_of(server), 4, "ranks");
  stop = true;
  EXPECT_TRUE(flooding) << "the flood did not get going";
  for (auto& t : flood) t.join();
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(wrong.load(), 0) << "every oversized value was refused as such";
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(server.counters().over_budget, static_cast<uint64_t>(refused.load()));
  // The store still serves.
  RendezvousClient after(address_of(server));
  ASSERT_TRUE(set_text(after, "after", "x").ok());
}

TEST(RendezvousStoreSecurity, ByteBudgetIsResourceExhaustedAndTheConnectionGoesOn) {
  StoreLimits limits;
  limits.max_stored_bytes = 1 << 20;
  RendezvousServer server(secret(), "127.0.0.1", 0, limits);
  RendezvousClient c(address_of(server));
  std::vector<unsigned char> quarter(256 << 10, 3);
  int kept = 0;
  StoreStatus s;
  for (; kept < 10; ++kept) {
    s = c.set("q/" + std::to_string(kept), quarter.data(), quarter.size());
    if (!s.ok()) break;
  }
  EXPECT_EQ(kept, 3) << "3 values of 256 KiB and their keys fit in 1 MiB, a 4th does not";
  EXPECT_EQ(s.code, DLHOST_CODE_RESOURCE_EXHAUSTED) << s.message;
  EXPECT_NE(s.message.find("1048576"), std::string::npos) << s.message;
  // The refused value was read and dropped: the same client goes on, small keys still fit.
  std::vector<unsigned char> back(quarter.size());
  size_t size = 0;
  ASSERT_TRUE(c.get("q/0", 0, back.data(), back.size(), &size).ok());
  EXPECT_TRUE(back == quarter);
  EXPECT_TRUE(set_text(c, "small", "fits").ok());
  EXPECT_EQ(server.counters().over_budget, 1u);
}

TEST(RendezvousStoreSecurity, ListensOnlyOnTheAddressItIsGiven) {
  RendezvousServer server(secret(), "127.0.0.1");
  // Another loopback address of this host: a server on 0.0.0.0 would answer there too.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(0x7f000002);  // 127.0.0.2
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  close(fd);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(err, ECONNREFUSED);
}

}  // namespace
