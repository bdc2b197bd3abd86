// wrong_major.cpp — a test fixture: a plugin built for a future ABI major, which the host must
// refuse with both version numbers in the message.
#include "dlhost/dlhost.h"

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api*) {
  static dlhost_plugin plugin = [] {
    dlhost_plugin p{};
    p.struct_size = DLHOST_PLUGIN_STRUCT_SIZE;
    p.abi_major = DLHOST_ABI_MAJOR + 1;
    p.abi_minor = 0;
    p.kind = DLHOST_PLUGIN_NETWORK;
    p.name = "from_the_future";
    return p;
  }();
  return &plugin;
}
