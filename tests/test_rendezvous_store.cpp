// test_rendezvous_store.cpp — the TCP rendezvous store that the ranks of a multi-rank case share:
// its ABI semantics (wait, timeout, duplicate, small buffer, limits), many clients at once,
// clients in another process, the server going away under a waiting client, and the host API
// switching to it when DLHOST_STORE is set. Every wait is bounded so a bug fails, never hangs.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
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

std::string address_of(const RendezvousServer& server) {
  return "127.0.0.1:" + std::to_string(server.port());
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

TEST(RendezvousStore, SetThenGetFromAnotherClient) {
  RendezvousServer server;  // the default, 0.0.0.0, is reachable on loopback too
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
  RendezvousServer server("127.0.0.1");
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
  RendezvousServer server("127.0.0.1");
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
  RendezvousServer server("127.0.0.1");
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
  RendezvousServer server("127.0.0.1");
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
  RendezvousServer server("127.0.0.1");
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
  RendezvousServer server("127.0.0.1");
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
  RendezvousServer server("127.0.0.1");
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
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const unsigned char request[] = {1, 0, 0, 0x20, 0};  // SET, key of 8 KiB
  ASSERT_EQ(send(fd, request, sizeof(request), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(request)));
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  unsigned char reply[13] = {};
  ASSERT_EQ(recv(fd, reply, sizeof(reply), MSG_WAITALL), static_cast<ssize_t>(sizeof(reply)));
  EXPECT_EQ(reply[0], DLHOST_CODE_INVALID_ARGUMENT);
  std::vector<char> rest(4096);
  ssize_t n = 0, total = 0;
  while ((n = recv(fd, rest.data(), rest.size(), 0)) > 0) total += n;
  EXPECT_EQ(n, 0) << "the server closes the connection after refusing";
  EXPECT_GT(total, 0) << "the refusal carries a message";
  close(fd);
  // Others are still served.
  EXPECT_TRUE(get_text(c, key_at_limit, 0, &got).ok());
}

TEST(RendezvousStore, ClientsInAForkedChild) {
  RendezvousServer server("127.0.0.1");
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
  auto server = std::make_unique<RendezvousServer>("127.0.0.1");
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
  RendezvousServer server("127.0.0.1");
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

}  // namespace
