// example_mlp.cpp — the smallest useful network plugin, built out of tree against the installed
// SDK (see docs/plugin-sdk.md): one MLP, 784-256-10 with ReLU, softmax cross-entropy. The SDK's
// network kit fills the tables; the plugin is its list and its builder.
#include <dlhost/network_kit.hpp>

#include <vector>

namespace {

namespace sdk = dlhost::sdk;

void build_mlp(sdk::Builder& g, const sdk::Options&) {
  int32_t x = g.input("data", {784});
  int32_t y = g.labels();
  int32_t h = g.relu("relu1", g.fc("fc1", x, 256));
  g.softmax_cross_entropy("loss", g.fc("fc2", h, 10), y);
}

std::vector<sdk::Network> networks() {
  return {{"example_mlp", "MNIST", 64, 256, sdk::sgd_optimizer(0.01f, 0.9f), build_mlp,
           "784-256-10 MLP with ReLU: the SDK's example network plugin"}};
}

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return sdk::network_plugin<networks>(
      host, {"example_mlp", "1.0.0", "SDK example: a network plugin built out of tree"});
}
