// test_store_address.cpp — where a case's rendezvous store listens (distributed/store_address.h):
// the rank hosts read from Open MPI launcher arguments (hostfile, host lists), the local source
// address the kernel routes from toward them, and the choice between loopback, that address, and
// DLHOST_STORE_HOST. Uses this host's own interface addresses; a check that needs an address the
// host lacks is skipped with the reason.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/store_address.h"

namespace {

using dlhost::choose_store_endpoint;
using dlhost::hosts_in_launcher_args;
using dlhost::local_source_address;

// This host's IPv4 addresses on interfaces that are up, loopback left out.
std::vector<std::string> own_ipv4_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
    out.push_back(text);
  }
  freeifaddrs(list);
  return out;
}

std::string write_file(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() /
              ("dlhost-test-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(StoreAddress, HostsFromHostfileAndHostLists) {
  std::string hostfile = write_file("hostfile",
                                    "# test hosts\n"
                                    "node1 slots=2\n"
                                    "\n"
                                    "  node2 slots=1 max_slots=4   # the second\n"
                                    "node1\n");
  std::vector<std::string> args = {"--mca",       "btl",      "self,tcp",
                                   "--hostfile",  hostfile,   "-H",
                                   "a,b:2,node1", "--host=c", "--machinefile=" + hostfile};
  std::vector<std::string> want = {"node1", "node2", "a", "b", "c"};
  EXPECT_EQ(hosts_in_launcher_args(args), want);
  std::filesystem::remove(hostfile);
  // MCA settings alone name no host.
  EXPECT_TRUE(hosts_in_launcher_args({"--mca", "btl", "self,vader"}).empty());
  // An IPv6 literal in a host list keeps its colons.
  EXPECT_EQ(hosts_in_launcher_args({"--host", "fd00::3,10.0.0.2:4"}),
            (std::vector<std::string>{"fd00::3", "10.0.0.2"}));
  try {
    hosts_in_launcher_args({"--hostfile", "/nonexistent/hosts"});
    ADD_FAILURE() << "an unreadable hostfile is an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/hosts"), std::string::npos) << e.what();
  }
}

TEST(StoreAddress, LoopbackWhenEveryRankIsHere) {
  EXPECT_EQ(local_source_address({}), "127.0.0.1");
  EXPECT_EQ(local_source_address({"127.0.0.1"}), "127.0.0.1");
  EXPECT_EQ(choose_store_endpoint(nullptr, false, {}).address, "127.0.0.1");
  EXPECT_EQ(choose_store_endpoint("", false, {"--mca", "btl", "self,vader"}).address, "127.0.0.1");
}

TEST(StoreAddress, TheInterfaceThatRoutesToTheRankHosts) {
  std::vector<std::string> own = own_ipv4_addresses();
  if (own.empty()) GTEST_SKIP() << "this host has no IPv4 address but loopback";
  // A rank host that is this host's own address is reached from that address; loopback ranks
  // beside it do not change the choice (they reach that address too).
  EXPECT_EQ(local_source_address({own[0]}), own[0]);
  EXPECT_EQ(local_source_address({"127.0.0.1", own[0], "localhost"}), own[0]);
  std::string hostfile = write_file("hostfile-own", own[0] + " slots=2\n127.0.0.1\n");
  auto at = choose_store_endpoint(nullptr, true, {"--hostfile", hostfile});
  std::filesystem::remove(hostfile);
  EXPECT_EQ(at.address, own[0]) << at.why;
  // The override wins over everything.
  EXPECT_EQ(choose_store_endpoint("10.9.8.7", true, {"-H", own[0]}).address, "10.9.8.7");
}

TEST(StoreAddress, HostsReachedFromDifferentAddressesAreAnError) {
  std::vector<std::string> own = own_ipv4_addresses();
  if (own.size() < 2) GTEST_SKIP() << "needs two IPv4 interfaces; this host has " << own.size();
  try {
    local_source_address({own[0], own[1]});
    ADD_FAILURE() << "two local addresses cannot both be the store's";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(own[0]), std::string::npos) << what;
    EXPECT_NE(what.find(own[1]), std::string::npos) << what;
    EXPECT_NE(what.find("DLHOST_STORE_HOST"), std::string::npos) << what;
  }
}

TEST(StoreAddress, UnresolvableHostIsNamed) {
  try {
    local_source_address({"no-such-host.invalid"});
    ADD_FAILURE() << "an unresolvable host is an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-host.invalid"), std::string::npos) << e.what();
  }
}

TEST(StoreAddress, OtherHostsNotListedStillGetAnAddressOfThisHost) {
  // srun or an allocation: the ranks' hosts are not in the arguments. The choice is a local
  // address that is not loopback (the name's, or the default route's), or a clear error.
  try {
    auto at = choose_store_endpoint(nullptr, true, {});
    EXPECT_NE(at.address.rfind("127.", 0), 0u) << at.address;
    EXPECT_NE(at.address, "0.0.0.0");
    std::printf("store address without a host list: %s (%s)\n", at.address.c_str(), at.why.c_str());
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("DLHOST_STORE_HOST"), std::string::npos) << e.what();
  }
}

}  // namespace
