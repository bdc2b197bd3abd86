// host_api.h — the host side of the ABI's services: status objects, per-case options, the
// rendezvous key-value store, and the dlhost_host_api table handed to every plugin.
//
// Thread-safety: every function here is thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "dlhost/dlhost.h"
#include "dlhost/dlhost.hpp"

// The opaque types of the ABI, defined by the host.
struct dlhost_status {
  int32_t code;
  std::string message;
};
struct dlhost_options {
  std::map<std::string, std::string> values;
};

namespace dlhost {

// The table every plugin receives; lives as long as the process.
const dlhost_host_api* host_api();
// The table of a host that speaks ABI 1.`abi_minor` (older minors: the older table's size and
// minor, so a plugin behaves as it would in that host). For compatibility tests only: the real
// host always hands out host_api().
const dlhost_host_api* host_api(uint32_t abi_minor);

// An error raised by the host or carried out of a plugin's status: the SDK's own (dlhost.hpp),
// so host and plugin code throw and catch one type.
using Error = sdk::Error;

struct StatusDeleter {
  void operator()(dlhost_status* s) const { delete s; }
};
using StatusPtr = std::unique_ptr<dlhost_status, StatusDeleter>;

dlhost_status* make_status(dlhost_code code, const std::string& message);

// Throws Error(code, context + ": " + message) when `status` is an error; releases it.
void check_status(dlhost_status* status, const std::string& context);

const char* code_name(int32_t code);

// Runs `body`, turning exceptions into a status (for host functions called by plugins): the
// SDK's guard, whose statuses this host's own table creates.
template <class Body>
dlhost_status* guard_status(Body&& body) noexcept {
  host_api();
  return sdk::guard(std::forward<Body>(body));
}

// Clears the in-process rendezvous store (between cases). A process given
// DLHOST_STORE=SECRET@HOST:PORT (the ranks of a multi-rank case) uses the case's network store
// instead (rendezvous_store.h).
void reset_store();

}  // namespace dlhost
