// plugin_tables.cpp — see plugin_tables.h.
#include "core/plugin_tables.h"

#include <utility>
#include <vector>

namespace dlhost {

namespace {

using Named = std::vector<std::pair<const char*, bool>>;  // function, is it set

#define DLHOST_FN(table, fn) \
  { #fn, (table).fn != nullptr }

Named backend_functions(const dlhost_backend_api& t) {
  return {DLHOST_FN(t, device_count),    DLHOST_FN(t, device_info),   DLHOST_FN(t, context_create),
          DLHOST_FN(t, context_destroy), DLHOST_FN(t, compile),       DLHOST_FN(t, model_destroy),
          DLHOST_FN(t, model_info),      DLHOST_FN(t, set_input),     DLHOST_FN(t, forward),
          DLHOST_FN(t, backward),        DLHOST_FN(t, update),        DLHOST_FN(t, synchronize),
          DLHOST_FN(t, read_loss),       DLHOST_FN(t, param_buffers), DLHOST_FN(t, read_param),
          DLHOST_FN(t, write_param),     DLHOST_FN(t, memory_in_use)};
}

Named comm_functions(const dlhost_comm_api& t) {
  return {DLHOST_FN(t, capabilities), DLHOST_FN(t, init),      DLHOST_FN(t, finalize),
          DLHOST_FN(t, all_reduce),   DLHOST_FN(t, broadcast), DLHOST_FN(t, all_gather),
          DLHOST_FN(t, barrier),      DLHOST_FN(t, test),      DLHOST_FN(t, wait),
          DLHOST_FN(t, request_free)};
}

Named network_functions(const dlhost_network_api& t) {
  return {DLHOST_FN(t, count), DLHOST_FN(t, info), DLHOST_FN(t, build)};
}

#undef DLHOST_FN

}  // namespace

std::string null_required_function(const dlhost_plugin& plugin) {
  Named functions;
  if (plugin.kind == DLHOST_PLUGIN_BACKEND && plugin.backend)
    functions = backend_functions(*plugin.backend);
  if (plugin.kind == DLHOST_PLUGIN_COMM && plugin.comm) functions = comm_functions(*plugin.comm);
  if (plugin.kind == DLHOST_PLUGIN_NETWORK && plugin.network)
    functions = network_functions(*plugin.network);
  for (const auto& [name, set] : functions)
    if (!set) return name;
  return "";
}

}  // namespace dlhost
