// unusable.cpp — a test fixture: a well-formed network plugin whose query says it cannot run on
// this machine; it must load, be listed as not usable with the reason, and offer no networks.
#include "dlhost/dlhost.h"

namespace {
const dlhost_host_api* g_host = nullptr;
int32_t count() { return 0; }
dlhost_status* info(int32_t, const dlhost_network_info**) {
  return g_host->status_create(DLHOST_CODE_OUT_OF_RANGE, "none");
}
dlhost_status* build(int32_t, const dlhost_builder_api*, dlhost_graph_builder*,
                     const dlhost_options*) {
  return g_host->status_create(DLHOST_CODE_OUT_OF_RANGE, "none");
}
dlhost_status* query(int32_t*) {
  return g_host->status_create(DLHOST_CODE_UNAVAILABLE, "needs hardware this machine lacks");
}
const dlhost_network_api table = {DLHOST_NETWORK_API_STRUCT_SIZE, count, info, build};
}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  g_host = host;
  static dlhost_plugin plugin = [] {
    dlhost_plugin p{};
    p.struct_size = DLHOST_PLUGIN_STRUCT_SIZE;
    p.abi_major = DLHOST_ABI_MAJOR;
    p.abi_minor = DLHOST_ABI_MINOR;
    p.kind = DLHOST_PLUGIN_NETWORK;
    p.name = "unusable";
    p.query = query;
    p.network = &table;
    return p;
  }();
  return &plugin;
}
