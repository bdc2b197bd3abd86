// graph_attrs.h — one-line constructors of the ABI's op attribute structs and SGD descriptor
// (struct_size set, the rest from the arguments), shared by the tests that build graphs by hand.
// Square kernels, strides and padding; a test needing more fills the struct itself.
#pragma once

#include <cstdint>

#include "dlhost/dlhost.h"

namespace dlhost::test_attrs {

inline dlhost_fc_attrs fc(int64_t out, bool bias = true, int32_t batch_dims = 1) {
  dlhost_fc_attrs a{};
  a.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE;
  a.out_features = out;
  a.has_bias = bias ? 1 : 0;
  a.batch_dims = batch_dims;
  return a;
}

inline dlhost_conv2d_attrs conv(int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0,
                                int64_t dilation = 1, bool bias = true, int64_t groups = 1) {
  dlhost_conv2d_attrs a{};
  a.struct_size = DLHOST_CONV2D_ATTRS_STRUCT_SIZE;
  a.out_channels = out;
  a.kernel_h = a.kernel_w = k;
  a.stride_h = a.stride_w = stride;
  a.pad_h = a.pad_w = pad;
  a.dilation_h = a.dilation_w = dilation;
  a.groups = groups;
  a.has_bias = bias ? 1 : 0;
  return a;
}

inline dlhost_pool2d_attrs pool(dlhost_pool_kind kind, int64_t k, int64_t stride, int64_t pad,
                                bool ceil, bool include_pad) {
  dlhost_pool2d_attrs a{};
  a.struct_size = DLHOST_POOL2D_ATTRS_STRUCT_SIZE;
  a.kind = kind;
  a.kernel_h = a.kernel_w = k;
  a.stride_h = a.stride_w = stride;
  a.pad_h = a.pad_w = pad;
  a.ceil_mode = ceil ? 1 : 0;
  a.count_include_pad = include_pad ? 1 : 0;
  return a;
}

inline dlhost_activation_attrs act(dlhost_activation_kind kind) {
  dlhost_activation_attrs a{};
  a.struct_size = DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE;
  a.kind = kind;
  return a;
}

inline dlhost_batch_norm_attrs bn(float momentum = 0.1f, float epsilon = 1e-5f) {
  dlhost_batch_norm_attrs a{};
  a.struct_size = DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE;
  a.epsilon = epsilon;
  a.momentum = momentum;
  return a;
}

inline dlhost_dropout_attrs dropout(float p) {
  dlhost_dropout_attrs a{};
  a.struct_size = DLHOST_DROPOUT_ATTRS_STRUCT_SIZE;
  a.probability = p;
  return a;
}

inline dlhost_lrn_attrs lrn(int64_t size, float alpha, float beta, float k) {
  dlhost_lrn_attrs a{};
  a.struct_size = DLHOST_LRN_ATTRS_STRUCT_SIZE;
  a.size = size;
  a.alpha = alpha;
  a.beta = beta;
  a.k = k;
  return a;
}

inline dlhost_embedding_attrs embedding(int64_t vocab, int64_t dim) {
  dlhost_embedding_attrs a{};
  a.struct_size = DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE;
  a.vocab = vocab;
  a.dim = dim;
  return a;
}

inline dlhost_lstm_attrs lstm(int64_t hidden, int64_t layers) {
  dlhost_lstm_attrs a{};
  a.struct_size = DLHOST_LSTM_ATTRS_STRUCT_SIZE;
  a.hidden = hidden;
  a.layers = layers;
  return a;
}

// The ABI's SGD: learning rate, momentum, weight decay, clipping by the global norm (0 = off).
// ABI 1.4: AdamW, its betas and epsilon as given (PyTorch's defaults 0.9, 0.999, 1e-8).
inline dlhost_optimizer_desc adamw(float lr, float weight_decay = 0, float clip = 0,
                                   float beta1 = 0.9f, float beta2 = 0.999f,
                                   float epsilon = 1e-8f) {
  dlhost_optimizer_desc o{};
  o.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
  o.kind = DLHOST_OPTIMIZER_ADAMW;
  o.learning_rate = lr;
  o.weight_decay = weight_decay;
  o.clip_norm = clip;
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.epsilon = epsilon;
  return o;
}

inline dlhost_optimizer_desc sgd(float lr, float momentum = 0, float weight_decay = 0,
                                 float clip = 0) {
  dlhost_optimizer_desc o{};
  o.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
  o.kind = DLHOST_OPTIMIZER_SGD;
  o.learning_rate = lr;
  o.momentum = momentum;
  o.weight_decay = weight_decay;
  o.clip_norm = clip;
  return o;
}

}  // namespace dlhost::test_attrs
