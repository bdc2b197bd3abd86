// link_profiles.h — the named interconnects, one table for everything that speaks of a link: the
// suite key `interconnect` (its choices), the emulated test hosts (launch/test_hosts: bandwidth),
// and the S-SGD projection (project/projection: bandwidth and latency). In core's folder, header
// only, below all three.
#pragma once

#include <string>
#include <vector>

namespace dlhost {

// A named interconnect's link (the suite key `interconnect`, comm-bench's and project's
// --interconnect): its bandwidth and its one-way latency host to host, as a real link of that
// kind has them. The projection adds the latency to a loopback fit (project/projection.cpp); the
// test hosts shape the bandwidth only and leave the latency to the veth and bridge they run over,
// so they need no netem qdisc (docs/distributed.md, "Test hosts"). loopback and custom have no
// figures here (custom takes them from the case or the command line).
struct LinkProfile {
  std::string name;
  double gbit = 0;        // bandwidth, Gbit/s; 0: unshaped
  double latency_us = 0;  // nominal one-way latency, us
};
// loopback, 10gbe, 1gbe, custom: the order of the `interconnect` key's choices. Header-only, so
// that suite (which links no core) reads the same table.
// 10gbe 10 us and 1gbe 50 us: the small-message one-way latency of TCP between two hosts through
// a switch on such a link, NIC interrupt moderation included, beyond what loopback's TCP costs.
inline const std::vector<LinkProfile>& link_profiles() {
  static const std::vector<LinkProfile> profiles = {
      {"loopback", 0, 0}, {"10gbe", 10, 10}, {"1gbe", 1, 50}, {"custom", 0, 0}};
  return profiles;
}

inline const LinkProfile* find_link_profile(const std::string& name) {
  for (const LinkProfile& l : link_profiles())
    if (l.name == name) return &l;
  return nullptr;
}

}  // namespace dlhost
