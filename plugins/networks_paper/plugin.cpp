// plugin.cpp — the networks_paper plugin's tables: the list of seed networks with their
// descriptions, the paper's batch sizes and optimizer settings, and the entry symbol. The
// layers themselves are in fcn.cpp, cnn.cpp and rnn.cpp. No mutable state: thread-safe.
#include <vector>

#include "networks.h"

namespace dlhost::networks_paper {
namespace {

constexpr const char* kPluginName = "networks_paper";

dlhost_optimizer_desc sgd(float lr, float momentum, float weight_decay, float clip = 0.0f) {
  auto o = sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  o.kind = DLHOST_OPTIMIZER_SGD;
  o.learning_rate = lr;
  o.momentum = momentum;
  o.weight_decay = weight_decay;
  o.clip_norm = clip;
  return o;
}

using BuildFn = void (*)(Builder&, const Options&);

struct Network {
  dlhost_network_info info;
  dlhost_optimizer_desc optimizer;
  BuildFn build;
};

Network make(const char* name, const char* dataset, int64_t cpu_batch, int64_t gpu_batch,
             dlhost_optimizer_desc optimizer, BuildFn build, const char* description) {
  Network n{};
  n.info.struct_size = DLHOST_NETWORK_INFO_STRUCT_SIZE;
  n.info.name = name;
  n.info.description = description;
  n.info.dataset = dataset;
  n.info.cpu_batch = cpu_batch;
  n.info.gpu_batch = gpu_batch;
  n.optimizer = optimizer;
  n.build = build;
  return n;
}

// Batch sizes: the paper's CPU batch, and its single-GPU batch (the smallest of its GPU sweep
// for the synthetic networks, as the third-party rerun used). Optimizers: the DLBench scripts'
// (docs/networks.md gives each with its source).
const std::vector<Network>& networks() {
  static const std::vector<Network> list = [] {
    std::vector<Network> v;
    v.push_back(make("fcn5", "synthetic", 64, 256, sgd(0.01f, 0, 0), build_fcn5,
                     "FCN-5 (Shi et al.): 26752 inputs, 3 fully connected hidden layers of 2048 "
                     "with sigmoid, 26752-way softmax cross-entropy; plain SGD lr 0.01."));
    v.push_back(make("fcn8", "synthetic", 64, 64, sgd(0.01f, 0, 0), build_fcn8,
                     "FCN-8 (Shi et al.): as FCN-5 with 6 hidden layers of 2048."));
    v.push_back(make("fcnr", "MNIST", 1024, 4096, sgd(0.05f, 0.9f, 0), build_fcnr,
                     "FCN-R (Shi et al., real-data suite): MNIST 784 -> 2048 -> 4096 -> 1024 -> "
                     "10, sigmoid; SGD lr 0.05 momentum 0.9."));
    v.push_back(make("alexnet", "ImageNet", 16, 16, sgd(0.01f, 0, 0), build_alexnet,
                     "AlexNet (Shi et al., DLBench's Caffe definition): 3x224x224, conv96 11x11/4 "
                     "pad 2, maxpool 3/2, conv256 5x5, maxpool, conv384, conv384, conv256 3x3, "
                     "maxpool to 6x6, fc4096, fc4096, fc1000; ReLU, no LRN, no grouping, dropout "
                     "0.5 after fc6/fc7; 62,378,344 parameters. Options: conv1_pad (0 gives the "
                     "5x5 pool5 of an unpadded 224 input), dropout (0 drops the layers, as the "
                     "TensorFlow script), lrn (true adds Krizhevsky's LRN). The TensorFlow "
                     "script's SAME padding (7x7 pool5, ~76M parameters) is not reproduced."));
    v.push_back(make("resnet50", "ImageNet", 16, 8, sgd(0.01f, 0, 0), build_resnet50,
                     "ResNet-50 (He et al., Caffe model): conv 7x7/2 + BN, maxpool 3/2, "
                     "bottleneck stages of 3, 4, 6, 3 blocks (stride in the first 1x1), "
                     "projection shortcuts with BN, global average pool, fc1000; convolutions "
                     "without bias; 25,557,032 parameters."));
    v.push_back(make("lstm32", "synthetic word ids", 128, 128, sgd(1.0f, 0, 0, 5.0f), build_lstm32,
                     "LSTM-32 (Shi et al.): vocabulary 10000, embedding 256, 2 LSTM layers of "
                     "256 unrolled 32 steps, per-word fc to the vocabulary, cross-entropy on "
                     "every word; SGD lr 1.0, gradient clipping at global norm 5; one bias per "
                     "LSTM layer (6,180,624 parameters). Option steps."));
    v.push_back(make("lstm64", "synthetic word ids", 128, 128, sgd(1.0f, 0, 0, 5.0f), build_lstm64,
                     "LSTM-64 (Shi et al.): as LSTM-32 unrolled 64 steps."));
    v.push_back(make("alexnet_r", "CIFAR-10", 1024, 1024, sgd(0.01f, 0.9f, 0), build_alexnet_r,
                     "AlexNet-R (Shi et al., real-data suite): cuda-convnet layers-18pct without "
                     "LRN: conv32 5x5 p2, maxpool 3/2, ReLU, conv32 5x5 p2, ReLU, maxpool 3/2, "
                     "conv64 5x5 p2, ReLU, avgpool 3/2, fc10; Caffe's ceil-mode pooling (89,578 "
                     "parameters); option pool_ceil=false gives floor pooling (85,098)."));
    v.push_back(make("resnet56", "CIFAR-10", 128, 128, sgd(0.01f, 0.9f, 1e-4f), build_resnet56,
                     "ResNet-56 (Shi et al., real-data suite): conv3x3 16 + BN, 3 stages x 9 "
                     "basic blocks of 16/32/64 filters, global average pool, fc10. Default: the "
                     "DLBench Caffe prototxt ('BN after add', no ReLU after the add, 1x1 "
                     "projections without BN; 855,578 parameters); option variant=he gives He et "
                     "al.'s block (855,770). SGD lr 0.01, momentum 0.9, wd 1e-4."));
    v.push_back(make("lstm_ptb", "PTB", 128, 128, sgd(1.0f, 0, 0, 5.0f), build_lstm_ptb,
                     "LSTM (Shi et al., real-data suite, PTB): as LSTM-32 (2 x 256, sequence "
                     "32) on Penn Treebank-sized ids; lr 1.0 as the paper's text (its configs "
                     "use 0.1), clipping 5."));
    v.push_back(make("lenet", "MNIST", 64, 64, sgd(0.01f, 0.9f, 5e-4f), build_lenet,
                     "LeNet (Du et al.; Caffe's MNIST LeNet, the study publishes no sizes): "
                     "conv20 5x5, maxpool 2/2, conv50 5x5, maxpool 2/2, fc500, ReLU, fc10; "
                     "Caffe's solver: lr 0.01, momentum 0.9, wd 5e-4."));
    v.push_back(make("autoencoder", "MNIST", 100, 100, sgd(0.01f, 0.9f, 5e-4f), build_autoencoder,
                     "AutoEncoder (Du et al.; Hinton & Salakhutdinov's MNIST deep autoencoder, the "
                     "study publishes no sizes): 784-1000-500-250-30-250-500-1000-784, sigmoid "
                     "except the linear code layer, MSE reconstruction loss against the input; "
                     "Caffe's solver: lr 0.01, momentum 0.9, wd 5e-4."));
    // Moving the vector out keeps its element buffer, so these pointers stay valid.
    for (auto& n : v) n.info.optimizer = &n.optimizer;
    return v;
  }();
  return list;
}

int32_t count() { return static_cast<int32_t>(networks().size()); }

const Network& at(int32_t index) {
  if (index < 0 || index >= count())
    sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "no network " + std::to_string(index));
  return networks()[static_cast<size_t>(index)];
}

dlhost_status* info(int32_t index, const dlhost_network_info** out) {
  return sdk::guard([&] {
    if (out == nullptr) sdk::invalid("NULL out");
    *out = &at(index).info;
  });
}

dlhost_status* build(int32_t index, const dlhost_builder_api* api, dlhost_graph_builder* builder,
                     const dlhost_options* options) {
  return sdk::guard([&] {
    if (api == nullptr || api->struct_size < DLHOST_BUILDER_API_STRUCT_SIZE_1_0)
      sdk::invalid("builder table missing or older than ABI 1.0");
    Builder b(api, builder);
    at(index).build(b, Options(options));
  });
}

const dlhost_network_api kNetworkApi = {DLHOST_NETWORK_API_STRUCT_SIZE, count, info, build};

dlhost_plugin make_plugin() {
  auto p = sdk::make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
  p.abi_major = DLHOST_ABI_MAJOR;
  p.abi_minor = DLHOST_ABI_MINOR;
  p.kind = DLHOST_PLUGIN_NETWORK;
  p.name = kPluginName;
  p.version = "0.2.0";
  p.description =
      "Seed networks of Shi et al. and Du et al.: FCN-5, FCN-8, FCN-R, AlexNet, ResNet-50, "
      "LSTM-32/64, AlexNet-R, ResNet-56, LSTM (PTB), LeNet, AutoEncoder";
  p.network = &kNetworkApi;
  return p;
}

}  // namespace
}  // namespace dlhost::networks_paper

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  using namespace dlhost::networks_paper;
  if (!dlhost::sdk::attach_host(host, kPluginName)) return nullptr;
  static const dlhost_plugin plugin = make_plugin();
  return &plugin;
}
