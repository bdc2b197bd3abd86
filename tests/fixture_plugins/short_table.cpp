// short_table.cpp — a test fixture: a backend whose table reports a struct_size smaller than
// ABI 1.0's, which the host must refuse instead of reading past its end.
#include "dlhost/dlhost.h"

namespace {
dlhost_backend_api table = {sizeof(size_t) * 2,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr};
}

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api*) {
  static dlhost_plugin plugin = [] {
    dlhost_plugin p{};
    p.struct_size = DLHOST_PLUGIN_STRUCT_SIZE;
    p.abi_major = DLHOST_ABI_MAJOR;
    p.abi_minor = DLHOST_ABI_MINOR;
    p.kind = DLHOST_PLUGIN_BACKEND;
    p.name = "short_table";
    p.backend = &table;
    return p;
  }();
  return &plugin;
}
