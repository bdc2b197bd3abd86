// networks.cpp — see networks.h.
#include "core/networks.h"

#include <spdlog/spdlog.h>

#include "core/host_api.h"
#include "core/plugin_registry.h"

namespace dlhost {

std::vector<NetworkRef> list_networks(const PluginRegistry& registry) {
  std::vector<NetworkRef> out;
  registry.probe_kind(DLHOST_PLUGIN_NETWORK);
  for (const auto& p : registry.plugins()) {
    if (p.kind != DLHOST_PLUGIN_NETWORK || !p.usable) continue;
    const dlhost_network_api* api = p.table->network;
    int32_t n = api->count();
    for (int32_t i = 0; i < n; ++i) {
      const dlhost_network_info* info = nullptr;
      StatusPtr failed(api->info(i, &info));
      if (failed || info == nullptr || info->name == nullptr ||
          info->struct_size < DLHOST_NETWORK_INFO_STRUCT_SIZE) {
        spdlog::warn("network plugin {} ({}): network {} has no usable description{}", p.name,
                     p.path, i, failed ? ": " + failed->message : "");
        continue;
      }
      if (const NetworkRef* other = find_network(out, info->name)) {
        spdlog::warn("network '{}' of plugin {} ignored: already defined by plugin {}", info->name,
                     p.name, other->plugin->name);
        continue;
      }
      out.push_back({&p, i, info, info->name});
    }
  }
  return out;
}

const NetworkRef* find_network(const std::vector<NetworkRef>& networks, const std::string& name) {
  for (const auto& n : networks)
    if (n.name == name) return &n;
  return nullptr;
}

}  // namespace dlhost
