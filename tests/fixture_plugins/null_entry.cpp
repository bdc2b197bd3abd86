// null_entry.cpp — a test fixture: a plugin whose entry reports it cannot initialize.
#include "dlhost/dlhost.h"

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  host->log(DLHOST_LOG_ERROR, "null_entry", "cannot initialize: fixture says no");
  return nullptr;
}
