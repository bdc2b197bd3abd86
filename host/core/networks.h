// networks.h — the catalog of networks across every loaded network plugin. Not thread-safe with
// plugin loading; read-only afterwards.
#pragma once

#include <string>
#include <vector>

#include "dlhost/dlhost.h"

namespace dlhost {

class PluginRegistry;
struct LoadedPlugin;

struct NetworkRef {
  const LoadedPlugin* plugin = nullptr;
  int32_t index = 0;
  const dlhost_network_info* info = nullptr;
  std::string name;
};

// Every network of every usable network plugin, in load order. A name defined by two plugins is
// kept once (the first), with a warning.
std::vector<NetworkRef> list_networks(const PluginRegistry& registry);
const NetworkRef* find_network(const std::vector<NetworkRef>& networks, const std::string& name);

}  // namespace dlhost
