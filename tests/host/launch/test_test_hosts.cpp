// test_test_hosts.cpp — tests of host/launch/test_hosts: the link of each interconnect profile,
// how many hosts a job gets, and (as root, where namespaces can be made) that TestHosts makes
// reachable namespaces with shaped links, names a host whose link is cut, and leaves nothing
// behind.
#include "launch/test_hosts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace dlhost {
namespace {

using json = nlohmann::ordered_json;

std::string output_of(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

TEST(test_hosts, InterconnectProfiles) {
  EXPECT_EQ(link_profile("loopback").gbit, 0);
  EXPECT_EQ(link_profile("10gbe").gbit, 10);
  const Interconnect gbe = link_profile("1gbe", 5, 7);  // a named profile ignores custom figures
  EXPECT_EQ(gbe.profile, "1gbe");
  EXPECT_EQ(gbe.gbit, 1);
  EXPECT_EQ(gbe.latency_us, 0);
  const Interconnect custom = link_profile("custom", 0.25, 40);
  EXPECT_EQ(custom.gbit, 0.25);
  EXPECT_EQ(custom.latency_us, 40);
}

TEST(test_hosts, OneHostPerRanksPerNode) {
  EXPECT_EQ(test_host_count(4, 1), 4);
  EXPECT_EQ(test_host_count(4, 2), 2);
  EXPECT_EQ(test_host_count(5, 2), 3);
}

TEST(test_hosts, MadeShapedCutAndRemoved) {
  const Interconnect link = link_profile("1gbe");
  if (std::string why = test_hosts_unavailable(link); !why.empty()) GTEST_SKIP() << why;
  const std::string prefix = "dlhn" + std::to_string(getpid());
  {
    TestHosts hosts(2, 1, link);
    const json d = hosts.describe();
    ASSERT_EQ(d["hosts"].size(), 2u);
    const std::string h1 = d["hosts"][1]["address"];
    EXPECT_EQ(d["hosts"][1]["name"], prefix + "h1");
    EXPECT_EQ(hosts.parent_address().substr(0, 7), "10.213.");
    // Each direction of each link has its token bucket at 1 Gbit/s.
    EXPECT_NE(output_of("tc qdisc show dev " + prefix + "v0").find("rate 1Gbit"),
              std::string::npos);
    EXPECT_NE(output_of("ip netns exec " + prefix + "h1 tc qdisc show dev eth0").find("rate 1Gbit"),
              std::string::npos);
    // Host 0 reaches host 1 and the parent through the bridge (bash's /dev/tcp: a refused
    // connection is an answer; no route or a down link is not).
    const std::string reach =
        "ip netns exec " + prefix +
        "h0 timeout 5 bash -c 'echo > /dev/tcp/%s/9' 2>&1 | grep -c 'connect: Connection refused'";
    char cmd[512];
    std::snprintf(cmd, sizeof(cmd), reach.c_str(), h1.c_str());
    EXPECT_EQ(output_of(cmd), "1\n");
    std::snprintf(cmd, sizeof(cmd), reach.c_str(), hosts.parent_address().c_str());
    EXPECT_EQ(output_of(cmd), "1\n");
    // Where a rank runs, and what runs there: how a stalled start-up names a rank's host.
    const std::string h0 = d["hosts"][0]["address"];
    EXPECT_EQ(hosts.rank_host(1, false), "test host " + prefix + "h1 at " + h1);
    EXPECT_EQ(hosts.rank_host(0, true),
              "test host " + prefix + "h0 at " + h0 + "; nothing running there");
    ASSERT_EQ(std::system(("ip netns exec " + prefix + "h1 sleep 60 &").c_str()), 0);
    std::string seen;
    for (int i = 0; i < 50 && seen.find("sleep") == std::string::npos; ++i) {
      seen = hosts.rank_host(1, true);
      usleep(100 * 1000);
    }
    EXPECT_EQ(seen, "test host " + prefix + "h1 at " + h1 + "; running there: sleep");
    EXPECT_EQ(hosts.link_faults(), "");
    ASSERT_EQ(std::system(("ip link set " + prefix + "v1 down").c_str()), 0);
    EXPECT_EQ(hosts.link_faults(), "test host " + prefix + "h1 at " + h1 +
                                       " (rank 1) lost its link (" + prefix + "v1 is down)");
  }
  EXPECT_EQ(output_of("ip netns list | grep -c '^" + prefix + "'"), "0\n");
  EXPECT_EQ(output_of("ip -o link show | grep -c ': " + prefix + "'"), "0\n");
}

}  // namespace
}  // namespace dlhost
