// graph.h — the host-owned graph IR: what network plugins build and backends compile.
//
// GraphBuilder infers and checks every shape as layers are added, creates parameters with their
// canonical layouts and initializers, and counts FLOPs. Graph owns the result and exposes the
// ABI view (dlhost_graph) whose pointers live as long as the Graph. The builder is also usable
// directly from C++ (tests build graphs with it), and through the C builder table that network
// plugins receive. Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/dlhost.h"
#include "dlhost/dlhost.hpp"

namespace dlhost {

struct LoadedPlugin;

class Graph {
 public:
  const dlhost_graph* view() const { return &view_; }
  const std::string& network() const { return network_; }
  int64_t batch() const { return batch_; }

  int64_t param_count() const;              // elements over all parameters
  double forward_flops() const;             // per mini-batch
  double forward_flops_per_sample() const;  // forward_flops() / batch
  // Per-sample shape of the first non-label input ("3x224x224").
  std::string input_shape() const;
  // Tokens in one sample: the positions of the data input when it holds token ids (a language
  // model's sequence length), else 0 (an image or feature input has no tokens).
  int64_t tokens_per_sample() const;

  const dlhost_tensor_desc& tensor(int32_t id) const { return *tensor_ptrs_.at(id); }
  const dlhost_node& node(int32_t index) const { return *node_ptrs_.at(index); }
  const dlhost_param_desc& param(int32_t id) const { return *param_ptrs_.at(id); }
  int32_t num_params() const { return static_cast<int32_t>(param_ptrs_.size()); }
  // A parameter's dtype as read_param/write_param carry it: F32, the master weights' in every
  // precision mode (dlhost_backend.h), and its bytes there (count * dtype size).
  int32_t param_dtype(int32_t) const { return DLHOST_DTYPE_F32; }
  size_t param_bytes(int32_t id) const {
    return static_cast<size_t>(param(id).count) * sdk::dtype_size(param_dtype(id));
  }

 private:
  friend class GraphBuilder;
  struct NodeStorage {
    dlhost_node node{};
    std::string name;
    std::vector<int32_t> inputs, params;
    dlhost_fc_attrs fc{};
    dlhost_conv2d_attrs conv{};
    dlhost_pool2d_attrs pool{};
    dlhost_activation_attrs act{};
    dlhost_batch_norm_attrs bn{};
    dlhost_dropout_attrs dropout{};
    dlhost_lrn_attrs lrn{};
    dlhost_embedding_attrs embedding{};
    dlhost_lstm_attrs lstm{};
    // ABI 1.4
    dlhost_layer_norm_attrs layer_norm{};
    dlhost_gelu_attrs gelu{};
    dlhost_attention_attrs attention{};
    dlhost_position_embedding_attrs position{};
    dlhost_tied_fc_attrs tied_fc{};
  };
  struct TensorStorage {
    dlhost_tensor_desc desc{};
    std::string name;
  };
  struct ParamStorage {
    dlhost_param_desc desc{};
    std::string name;
  };
  void finish();  // fills the view from the storages
  // The data input: the first F32 input, or else the first input (token ids); -1 with none.
  int32_t data_input() const;

  std::string network_;
  int64_t batch_ = 0;
  // deques: addresses stay put as elements are appended.
  std::deque<TensorStorage> tensors_;
  std::deque<NodeStorage> nodes_;
  std::deque<ParamStorage> params_;
  std::vector<const dlhost_tensor_desc*> tensor_ptrs_;
  std::vector<const dlhost_node*> node_ptrs_;
  std::vector<const dlhost_param_desc*> param_ptrs_;
  std::vector<int32_t> inputs_;
  int32_t loss_ = -1;
  dlhost_graph view_{};
};

// Builds a Graph for one mini-batch size. Every method throws dlhost::Error (INVALID_ARGUMENT)
// with the layer name and shapes when something does not fit.
class GraphBuilder {
 public:
  GraphBuilder(std::string network, int64_t batch);

  int32_t input(const std::string& name, dlhost_dtype dtype,
                const std::vector<int64_t>& per_sample);
  int32_t fc(const std::string& name, int32_t x, const dlhost_fc_attrs& attrs);
  int32_t conv2d(const std::string& name, int32_t x, const dlhost_conv2d_attrs& attrs);
  int32_t pool2d(const std::string& name, int32_t x, const dlhost_pool2d_attrs& attrs);
  int32_t activation(const std::string& name, int32_t x, const dlhost_activation_attrs& attrs);
  int32_t softmax_cross_entropy(const std::string& name, int32_t logits, int32_t labels);
  int32_t mse_loss(const std::string& name, int32_t prediction, int32_t target);
  // ABI 1.1
  int32_t batch_norm(const std::string& name, int32_t x, const dlhost_batch_norm_attrs& attrs);
  int32_t dropout(const std::string& name, int32_t x, const dlhost_dropout_attrs& attrs);
  int32_t add(const std::string& name, int32_t x, int32_t y);
  int32_t lrn(const std::string& name, int32_t x, const dlhost_lrn_attrs& attrs);
  int32_t embedding(const std::string& name, int32_t ids, const dlhost_embedding_attrs& attrs);
  int32_t lstm(const std::string& name, int32_t x, const dlhost_lstm_attrs& attrs);
  int32_t global_avg_pool(const std::string& name, int32_t x);
  // ABI 1.4: the Transformer's ops (graph_transformer.cpp)
  int32_t layer_norm(const std::string& name, int32_t x, const dlhost_layer_norm_attrs& attrs);
  int32_t gelu(const std::string& name, int32_t x, const dlhost_gelu_attrs& attrs);
  int32_t attention(const std::string& name, int32_t q, int32_t k, int32_t v,
                    const dlhost_attention_attrs& attrs);
  int32_t position_embedding(const std::string& name, int32_t x,
                             const dlhost_position_embedding_attrs& attrs);
  // `table_of`: the output tensor of the embedding node whose table is tied.
  int32_t tied_fc(const std::string& name, int32_t x, int32_t table_of,
                  const dlhost_tied_fc_attrs& attrs);

  // Checks that exactly one loss exists and returns the graph; the builder is spent.
  std::unique_ptr<Graph> finish();

  // The C table network plugins receive; its `dlhost_graph_builder*` is a GraphBuilder*.
  static const dlhost_builder_api* c_api();
  // Fills the table's ABI 1.4 entries (graph_transformer.cpp).
  static void fill_transformer_entries(dlhost_builder_api& table);
  dlhost_graph_builder* c_handle() { return reinterpret_cast<dlhost_graph_builder*>(this); }

 private:
  int32_t add_tensor(const std::string& name, dlhost_dtype dtype, std::vector<int64_t> dims);
  Graph::NodeStorage& add_node(dlhost_op op, const std::string& name, std::vector<int32_t> inputs);
  int32_t add_param(Graph::NodeStorage& node, dlhost_param_role role, std::vector<int64_t> dims,
                    dlhost_param_init init, int64_t fan_in, int64_t fan_out,
                    const std::string& suffix = "");
  const dlhost_tensor_desc& checked_tensor(const std::string& layer, int32_t id) const;

  std::unique_ptr<Graph> graph_;
};

// Builds network `index` of a network plugin for `batch`. Throws Error with the plugin's name.
std::unique_ptr<Graph> build_network(const LoadedPlugin& plugin, int32_t index, int64_t batch,
                                     const dlhost_options* options);

}  // namespace dlhost
