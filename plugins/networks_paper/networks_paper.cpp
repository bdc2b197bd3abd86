// networks_paper.cpp — the seed networks of the two studies dlhost reproduces, described through
// the host's graph builder: Shi et al.'s FCN-5, FCN-8 and FCN-R, and Du et al.'s LeNet and
// AutoEncoder. Layer sizes follow shared/paper/NETWORKS.md; a test asserts each parameter count.
// The plugin holds no mutable state: every call is thread-safe.
#include <dlhost/dlhost.hpp>

#include <functional>
#include <string>
#include <vector>

namespace {

using dlhost::sdk::Builder;
constexpr const char* kPluginName = "networks_paper";

dlhost_optimizer_desc sgd(float lr, float momentum, float weight_decay) {
  auto o = dlhost::sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  o.kind = DLHOST_OPTIMIZER_SGD;
  o.learning_rate = lr;
  o.momentum = momentum;
  o.weight_decay = weight_decay;
  return o;
}

// A stack of fully connected layers with one activation after each hidden layer, ending in a
// softmax cross-entropy over `classes`.
void fc_classifier(Builder& b, int64_t inputs, const std::vector<int64_t>& hidden, int64_t classes,
                   dlhost_activation_kind act) {
  int32_t x = b.input("data", {inputs});
  int32_t labels = b.labels();
  for (size_t i = 0; i < hidden.size(); ++i) {
    std::string n = "fc" + std::to_string(i + 1);
    x = b.activation(n + "_act", b.fc(n, x, hidden[i]), act);
  }
  int32_t logits = b.fc("fc" + std::to_string(hidden.size() + 1), x, classes);
  b.softmax_cross_entropy("loss", logits, labels);
}

void build_fcn5(Builder& b) {
  fc_classifier(b, 26752, {2048, 2048, 2048}, 26752, DLHOST_ACTIVATION_SIGMOID);
}
void build_fcn8(Builder& b) {
  fc_classifier(b, 26752, {2048, 2048, 2048, 2048, 2048, 2048}, 26752, DLHOST_ACTIVATION_SIGMOID);
}
void build_fcnr(Builder& b) {
  fc_classifier(b, 784, {2048, 4096, 1024}, 10, DLHOST_ACTIVATION_SIGMOID);
}

void build_lenet(Builder& b) {
  int32_t x = b.input("data", {1, 28, 28});
  int32_t labels = b.labels();
  Builder::Pool pool;  // 2x2 max, stride 2
  Builder::Conv conv;
  conv.kernel = 5;
  conv.out_channels = 20;
  x = b.conv2d("conv1", x, conv);
  x = b.pool2d("pool1", x, pool);
  conv.out_channels = 50;
  x = b.conv2d("conv2", x, conv);
  x = b.pool2d("pool2", x, pool);
  x = b.relu("relu3", b.fc("fc3", x, 500));
  b.softmax_cross_entropy("loss", b.fc("fc4", x, 10), labels);
}

// Hinton & Salakhutdinov's deep autoencoder as in Caffe's MNIST example: logistic units
// everywhere but the linear 30-unit code layer; the reconstruction is compared with the input.
void build_autoencoder(Builder& b) {
  int32_t data = b.input("data", {784});
  const int64_t widths[] = {1000, 500, 250, 30, 250, 500, 1000, 784};
  const char* names[] = {"encode1", "encode2", "encode3", "encode4",
                         "decode4", "decode3", "decode2", "decode1"};
  int32_t x = data;
  for (int i = 0; i < 8; ++i) {
    x = b.fc(names[i], x, widths[i]);
    if (widths[i] != 30) x = b.sigmoid(std::string(names[i]) + "_act", x);
  }
  b.mse_loss("loss", x, data);
}

struct Network {
  dlhost_network_info info;
  dlhost_optimizer_desc optimizer;
  std::function<void(Builder&)> build;
};

std::vector<Network>& networks() {
  static std::vector<Network> list = [] {
    auto make = [](const char* name, const char* description, const char* dataset, int64_t cpu,
                   int64_t gpu, dlhost_optimizer_desc opt, std::function<void(Builder&)> fn) {
      Network n{};
      n.info.struct_size = DLHOST_NETWORK_INFO_STRUCT_SIZE;
      n.info.name = name;
      n.info.description = description;
      n.info.dataset = dataset;
      n.info.cpu_batch = cpu;
      n.info.gpu_batch = gpu;
      n.optimizer = opt;
      n.build = std::move(fn);
      return n;
    };
    std::vector<Network> v;
    v.push_back(make("fcn5",
                     "FCN-5 (Shi et al.): 26752 inputs, 3 fully connected hidden layers of 2048 "
                     "with sigmoid, 26752-way softmax cross-entropy; synthetic data.",
                     "synthetic", 64, 64, sgd(0.01f, 0.0f, 0.0f), build_fcn5));
    v.push_back(make("fcn8", "FCN-8 (Shi et al.): as FCN-5 with 6 hidden layers of 2048.",
                     "synthetic", 64, 64, sgd(0.01f, 0.0f, 0.0f), build_fcn8));
    v.push_back(
        make("fcnr",
             "FCN-R (Shi et al., real-data suite): MNIST 784 -> 2048 -> 4096 -> 1024 -> 10, "
             "sigmoid; SGD lr 0.05 momentum 0.9.",
             "MNIST", 1024, 4096, sgd(0.05f, 0.9f, 0.0f), build_fcnr));
    v.push_back(
        make("lenet",
             "LeNet (Du et al., Caffe's MNIST LeNet): conv20 5x5, maxpool 2/2, conv50 5x5, "
             "maxpool 2/2, fc500, ReLU, fc10; layer sizes of the classic definition (the "
             "study does not publish them); Caffe's solver: lr 0.01, momentum 0.9, wd 5e-4.",
             "MNIST", 64, 64, sgd(0.01f, 0.9f, 5e-4f), build_lenet));
    v.push_back(make("autoencoder",
                     "AutoEncoder (Du et al.): Hinton & Salakhutdinov's MNIST deep autoencoder "
                     "784-1000-500-250-30-250-500-1000-784, sigmoid except the linear code layer, "
                     "MSE reconstruction loss against the input; classic definition (the study "
                     "does not publish sizes); Caffe's solver: lr 0.01, momentum 0.9, wd 5e-4.",
                     "MNIST", 100, 100, sgd(0.01f, 0.9f, 5e-4f), build_autoencoder));
    for (auto& n : v) n.info.optimizer = &n.optimizer;
    return v;
  }();
  return list;
}

int32_t count() { return static_cast<int32_t>(networks().size()); }

const Network& at(int32_t index) {
  if (index < 0 || index >= count())
    dlhost::sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "no network " + std::to_string(index));
  return networks()[static_cast<size_t>(index)];
}

