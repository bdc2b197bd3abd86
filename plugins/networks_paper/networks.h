// networks.h — the builders of the seed networks (one function each) and the small layer helpers
// they share. Each builder describes layers through the host's builder and throws
// dlhost::sdk::Error on a bad option; none keeps state.
#ifndef DLHOST_NETWORKS_PAPER_NETWORKS_H
#define DLHOST_NETWORKS_PAPER_NETWORKS_H

#include <dlhost/network_kit.hpp>

#include <string>

namespace dlhost::networks_paper {

using sdk::Builder;

// The case's options for this plugin (`options: {networks_paper: {...}}` in a suite).
using sdk::Options;

// A convolution with square kernel, stride and padding.
int32_t conv(Builder& b, const std::string& name, int32_t x, int64_t out, int64_t kernel,
             int64_t stride, int64_t pad, bool bias = true);
int32_t max_pool(Builder& b, const std::string& name, int32_t x, int64_t kernel, int64_t stride,
                 int64_t pad = 0, bool ceil_mode = false);

// fcn.cpp
void build_fcn5(Builder& b, const Options& o);
void build_fcn8(Builder& b, const Options& o);
void build_fcnr(Builder& b, const Options& o);
void build_autoencoder(Builder& b, const Options& o);
// cnn.cpp
void build_lenet(Builder& b, const Options& o);
void build_alexnet(Builder& b, const Options& o);
void build_alexnet_r(Builder& b, const Options& o);
void build_resnet50(Builder& b, const Options& o);
void build_resnet56(Builder& b, const Options& o);
// rnn.cpp
void build_lstm32(Builder& b, const Options& o);
void build_lstm64(Builder& b, const Options& o);
void build_lstm_ptb(Builder& b, const Options& o);

}  // namespace dlhost::networks_paper

#endif  // DLHOST_NETWORKS_PAPER_NETWORKS_H
