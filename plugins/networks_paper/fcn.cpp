// fcn.cpp — the fully connected networks: Shi et al.'s FCN-5, FCN-8 (synthetic) and FCN-R
// (MNIST), and Du et al.'s AutoEncoder (Hinton & Salakhutdinov's deep MNIST autoencoder).
#include <vector>

#include "networks.h"

namespace dlhost::networks_paper {

namespace {

// A stack of fully connected layers, one activation after each hidden layer, ending in a
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

}  // namespace

void build_fcn5(Builder& b, const Options&) {
  fc_classifier(b, 26752, {2048, 2048, 2048}, 26752, DLHOST_ACTIVATION_SIGMOID);
}

void build_fcn8(Builder& b, const Options&) {
  fc_classifier(b, 26752, {2048, 2048, 2048, 2048, 2048, 2048}, 26752, DLHOST_ACTIVATION_SIGMOID);
}

void build_fcnr(Builder& b, const Options&) {
  fc_classifier(b, 784, {2048, 4096, 1024}, 10, DLHOST_ACTIVATION_SIGMOID);
}

// Logistic units everywhere but the linear 30-unit code layer; the reconstruction is compared
// with the input itself.
void build_autoencoder(Builder& b, const Options&) {
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

}  // namespace dlhost::networks_paper
