// example_mlp.cpp — the smallest useful network plugin, built out of tree against the installed
// SDK (see docs/plugin-sdk.md): one MLP, 784-256-10 with ReLU, softmax cross-entropy.
#include <dlhost/dlhost.hpp>

namespace {

// Filled field by field from a zeroed struct: a brace list would miss the fields later ABI minors
// append (AdamW's in 1.4) and -Wextra says so.
const dlhost_optimizer_desc kOptimizer = [] {
  auto o = dlhost::sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  o.kind = DLHOST_OPTIMIZER_SGD;
  o.learning_rate = 0.01f;
  o.momentum = 0.9f;
  return o;
}();
const dlhost_network_info kInfo{DLHOST_NETWORK_INFO_STRUCT_SIZE,
                                "example_mlp",
                                "784-256-10 MLP with ReLU: the SDK's example network plugin",
                                "MNIST",
                                64,
                                256,
                                &kOptimizer};

int32_t count() { return 1; }

dlhost_status* info(int32_t index, const dlhost_network_info** out) {
  return dlhost::sdk::guard([&] {
    if (index != 0) dlhost::sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "one network only");
    *out = &kInfo;
  });
}

dlhost_status* build(int32_t, const dlhost_builder_api* api, dlhost_graph_builder* b,
                     const dlhost_options*) {
  return dlhost::sdk::guard([&] {
    dlhost::sdk::Builder g(api, b);
    int32_t x = g.input("data", {784});
    int32_t y = g.labels();
    int32_t h = g.relu("relu1", g.fc("fc1", x, 256));
    g.softmax_cross_entropy("loss", g.fc("fc2", h, 10), y);
  });
}

const dlhost_network_api kTable{DLHOST_NETWORK_API_STRUCT_SIZE, count, info, build};

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!dlhost::sdk::attach_host(host, "example_mlp")) return nullptr;
  static const dlhost_plugin plugin{DLHOST_PLUGIN_STRUCT_SIZE,
                                    DLHOST_ABI_MAJOR,
                                    DLHOST_ABI_MINOR,
                                    DLHOST_PLUGIN_NETWORK,
                                    "example_mlp",
                                    "1.0.0",
                                    "SDK example: a network plugin built out of tree",
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    &kTable,
                                    nullptr};
  return &plugin;
}
