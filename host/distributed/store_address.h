// store_address.h — on which address a case's rendezvous store listens, so that it is reachable
// by the case's ranks and by nothing more: loopback when every rank runs on this host, else the
// local address of the interface that routes to the ranks' hosts (never 0.0.0.0).
//
// The hosts come from the launcher's arguments (an Open MPI hostfile or host list); the local
// address from the kernel's own route choice. DLHOST_STORE_HOST=ADDRESS overrides both (a
// machine whose route choice is not what the ranks see, a Slurm job whose nodes dlhost cannot
// list). The network-namespace harness relies on local_source_address(): given the test hosts'
// addresses, it names the parent's address on their bridge.
//
// Thread-safety: every function may be called from any thread (getaddrinfo, sockets, files).
#pragma once

#include <string>
#include <vector>

namespace dlhost {

// The hosts that Open MPI launcher arguments name: the first word of each line of a hostfile
// (--hostfile, -hostfile, --machinefile, -machinefile, --default-hostfile; '#' starts a comment;
// "slots=" and the like ignored) and the comma-separated entries of a host list (-H, --host,
// -host; a ":SLOTS" suffix dropped); "--option=value" is read like "--option value". Duplicates
// are listed once, in order. Throws std::invalid_argument naming the file when a hostfile
// cannot be read.
std::vector<std::string> hosts_in_launcher_args(const std::vector<std::string>& args);

// The numeric local address this host sends from to reach `hosts` (names or addresses): for
// each, the kernel's choice of source address for a route to it, read from a connected UDP
// socket's getsockname (connect() on UDP sends nothing). Hosts reached over loopback (this host)
// are left out unless all are, then the answer is the loopback address ("127.0.0.1" or "::1").
// An empty list is "127.0.0.1". Throws std::runtime_error naming the host when one does not
// resolve or has no route, and naming both when two hosts are reached from different local
// addresses (no one address serves every rank: set DLHOST_STORE_HOST).
std::string local_source_address(const std::vector<std::string>& hosts);

// Where a case's store listens and what its ranks are told (DLHOST_STORE's HOST).
struct StoreEndpoint {
  std::string address;  // numeric, bound and advertised
  std::string why;      // how it was chosen, for the log
};

// `override_address`: DLHOST_STORE_HOST's value (NULL or "" when unset), used as it is.
// `other_hosts`: the case may place ranks on other hosts (launcher arguments, Slurm). With
// hosts named in `launcher_args`, local_source_address() of them; with none named but other
// hosts possible (srun, an allocation), the address of this host's name if it is not loopback,
// else the source address of the default route; else loopback. Throws std::runtime_error with
// the reason and DLHOST_STORE_HOST as the way out when no address can be chosen.
StoreEndpoint choose_store_endpoint(const char* override_address, bool other_hosts,
                                    const std::vector<std::string>& launcher_args);

}  // namespace dlhost
