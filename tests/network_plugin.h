// network_plugin.h — one network plugin loaded for a test binary and a way to build its networks
// by name, shared by the tests that assert parameter counts and shapes (test_graph.cpp for
// networks_paper, test_transformer_graph.cpp for networks_transformer). Not thread-safe: gtest
// runs a binary's tests on one thread.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/graph.h"
#include "core/networks.h"
#include "core/plugin_registry.h"

namespace dlhost::test_networks {

class NetworkPlugin {
 public:
  // `file`: the plugin's file name in DLHOST_TEST_PLUGIN_DIR ("libdlhost_networks_paper.so").
  explicit NetworkPlugin(const std::string& file) {
    registry_.load_file(std::string(DLHOST_TEST_PLUGIN_DIR) + "/" + file);
    networks_ = list_networks(registry_);
  }
  std::unique_ptr<Graph> build(const std::string& name, int64_t batch = 1,
                               std::map<std::string, std::string> options = {}) const {
    const auto* ref = find_network(networks_, name);
    if (ref == nullptr) throw std::runtime_error("no network " + name);
    dlhost_options o;
    o.values = std::move(options);
    return build_network(*ref->plugin, ref->index, batch, &o);
  }

 private:
  PluginRegistry registry_;
  std::vector<NetworkRef> networks_;
};

}  // namespace dlhost::test_networks
