// test_hosts.h — several hosts on one machine for a multi-rank job (a case of `dlhost run`, or
// `dlhost comm-bench --interconnect`): each test host is a Linux
// network namespace with its own address, joined to a bridge in the root namespace (which holds
// the parent's address, where the rendezvous store is reached) by a veth pair, the pair shaped by
// tc to an emulated interconnect (the suite key `interconnect`). mpirun reaches a host through a
// generated agent script that maps its address to `ip netns exec NS` (Open MPI's plm_rsh_agent).
// Made and removed with iproute2's `ip` and `tc`; root only.
//
// Everything a TestHosts makes is named with the prefix "dlhn<pid>" of the dlhost that made it, so
// what a killed dlhost left behind is recognised and removed by the next one
// (remove_stale_test_hosts). Not thread-safe: one TestHosts per process at a time (cases run one
// after the other).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dlhost {

// An emulated link between a test host and the bridge. Profiles: 10gbe and 1gbe shape bandwidth
// only (a veth's own latency, tens of microseconds, stands for the switch's); custom takes
// link_gbit and/or link_latency_us from the case.
struct Interconnect {
  std::string profile = "loopback";  // loopback: every rank on this host, no test hosts
  double gbit = 0;                   // bandwidth of each link, Gbit/s; 0: unshaped
  double latency_us = 0;             // one-way latency added host to host; 0: none
};

// The link of a profile: 10gbe and 1gbe their bandwidth, custom the given bandwidth and latency
// (0: none), loopback (or another name) unshaped. What a case's keys say is read in
// isolate/case_job.h (case_interconnect).
Interconnect link_profile(const std::string& profile, double link_gbit = 0,
                          double link_latency_us = 0);

// The test hosts `ranks` ranks run on, `ranks_per_host` to a host (the last may hold fewer).
int test_host_count(int64_t ranks, int64_t ranks_per_host);

// "" when test hosts with this interconnect can be made here, else why not: not root, no ip/tc,
// namespaces refused (a container without CAP_SYS_ADMIN), or a latency without the netem qdisc.
// Probes once per process in a scratch namespace; the answer is cached per need (netem or not).
std::string test_hosts_unavailable(const Interconnect& link);

// Removes namespaces and links whose name carries the prefix of a dlhost that is no longer
// running (one killed before it could clean up).
void remove_stale_test_hosts();

class TestHosts {
 public:
  // Makes `hosts` namespaces with `slots` ranks each on a free 10.213.K.0/24 subnet and shapes
  // their links. Throws std::runtime_error naming the command that failed, after removing what
  // it made.
  TestHosts(int hosts, int slots, const Interconnect& link);
  ~TestHosts();  // ends every process left in a namespace, removes namespaces, links, files
  TestHosts(const TestHosts&) = delete;
  TestHosts& operator=(const TestHosts&) = delete;

  // The parent's address on the bridge: where ranks reach the rendezvous store.
  const std::string& parent_address() const { return parent_address_; }
  // mpirun arguments: the hostfile, the agent, TCP restricted to the test subnet.
  std::vector<std::string> launcher_args() const;
  // For the record: profile, bandwidth, latency, hosts and how the links were shaped.
  nlohmann::ordered_json describe() const;
  // "" when every link is up, else which test hosts (name, address, ranks) have lost theirs.
  std::string link_faults() const;
  // "test host dlhn12h1 at 10.213.5.3", the host of `rank` (ranks fill the hosts in order, as
  // mpirun maps them); with `processes`, also what runs in its namespace ("; running there:
  // orted, dlhost" or "; nothing running there"), which tells a launcher that never started the
  // rank there from a rank that started.
  std::string rank_host(int rank, bool processes) const;

  // The test hosts made, and one of them (0 .. hosts() - 1): its address, "test host NS at
  // ADDRESS", and what a command is run under to run there (`ip netns exec NS`): for an extra
  // role of a tool runtime placed on a host of its own (isolate/runtime_roles.h).
  int hosts() const { return static_cast<int>(hosts_.size()); }
  const std::string& host_address(int host) const { return hosts_.at(host).address; }
  std::string host_text(int host) const;
  std::vector<std::string> run_on_host(int host) const;

 private:
  void make(const Interconnect& link);
  void shape(const std::string& ns, const std::string& dev, const Interconnect& link);
  void remove() noexcept;

  std::string prefix_;  // dlhn<pid>
  int slots_ = 1;
  std::string subnet_;  // 10.213.K
  std::string parent_address_, bridge_, folder_, shaping_;
  Interconnect link_;
  struct Host {
    std::string ns, veth, address;
  };
  std::vector<Host> hosts_;
  bool bridge_made_ = false;
};

}  // namespace dlhost
