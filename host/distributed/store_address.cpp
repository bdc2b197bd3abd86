// store_address.cpp — see store_address.h.
#include "distributed/store_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace dlhost {
namespace {

// A documentation address (RFC 5737 TEST-NET-2): never a real host, but routed like one, so a
// route to it is the default route.
constexpr const char* kDefaultRouteProbe = "198.51.100.1";

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

void add_unique(std::vector<std::string>& hosts, const std::string& host) {
  if (!host.empty() && std::find(hosts.begin(), hosts.end(), host) == hosts.end())
    hosts.push_back(host);
}

void read_hostfile(const std::string& path, std::vector<std::string>& hosts) {
  std::ifstream in(path);
  if (!in)
    throw std::invalid_argument("cannot read the hostfile '" + path +
                                "' named in the launcher arguments: " + std::strerror(errno));
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line.substr(0, line.find('#')));
    std::istringstream words(line);
    std::string host;
    if (words >> host) add_unique(hosts, host);
  }
}

void read_host_list(const std::string& list, std::vector<std::string>& hosts) {
  std::istringstream entries(list);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    entry = trim(entry);
    // "host:slots", but a bare IPv6 literal is all colons: only a numeric last field is slots.
    size_t colon = entry.rfind(':');
    if (colon != std::string::npos && colon + 1 < entry.size() && entry.find(':') == colon &&
        std::all_of(entry.begin() + static_cast<std::ptrdiff_t>(colon) + 1, entry.end(),
                    [](unsigned char ch) { return std::isdigit(ch); }))
      entry.resize(colon);
    add_unique(hosts, entry);
  }
}

bool is_loopback(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&a)->sin_addr.s_addr) >> 24) == 127;
  if (a.ss_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

std::string numeric(const sockaddr_storage& a, socklen_t len) {
  char host[NI_MAXHOST] = {};
  int rc = getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof(host), nullptr, 0,
                       NI_NUMERICHOST);
  if (rc != 0) throw std::runtime_error(std::string("getnameinfo: ") + gai_strerror(rc));
  return host;  // a link-local IPv6 address keeps its "%interface": bind needs it
}

// The kernel's source address toward `host`, or a reason in *why.
bool source_toward(const std::string& host, sockaddr_storage* out, socklen_t* out_len,
                   std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  // Any port: a UDP connect only picks a route and a source address.
  int rc = getaddrinfo(host.c_str(), "9", &hints, &found);
  if (rc != 0) {
    *why = std::string("does not resolve: ") + gai_strerror(rc);
    return false;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      *why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    bool ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    if (!ok) *why = std::string("no route: ") + std::strerror(errno);
    *out_len = sizeof(*out);
    if (ok && getsockname(fd, reinterpret_cast<sockaddr*>(out), out_len) != 0) {
      *why = std::string("getsockname: ") + std::strerror(errno);
      ok = false;
    }
    close(fd);
    if (ok) return true;
  }
  return false;
}

// This host's name resolved to a local, non-loopback address, or "".
std::string hostname_address() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &found) != 0) return "";
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    sockaddr_storage a{};
    std::memcpy(&a, ai->ai_addr, ai->ai_addrlen);
    if (is_loopback(a)) continue;
    // Local only if it can be bound here (a name can resolve to a NAT's or a proxy's address).
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    bool local = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    close(fd);
    if (local) return numeric(a, static_cast<socklen_t>(ai->ai_addrlen));
  }
  return "";
}

}  // namespace

std::vector<std::string> hosts_in_launcher_args(const std::vector<std::string>& args) {
  static const char* kHostfileOptions[] = {"--hostfile", "-hostfile", "--machinefile",
                                           "-machinefile", "--default-hostfile"};
  static const char* kHostListOptions[] = {"-H", "--host", "-host"};
  std::vector<std::string> hosts;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string option = args[i], value;
    bool has_value = false;
    if (size_t eq = option.find('='); eq != std::string::npos && option.rfind("-", 0) == 0) {
      value = option.substr(eq + 1);
      option.resize(eq);
      has_value = true;
    }
    auto is = [&](const char* const* names, size_t n) {
      return std::any_of(names, names + n, [&](const char* name) { return option == name; });
    };
    bool hostfile = is(kHostfileOptions, std::size(kHostfileOptions));
    bool host_list = is(kHostListOptions, std::size(kHostListOptions));
    if (!hostfile && !host_list) continue;
    if (!has_value) {
      if (i + 1 >= args.size()) continue;  // mpirun itself says what is missing
      value = args[++i];
    }
    if (hostfile) {
      read_hostfile(value, hosts);
    } else {
      read_host_list(value, hosts);
    }
  }
  return hosts;
}

std::string local_source_address(const std::vector<std::string>& hosts) {
  std::string chosen, chosen_for, loopback;
  for (const std::string& host : hosts) {
    sockaddr_storage src{};
    socklen_t len = 0;
    std::string why;
    if (!source_toward(host, &src, &len, &why))
      throw std::runtime_error("rank host '" + host + "' " + why);
    std::string address = numeric(src, len);
    if (is_loopback(src)) {
      if (loopback.empty()) loopback = address;
      continue;
    }
    if (chosen.empty()) {
      chosen = address;
      chosen_for = host;
    } else if (address != chosen) {
      throw std::runtime_error("rank hosts '" + chosen_for + "' and '" + host +
                               "' are reached from different local addresses (" + chosen + " and " +
                               address +
                               "), so no one store address serves every rank; set "
                               "DLHOST_STORE_HOST to one that all of them reach");
    }
  }
  if (!chosen.empty()) return chosen;
  return loopback.empty() ? "127.0.0.1" : loopback;
}

StoreEndpoint choose_store_endpoint(const char* override_address, bool other_hosts,
                                    const std::vector<std::string>& launcher_args) {
  if (override_address != nullptr && *override_address != '\0')
    return {override_address, "DLHOST_STORE_HOST"};
  std::vector<std::string> hosts = hosts_in_launcher_args(launcher_args);
  if (!hosts.empty()) {
    try {
      return {local_source_address(hosts), "the local address that routes to the rank hosts"};
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string("cannot choose the store's address: ") + e.what());
    }
  }
  if (!other_hosts) return {"127.0.0.1", "every rank on this host"};
  std::string own = hostname_address();
  if (!own.empty()) return {own, "the address of this host's name (rank hosts not listed)"};
  sockaddr_storage src{};
  socklen_t len = 0;
  std::string why;
  if (source_toward(kDefaultRouteProbe, &src, &len, &why) && !is_loopback(src))
    return {numeric(src, len), "the source address of the default route (rank hosts not listed)"};
  throw std::runtime_error(
      "cannot choose the store's address: the ranks may be on other hosts, none is named in the "
      "launcher arguments, this host's name has no local address that is not loopback, and "
      "there is no default route; set DLHOST_STORE_HOST to an address of this host that the "
      "ranks reach");
}

}  // namespace dlhost
