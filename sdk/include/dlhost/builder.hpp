// builder.hpp — the graph builder as a C++ object (Builder), for a network plugin's builder
// functions (network_kit.hpp includes it): each call adds one node through the host's
// dlhost_builder_api and returns the new tensor id, or throws Error (a status of the host's
// becomes an exception; an entry the host's table predates is UNIMPLEMENTED naming the ABI
// minor that added it). A backend never builds a graph and does not include it.
//
// Header-only, compiled into the plugin; nothing crosses the ABI. Not thread-safe: one builder
// is used by one call of the host's at a time.
#ifndef DLHOST_BUILDER_HPP
#define DLHOST_BUILDER_HPP

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "dlhost/common.hpp"

namespace dlhost::sdk {

// The graph builder as a C++ object: each call returns the new tensor id or throws Error.
class Builder {
 public:
  Builder(const dlhost_builder_api* api, dlhost_graph_builder* builder)
      : api_(api), builder_(builder) {}

  // True when the host's builder has ABI 1.4's Transformer ops (layer_norm ... tied_fc): a
  // network that needs them checks first and is UNIMPLEMENTED on an older host.
  bool has_transformer_ops() const { return DLHOST_HAS_FIELD(api_, dlhost_builder_api, tied_fc); }

  int32_t input(const std::string& name, std::initializer_list<int64_t> per_sample_dims,
                dlhost_dtype dtype = DLHOST_DTYPE_F32) {
    std::vector<int64_t> dims(per_sample_dims);
    int32_t out = -1;
    check(api_->input(builder_, name.c_str(), dtype, static_cast<int32_t>(dims.size()), dims.data(),
                      &out));
    return out;
  }
  int32_t labels(const std::string& name = "labels") {
    int32_t out = -1;
    check(api_->input(builder_, name.c_str(), DLHOST_DTYPE_I32, 0, nullptr, &out));
    return out;
  }
  int32_t fc(const std::string& name, int32_t x, int64_t out_features, bool bias = true) {
    auto attrs = make_struct<dlhost_fc_attrs>(DLHOST_FC_ATTRS_STRUCT_SIZE);
    attrs.out_features = out_features;
    attrs.has_bias = bias ? 1 : 0;
    int32_t out = -1;
    check(api_->fc(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  struct Conv {
    int64_t out_channels = 0, kernel = 1, stride = 1, pad = 0, dilation = 1, groups = 1;
    bool bias = true;
  };
  int32_t conv2d(const std::string& name, int32_t x, const Conv& c) {
    auto attrs = make_struct<dlhost_conv2d_attrs>(DLHOST_CONV2D_ATTRS_STRUCT_SIZE);
    attrs.out_channels = c.out_channels;
    attrs.kernel_h = attrs.kernel_w = c.kernel;
    attrs.stride_h = attrs.stride_w = c.stride;
    attrs.pad_h = attrs.pad_w = c.pad;
    attrs.dilation_h = attrs.dilation_w = c.dilation;
    attrs.groups = c.groups;
    attrs.has_bias = c.bias ? 1 : 0;
    int32_t out = -1;
    check(api_->conv2d(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  struct Pool {
    dlhost_pool_kind kind = DLHOST_POOL_MAX;
    int64_t kernel = 2, stride = 2, pad = 0;
    bool ceil_mode = false, count_include_pad = true;
  };
  int32_t pool2d(const std::string& name, int32_t x, const Pool& p) {
    auto attrs = make_struct<dlhost_pool2d_attrs>(DLHOST_POOL2D_ATTRS_STRUCT_SIZE);
    attrs.kind = p.kind;
    attrs.kernel_h = attrs.kernel_w = p.kernel;
    attrs.stride_h = attrs.stride_w = p.stride;
    attrs.pad_h = attrs.pad_w = p.pad;
    attrs.ceil_mode = p.ceil_mode ? 1 : 0;
    attrs.count_include_pad = p.count_include_pad ? 1 : 0;
    int32_t out = -1;
    check(api_->pool2d(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  int32_t activation(const std::string& name, int32_t x, dlhost_activation_kind kind) {
    auto attrs = make_struct<dlhost_activation_attrs>(DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE);
    attrs.kind = kind;
    int32_t out = -1;
    check(api_->activation(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  int32_t relu(const std::string& name, int32_t x) {
    return activation(name, x, DLHOST_ACTIVATION_RELU);
  }
  int32_t sigmoid(const std::string& name, int32_t x) {
    return activation(name, x, DLHOST_ACTIVATION_SIGMOID);
  }
  int32_t softmax_cross_entropy(const std::string& name, int32_t logits, int32_t labels) {
    int32_t out = -1;
    check(api_->softmax_cross_entropy(builder_, name.c_str(), logits, labels, &out));
    return out;
  }
  int32_t mse_loss(const std::string& name, int32_t prediction, int32_t target) {
    int32_t out = -1;
    check(api_->mse_loss(builder_, name.c_str(), prediction, target, &out));
    return out;
  }

  // --- ABI 1.1: each throws UNIMPLEMENTED when the host's table predates it ---
  int32_t input_ids(const std::string& name, std::initializer_list<int64_t> per_sample_dims) {
    require(host_is_1_1(), "input_ids");
    return input(name, per_sample_dims, DLHOST_DTYPE_I32);
  }
  int32_t fc_per_step(const std::string& name, int32_t x, int64_t out_features, bool bias = true) {
    // `fc` itself is 1.0, but a 1.0 host reads no batch_dims and would build a per-sample layer.
    require(host_is_1_1(), "fc_per_step");
    auto attrs = make_struct<dlhost_fc_attrs>(DLHOST_FC_ATTRS_STRUCT_SIZE);
    attrs.out_features = out_features;
    attrs.has_bias = bias ? 1 : 0;
    attrs.batch_dims = 2;
    int32_t out = -1;
    check(api_->fc(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  int32_t batch_norm(const std::string& name, int32_t x, float epsilon = 1e-5f,
                     float momentum = 0.1f) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, batch_norm), "batch_norm");
    auto attrs = make_struct<dlhost_batch_norm_attrs>(DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE);
    attrs.epsilon = epsilon;
    attrs.momentum = momentum;
    int32_t out = -1;
    check(api_->batch_norm(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  int32_t dropout(const std::string& name, int32_t x, float probability) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, dropout), "dropout");
    auto attrs = make_struct<dlhost_dropout_attrs>(DLHOST_DROPOUT_ATTRS_STRUCT_SIZE);
    attrs.probability = probability;
    int32_t out = -1;
    check(api_->dropout(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  int32_t add(const std::string& name, int32_t x, int32_t y) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, add), "add");
    int32_t out = -1;
    check(api_->add(builder_, name.c_str(), x, y, &out));
    return out;
  }
  int32_t lrn(const std::string& name, int32_t x, int64_t size, float alpha, float beta, float k) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, lrn), "lrn");
    auto attrs = make_struct<dlhost_lrn_attrs>(DLHOST_LRN_ATTRS_STRUCT_SIZE);
    attrs.size = size;
    attrs.alpha = alpha;
    attrs.beta = beta;
    attrs.k = k;
    int32_t out = -1;
    check(api_->lrn(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  int32_t embedding(const std::string& name, int32_t ids, int64_t vocab, int64_t dim) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, embedding), "embedding");
    auto attrs = make_struct<dlhost_embedding_attrs>(DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE);
    attrs.vocab = vocab;
    attrs.dim = dim;
    int32_t out = -1;
    check(api_->embedding(builder_, name.c_str(), ids, &attrs, &out));
    return out;
  }
  int32_t lstm(const std::string& name, int32_t x, int64_t hidden, int64_t layers) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, lstm), "lstm");
    auto attrs = make_struct<dlhost_lstm_attrs>(DLHOST_LSTM_ATTRS_STRUCT_SIZE);
    attrs.hidden = hidden;
    attrs.layers = layers;
    int32_t out = -1;
    check(api_->lstm(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  int32_t global_avg_pool(const std::string& name, int32_t x) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, global_avg_pool), "global_avg_pool");
    int32_t out = -1;
    check(api_->global_avg_pool(builder_, name.c_str(), x, &out));
    return out;
  }
  // ABI 1.4: the Transformer's ops (dlhost_graph.h).
  int32_t layer_norm(const std::string& name, int32_t x, float epsilon) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, layer_norm), "layer_norm", "1.4");
    auto attrs = make_struct<dlhost_layer_norm_attrs>(DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE);
    attrs.epsilon = epsilon;
    int32_t out = -1;
    check(api_->layer_norm(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  int32_t gelu(const std::string& name, int32_t x, dlhost_gelu_approximation approximation) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, gelu), "gelu", "1.4");
    auto attrs = make_struct<dlhost_gelu_attrs>(DLHOST_GELU_ATTRS_STRUCT_SIZE);
    attrs.approximation = approximation;
    int32_t out = -1;
    check(api_->gelu(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  int32_t attention(const std::string& name, int32_t q, int32_t k, int32_t v, int64_t heads,
                    bool causal, float dropout) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, attention), "attention", "1.4");
    auto attrs = make_struct<dlhost_attention_attrs>(DLHOST_ATTENTION_ATTRS_STRUCT_SIZE);
    attrs.heads = heads;
    attrs.causal = causal ? 1 : 0;
    attrs.dropout = dropout;
    int32_t out = -1;
    check(api_->attention(builder_, name.c_str(), q, k, v, &attrs, &out));
    return out;
  }
  int32_t position_embedding(const std::string& name, int32_t x, int64_t max_positions) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, position_embedding), "position_embedding",
            "1.4");
    auto attrs =
        make_struct<dlhost_position_embedding_attrs>(DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE);
    attrs.max_positions = max_positions;
    int32_t out = -1;
    check(api_->position_embedding(builder_, name.c_str(), x, &attrs, &out));
    return out;
  }
  // `table_of`: the output of the embedding whose table becomes this layer's weight.
  int32_t tied_fc(const std::string& name, int32_t x, int32_t table_of, bool has_bias) {
    require(DLHOST_HAS_FIELD(api_, dlhost_builder_api, tied_fc), "tied_fc", "1.4");
    auto attrs = make_struct<dlhost_tied_fc_attrs>(DLHOST_TIED_FC_ATTRS_STRUCT_SIZE);
    attrs.embedding_node = -1;
    attrs.has_bias = has_bias ? 1 : 0;
    int32_t out = -1;
    check(api_->tied_fc(builder_, name.c_str(), x, table_of, &attrs, &out));
    return out;
  }

 private:
  // A 1.1 host's builder table covers the entries 1.1 appended.
  bool host_is_1_1() const { return api_->struct_size > DLHOST_BUILDER_API_STRUCT_SIZE_1_0; }
  static void require(bool present, const char* what, const char* abi = "1.1") {
    if (!present)
      unimplemented(std::string("the host's graph builder predates '") + what + "' (ABI " + abi +
                    "): update dlhost");
  }
  const dlhost_builder_api* api_;
  dlhost_graph_builder* builder_;
};

}  // namespace dlhost::sdk

#endif  // DLHOST_BUILDER_HPP
