// plugin.cpp — the networks_paper plugin's list of seed networks with their descriptions, the
// paper's batch sizes and optimizer settings, and the entry symbol; the SDK's network kit fills
// the tables. The layers themselves are in fcn.cpp, cnn.cpp and rnn.cpp. No mutable state.
#include <vector>

#include "networks.h"

namespace dlhost::networks_paper {
namespace {

using sdk::sgd_optimizer;

// Batch sizes: the paper's CPU batch, and its single-GPU batch (the smallest of its GPU sweep
// for the synthetic networks, as the third-party rerun used). Optimizers: the DLBench scripts'
// (docs/networks.md gives each with its source).
std::vector<sdk::Network> networks() {
  std::vector<sdk::Network> v;
  v.push_back({"fcn5", "synthetic", 64, 256, sgd_optimizer(0.01f, 0, 0), build_fcn5,
               "FCN-5 (Shi et al.): 26752 inputs, 3 fully connected hidden layers of 2048 "
               "with sigmoid, 26752-way softmax cross-entropy; plain SGD lr 0.01."});
  v.push_back({"fcn8", "synthetic", 64, 64, sgd_optimizer(0.01f, 0, 0), build_fcn8,
               "FCN-8 (Shi et al.): as FCN-5 with 6 hidden layers of 2048."});
  v.push_back({"fcnr", "MNIST", 1024, 4096, sgd_optimizer(0.05f, 0.9f, 0), build_fcnr,
               "FCN-R (Shi et al., real-data suite): MNIST 784 -> 2048 -> 4096 -> 1024 -> "
               "10, sigmoid; SGD lr 0.05 momentum 0.9."});
  v.push_back({"alexnet", "ImageNet", 16, 16, sgd_optimizer(0.01f, 0, 0), build_alexnet,
               "AlexNet (Shi et al., DLBench's Caffe definition): 3x224x224, conv96 11x11/4 "
               "pad 2, maxpool 3/2, conv256 5x5, maxpool, conv384, conv384, conv256 3x3, "
               "maxpool to 6x6, fc4096, fc4096, fc1000; ReLU, no LRN, no grouping, dropout "
               "0.5 after fc6/fc7; 62,378,344 parameters. Options: conv1_pad (0 gives the "
               "5x5 pool5 of an unpadded 224 input), dropout (0 drops the layers, as the "
               "TensorFlow script), lrn (true adds Krizhevsky's LRN). The TensorFlow "
               "script's SAME padding (7x7 pool5, ~76M parameters) is not reproduced."});
  v.push_back({"resnet50", "ImageNet", 16, 8, sgd_optimizer(0.01f, 0, 0), build_resnet50,
               "ResNet-50 (He et al., Caffe model): conv 7x7/2 + BN, maxpool 3/2, "
               "bottleneck stages of 3, 4, 6, 3 blocks (stride in the first 1x1), "
               "projection shortcuts with BN, global average pool, fc1000; convolutions "
               "without bias; 25,557,032 parameters."});
  v.push_back({"lstm32", "synthetic word ids", 128, 128, sgd_optimizer(1.0f, 0, 0, 5.0f),
               build_lstm32,
               "LSTM-32 (Shi et al.): vocabulary 10000, embedding 256, 2 LSTM layers of "
               "256 unrolled 32 steps, per-word fc to the vocabulary, cross-entropy on "
               "every word; SGD lr 1.0, gradient clipping at global norm 5; one bias per "
               "LSTM layer (6,180,624 parameters). Option steps."});
  v.push_back({"lstm64", "synthetic word ids", 128, 128, sgd_optimizer(1.0f, 0, 0, 5.0f),
               build_lstm64, "LSTM-64 (Shi et al.): as LSTM-32 unrolled 64 steps."});
  v.push_back({"alexnet_r", "CIFAR-10", 1024, 1024, sgd_optimizer(0.01f, 0.9f, 0), build_alexnet_r,
               "AlexNet-R (Shi et al., real-data suite): cuda-convnet layers-18pct without "
               "LRN: conv32 5x5 p2, maxpool 3/2, ReLU, conv32 5x5 p2, ReLU, maxpool 3/2, "
               "conv64 5x5 p2, ReLU, avgpool 3/2, fc10; Caffe's ceil-mode pooling (89,578 "
               "parameters); option pool_ceil=false gives floor pooling (85,098)."});
  v.push_back({"resnet56", "CIFAR-10", 128, 128, sgd_optimizer(0.01f, 0.9f, 1e-4f), build_resnet56,
               "ResNet-56 (Shi et al., real-data suite): conv3x3 16 + BN, 3 stages x 9 "
               "basic blocks of 16/32/64 filters, global average pool, fc10. Default: the "
               "DLBench Caffe prototxt ('BN after add', no ReLU after the add, 1x1 "
               "projections without BN; 855,578 parameters); option variant=he gives He et "
               "al.'s block (855,770). SGD lr 0.01, momentum 0.9, wd 1e-4."});
  v.push_back({"lstm_ptb", "PTB", 128, 128, sgd_optimizer(1.0f, 0, 0, 5.0f), build_lstm_ptb,
               "LSTM (Shi et al., real-data suite, PTB): as LSTM-32 (2 x 256, sequence "
               "32) on Penn Treebank-sized ids; lr 1.0 as the paper's text (its configs "
               "use 0.1), clipping 5."});
  v.push_back({"lenet", "MNIST", 64, 64, sgd_optimizer(0.01f, 0.9f, 5e-4f), build_lenet,
               "LeNet (Du et al.; Caffe's MNIST LeNet, the study publishes no sizes): "
               "conv20 5x5, maxpool 2/2, conv50 5x5, maxpool 2/2, fc500, ReLU, fc10; "
               "Caffe's solver: lr 0.01, momentum 0.9, wd 5e-4."});
  v.push_back({"autoencoder", "MNIST", 100, 100, sgd_optimizer(0.01f, 0.9f, 5e-4f),
               build_autoencoder,
               "AutoEncoder (Du et al.; Hinton & Salakhutdinov's MNIST deep autoencoder, the "
               "study publishes no sizes): 784-1000-500-250-30-250-500-1000-784, sigmoid "
               "except the linear code layer, MSE reconstruction loss against the input; "
               "Caffe's solver: lr 0.01, momentum 0.9, wd 5e-4."});
  return v;
}

}  // namespace
}  // namespace dlhost::networks_paper

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::network_plugin<dlhost::networks_paper::networks>(
      host, {"networks_paper", "0.2.0",
             "Seed networks of Shi et al. and Du et al.: FCN-5, FCN-8, FCN-R, AlexNet, ResNet-50, "
             "LSTM-32/64, AlexNet-R, ResNet-56, LSTM (PTB), LeNet, AutoEncoder"});
}
