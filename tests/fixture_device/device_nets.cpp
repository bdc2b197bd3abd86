// device_nets.cpp — a test fixture: the network plugin "device_nets", with networks small enough
// that the device-path tests train them on the async_device fixture (plain loops on one thread)
// and all-reduce them through device_store (every value crosses the rendezvous store) in seconds:
// - mlp_small: 64 -> 48 (relu) -> 32 (relu) -> 10, softmax cross-entropy; 5 k parameters in 6
//   tensors, so a bucket_mb of a few kB gives several buckets.
#include <dlhost/dlhost.hpp>

namespace {

namespace sdk = dlhost::sdk;

const dlhost_optimizer_desc kSgd = [] {
  auto o = sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  o.kind = DLHOST_OPTIMIZER_SGD;
  o.learning_rate = 0.1f;
  o.momentum = 0.9f;
  return o;
}();

const dlhost_network_info kMlpSmall = [] {
  auto n = sdk::make_struct<dlhost_network_info>(DLHOST_NETWORK_INFO_STRUCT_SIZE);
  n.name = "mlp_small";
  n.description = "test fixture: 64-48-32-10 perceptron, relu, softmax cross-entropy";
  n.dataset = "synthetic";
  n.cpu_batch = 16;
  n.gpu_batch = 16;
  n.optimizer = &kSgd;
  return n;
}();

void build_mlp_small(sdk::Builder& b) {
  int32_t x = b.input("data", {64});
  int32_t labels = b.labels();
  x = b.relu("fc1_relu", b.fc("fc1", x, 48));
  x = b.relu("fc2_relu", b.fc("fc2", x, 32));
  b.softmax_cross_entropy("loss", b.fc("fc3", x, 10), labels);
}

const dlhost_network_api kApi = [] {
  auto t = sdk::make_struct<dlhost_network_api>(DLHOST_NETWORK_API_STRUCT_SIZE);
  t.count = [] { return int32_t{1}; };
  t.info = [](int32_t index, const dlhost_network_info** out) {
    return sdk::guard([&] {
      if (index != 0)
        sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "device_nets: no network " + std::to_string(index));
      *out = &kMlpSmall;
    });
  };
  t.build = [](int32_t index, const dlhost_builder_api* api, dlhost_graph_builder* builder,
               const dlhost_options*) {
    return sdk::guard([&] {
      if (index != 0) sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "device_nets: no network");
      sdk::Builder b(api, builder);
      build_mlp_small(b);
    });
  };
  return t;
}();

const dlhost_plugin kPlugin = [] {
  auto p = sdk::make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
  p.abi_major = DLHOST_ABI_MAJOR;
  p.abi_minor = DLHOST_ABI_MINOR;
  p.kind = DLHOST_PLUGIN_NETWORK;
  p.name = "device_nets";
  p.version = "1.0.0";
  p.description = "test fixture: small networks for the device-path tests";
  p.network = &kApi;
  return p;
}();

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::attach_host(host, "device_nets") ? &kPlugin : nullptr;
}
