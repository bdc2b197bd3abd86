// model.h — a graph compiled by cpu_reference: every tensor, gradient, parameter and scratch
// buffer allocated once, and one forward/backward pair of closures per node that call the
// kernels of ops.h on those buffers.
//
// Parameters are stored in the canonical layouts of dlhost_graph.h, so read_param/write_param
// are plain copies and param_buffers hands out the very host memory the kernels use.
// Not thread-safe: the ABI gives a model to one host thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "dlhost/backend_kit.hpp"

namespace cpu_reference {

struct Settings {
  uint64_t seed = 42;   // the dropout masks' seed
  int32_t threads = 1;  // what OpenBLAS was told to use, for model_info
};

// The kit's model interface (dlhost/backend_kit.hpp): plugin.cpp hands it to the host as is.
class Model final : public dlhost::sdk::Model {
 public:
  // Compiles `graph` (borrowed for the call). Throws sdk::Error: UNIMPLEMENTED for an op or
  // attribute it does not know, INVALID_ARGUMENT for a graph that does not hold together.
  Model(const dlhost_graph& graph, const dlhost_optimizer_desc& optimizer,
        const Settings& settings);

  void set_input(int32_t tensor, const void* data, size_t bytes) override;
  void forward() override;
  void backward(const dlhost_grad_ready* ready) override;
  void update() override;
  float loss() const override;

  void param_buffers(int32_t param, dlhost_buffer* value, dlhost_buffer* grad) override;
  void read_param(int32_t param, int32_t part, void* data, size_t bytes) override;
  void write_param(int32_t param, int32_t part, const void* data, size_t bytes) override;

  void read_tensor(int32_t tensor, void* data, size_t bytes) override;

  dlhost::sdk::ModelInfo info() const override;

 private:
  struct Tensor {
    std::string name;
    int32_t dtype = DLHOST_DTYPE_F32;
    std::vector<int64_t> dims;
    int64_t count = 1;
    bool is_input = false;
    std::vector<float> value;  // F32 tensors
    std::vector<float> grad;   // F32 tensors computed by the graph (inputs get none)
    std::vector<int32_t> ids;  // I32 inputs: labels, token ids
  };
  struct Param {
    std::string name;
    int64_t count = 0;
    std::vector<float> value, grad;
    std::vector<float> velocity;          // only with momentum
    std::vector<float> moment1, moment2;  // AdamW's m and v
  };
  // One node lowered: what forward and backward run, and the parameters whose gradients are
  // final once `backward` returns.
  struct Step {
    std::function<void()> forward, backward;
    std::vector<int32_t> params;
  };

  void lower(uint32_t index, const dlhost_node& node);
  void lower_fc(const dlhost_node& node, Step& step);
  void lower_conv2d(const dlhost_node& node, Step& step);
  void lower_pool2d(const dlhost_node& node, Step& step);
  void lower_activation(const dlhost_node& node, Step& step);
  void lower_softmax_cross_entropy(const dlhost_node& node, Step& step);
  void lower_mse_loss(const dlhost_node& node, Step& step);
  void lower_batch_norm(const dlhost_node& node, Step& step);
  void lower_dropout(uint32_t index, const dlhost_node& node, Step& step);
  void lower_add(const dlhost_node& node, Step& step);
  void lower_lrn(const dlhost_node& node, Step& step);
  void lower_embedding(const dlhost_node& node, Step& step);
  void lower_lstm(const dlhost_node& node, Step& step);
  void lower_global_avg_pool(const dlhost_node& node, Step& step);
  // ABI 1.4's Transformer ops (model_transformer.cpp).
  void lower_transformer(uint32_t index, const dlhost_node& node, Step& step);
  void lower_layer_norm(const dlhost_node& node, Step& step);
  void lower_gelu(const dlhost_node& node, Step& step);
  void lower_attention(uint32_t index, const dlhost_node& node, Step& step);
  void lower_position_embedding(const dlhost_node& node, Step& step);
  void lower_tied_fc(const dlhost_node& node, Step& step);
  void adamw_update_all(float grad_scale);

  // Checked accessors used while lowering.
  // The output of `node` has exactly `dims` (what the SDK's geometry computed from its input).
  void expect_output(const dlhost_node& node, std::initializer_list<int64_t> dims) const;
  const Tensor& tensor(int32_t id) const;
  float* value(int32_t tensor_id);
  float* grad(int32_t tensor_id);  // null when the tensor takes no gradient
  const int32_t* ids(int32_t tensor_id);
  Param& param(int32_t id);
  std::vector<float>& part(int32_t param_id, int32_t part, size_t bytes);

  // Zero-filled buffers owned by the model for a kernel's saved state or scratch. Deques keep
  // every buffer where it is as more are added, so the closures may hold raw pointers.
  float* scratch_floats(int64_t count);
  double* scratch_doubles(int64_t count, double fill);
  int64_t* scratch_indices(int64_t count);

  const dlhost_graph* graph_ = nullptr;  // the graph being compiled: borrowed, null afterwards
  std::vector<Tensor> tensors_;
  std::vector<Param> params_;
  std::vector<Step> steps_;
  std::vector<int32_t> step_of_node_;  // index into steps_ per node; -1 for inputs
  std::deque<std::vector<float>> float_scratch_;
  std::deque<std::vector<double>> double_scratch_;
  std::deque<std::vector<int64_t>> index_scratch_;

  int32_t loss_tensor_ = -1;
  float learning_rate_ = 0, momentum_ = 0, weight_decay_ = 0, clip_norm_ = 0;
  int32_t optimizer_kind_ = DLHOST_OPTIMIZER_SGD;
  float beta1_ = 0.9f, beta2_ = 0.999f, adam_epsilon_ = 1e-8f;
  uint64_t updates_ = 0;  // AdamW's t
  Settings settings_;
  uint64_t forward_calls_ = 0;  // the dropout mask's `step`
  uint64_t param_bytes_ = 0, workspace_bytes_ = 0;
  std::string implementation_;
};

}  // namespace cpu_reference