dlhost_status* info(int32_t index, const dlhost_network_info** out) {
  return dlhost::sdk::guard([&] {
    const auto& n = at(index);
    if (out == nullptr) dlhost::sdk::invalid("NULL out");
    *out = &n.info;
  });
}

dlhost_status* build(int32_t index, const dlhost_builder_api* api, dlhost_graph_builder* builder,
                     const dlhost_options*) {
  return dlhost::sdk::guard([&] {
    if (api == nullptr || api->struct_size < DLHOST_BUILDER_API_STRUCT_SIZE_1_0)
      dlhost::sdk::invalid("builder table missing or older than ABI 1.0");
    Builder b(api, builder);
    at(index).build(b);
  });
}

const dlhost_network_api kNetworkApi = {DLHOST_NETWORK_API_STRUCT_SIZE, count, info, build};

dlhost_plugin make_plugin() {
  auto p = dlhost::sdk::make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
  p.abi_major = DLHOST_ABI_MAJOR;
  p.abi_minor = DLHOST_ABI_MINOR;
  p.kind = DLHOST_PLUGIN_NETWORK;
  p.name = kPluginName;
  p.version = "0.1.0";
  p.description =
      "Seed networks of Shi et al. and Du et al.: FCN-5, FCN-8, FCN-R, LeNet, AutoEncoder";
  p.network = &kNetworkApi;
  return p;
}

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!dlhost::sdk::attach_host(host, kPluginName)) return nullptr;
  static const dlhost_plugin plugin = make_plugin();
  return &plugin;
}
