// cpu_kit.hpp — what a CPU backend on host memory writes again otherwise, so that it is its
// kernels plus a few lines:
// - the SGD update with global norm clipping, weight decay and momentum, in the order
//   dlhost_backend.h documents beside dlhost_optimizer_desc (the order cpu_reference uses, which
//   `dlhost conform` compares against): sum_of_squares, clip_scale, sgd_step;
// - CpuModel, an sdk::Model that owns every tensor and parameter of the graph in host memory
//   (F32 values with their gradients, I32 ids) and implements set_input, the parameter reads and
//   writes, param_buffers, read_tensor, loss, info and the SGD update with the checks the ABI
//   asks for. The backend derives from it and writes forward() and backward() (its kernels).
//
//   class MyModel final : public sdk::CpuModel {
//    public:
//     MyModel(const dlhost_graph& g, const dlhost_optimizer_desc& o) : CpuModel(g, o) { ... }
//     void forward() override { ... tensor(id).value ... param(id).value ... }
//     void backward(const dlhost_grad_ready* ready) override {
//       begin_backward();  // every gradient zeroed, d loss = 1
//       ... for each node in reverse: its kernel, then grad_ready(ready, its params) ...
//     }
//   };
//
// Header-only, compiled into the plugin; nothing crosses the ABI. The free functions are pure and
// thread-safe; a CpuModel is used from one host thread at a time (the ABI's rule).
#ifndef DLHOST_CPU_KIT_HPP
#define DLHOST_CPU_KIT_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "dlhost/framework_kit.hpp"  // the ABI arguments' checks

namespace dlhost::sdk {

// The sum of squares of one gradient, in double (the global norm adds every parameter's).
inline double sum_of_squares(const float* grad, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(grad[i]) * grad[i];
  return s;
}

// Step 1, clipping: min(1, clip_norm / ||g||) over every parameter's raw gradient (weight decay
// not included); 1 when clip_norm is 0 (off).
inline double clip_scale(double sum_of_squares_all, float clip_norm) {
  if (clip_norm <= 0.0f) return 1.0;
  const double norm = std::sqrt(sum_of_squares_all);
  return norm > clip_norm ? clip_norm / norm : 1.0;
}

// Steps 2-4 for one parameter of `n` elements: step = scale g + weight_decay w; with momentum
// (velocity not NULL) v = momentum v + step, step = v; w -= learning_rate step.
inline void sgd_step(const dlhost_optimizer_desc& opt, double scale, const float* grad,
                     float* value, float* velocity, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float step = float(scale) * grad[i] + opt.weight_decay * value[i];
    if (velocity != nullptr) step = velocity[i] = opt.momentum * velocity[i] + step;
    value[i] -= opt.learning_rate * step;
  }
}

// A graph tensor in host memory: F32 values and their gradients, or I32 ids (labels, tokens).
struct HostTensor {
  std::string name;
  int32_t dtype = DLHOST_DTYPE_F32;
  std::vector<int64_t> dims;
  std::vector<float> value, grad;  // F32 only
  std::vector<int32_t> ids;        // I32 only
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

// A parameter in host memory: its value, its gradient, and the momentum velocity (empty when
// momentum is 0).
struct HostParam {
  std::vector<float> value, grad, velocity;
};

// A compiled graph whose every buffer is host memory, allocated at construction (see the top of
// this file). Error messages name the plugin (PluginInfo::name).
class CpuModel : public Model {
 public:
  CpuModel(const dlhost_graph& graph, const dlhost_optimizer_desc& optimizer)
      : optimizer_(optimizer), loss_(graph.loss) {
    if (optimizer.kind != DLHOST_OPTIMIZER_SGD)
      unimplemented(who() + "the CPU kit's update is SGD only (optimizer kind " +
                    std::to_string(optimizer.kind) + ")");
    for (int32_t t = 0; t < graph.num_tensors; ++t) add_tensor(*graph.tensors[t]);
    const bool momentum = optimizer.momentum != 0.0f;
    for (int32_t p = 0; p < graph.num_params; ++p) {
      const auto n = static_cast<size_t>(graph.params[p]->count);
      params_.push_back(
          {std::vector<float>(n), std::vector<float>(n), std::vector<float>(momentum ? n : 0)});
      param_bytes_ += n * 4;
      workspace_bytes_ += n * 4 * (momentum ? 2 : 1);
    }
    inputs_.assign(graph.inputs, graph.inputs + graph.num_inputs);
    if (loss_ < 0 || loss_ >= graph.num_tensors || tensor(loss_).value.empty())
      invalid(who() + "the graph's loss is not an F32 tensor");
  }

  // Copies exactly the input's bytes (F32 values or I32 ids) into its tensor.
  void set_input(int32_t id, const void* data, size_t bytes) override {
    if (std::find(inputs_.begin(), inputs_.end(), id) == inputs_.end())
      invalid(who() + "set_input: tensor " + std::to_string(id) + " is not an input");
    HostTensor& t = tensor(id);
    void* dst = t.ids.empty() ? static_cast<void*>(t.value.data()) : t.ids.data();
    std::memcpy(dst, checked(data, bytes, static_cast<size_t>(t.count()) * 4, t.name), bytes);
  }

  // Clipping on the raw gradients, weight decay, momentum (dlhost_backend.h's order).
  void update() override {
    double sum = 0;
    for (const HostParam& p : params_) sum += sum_of_squares(p.grad.data(), p.grad.size());
    const double scale = clip_scale(sum, optimizer_.clip_norm);
    for (HostParam& p : params_)
      sgd_step(optimizer_, scale, p.grad.data(), p.value.data(),
               p.velocity.empty() ? nullptr : p.velocity.data(), p.value.size());
  }

  float loss() const override { return tensors_[static_cast<size_t>(loss_)].value[0]; }

  void param_buffers(int32_t id, dlhost_buffer* value, dlhost_buffer* grad) override {
    HostParam& p = param(id);
    host_buffer(value, p.value.data(), p.value.size());
    host_buffer(grad, p.grad.data(), p.grad.size());
  }
  void read_param(int32_t id, int32_t part, void* data, size_t bytes) override {
    const std::vector<float>& v = part_of(id, part);
    std::memcpy(checked(data, bytes, v.size() * 4, "parameter " + num(id)), v.data(), bytes);
  }
  void write_param(int32_t id, int32_t part, const void* data, size_t bytes) override {
    std::vector<float>& v = part_of(id, part);
    std::memcpy(v.data(), checked(data, bytes, v.size() * 4, "parameter " + num(id)), bytes);
  }
  void read_tensor(int32_t id, void* data, size_t bytes) override {
    if (id < 0 || static_cast<size_t>(id) >= tensors_.size() || tensor(id).value.empty())
      invalid(who() + "read_tensor: tensor " + num(id) + " is not an F32 tensor of the graph");
    const HostTensor& t = tensor(id);
    std::memcpy(checked(data, bytes, t.value.size() * 4, t.name), t.value.data(), bytes);
  }

  ModelInfo info() const override {
    ModelInfo i;
    i.threads = threads_;
    i.implementation = implementation_;
    i.param_bytes = param_bytes_;
    i.workspace_bytes = workspace_bytes_;
    return i;
  }

 protected:
  HostTensor& tensor(int32_t id) { return tensors_.at(static_cast<size_t>(id)); }
  const HostTensor& tensor(int32_t id) const { return tensors_.at(static_cast<size_t>(id)); }
  HostParam& param(int32_t id) { return params_[param_index(id, params_.size())]; }
  const dlhost_optimizer_desc& optimizer() const { return optimizer_; }

  // The start of every backward: gradients are overwritten, not accumulated (dlhost_backend.h),
  // so every tensor's gradient is zeroed and the loss's seeded with 1.
  void begin_backward() {
    for (HostTensor& t : tensors_) std::fill(t.grad.begin(), t.grad.end(), 0.0f);
    tensors_[static_cast<size_t>(loss_)].grad[0] = 1.0f;
  }
  // Tells the host that the gradients of `params` are final (it may all-reduce them now).
  static void grad_ready(const dlhost_grad_ready* ready, const std::vector<int32_t>& params) {
    if (ready == nullptr || ready->fn == nullptr) return;
    for (int32_t p : params) ready->fn(ready->user, p);
  }

  const char* implementation_ = "loops";  // model_info's line; must outlive the model
  int32_t threads_ = 1;

 private:
  static std::string who() { return std::string(detail::plugin_name()) + ": "; }
  static std::string num(int64_t v) { return std::to_string(v); }
  void add_tensor(const dlhost_tensor_desc& d) {
    HostTensor t;
    t.name = d.name != nullptr ? d.name : "?";
    t.dtype = d.dtype;
    t.dims.assign(d.dims, d.dims + d.rank);
    const auto n = static_cast<size_t>(t.count());
    if (d.dtype == DLHOST_DTYPE_I32) {
      t.ids.resize(n);
    } else if (d.dtype == DLHOST_DTYPE_F32) {
      t.value.resize(n);
      t.grad.resize(n);
    } else {
      unimplemented(who() + "tensor '" + t.name + "' is not F32 or I32");
    }
    workspace_bytes_ += n * (t.ids.empty() ? 8 : 4);
    tensors_.push_back(std::move(t));
  }
  // `data` when it is not NULL and `bytes` is exactly `want`; INVALID_ARGUMENT naming `what`.
  template <class T>
  static T* checked(T* data, size_t bytes, size_t want, const std::string& what) {
    expect_bytes(what, data != nullptr, bytes, want);
    return data;
  }
  std::vector<float>& part_of(int32_t id, int32_t part) {
    HostParam& p = param(id);
    expect_param_part(part);
    return part == DLHOST_PARAM_VALUE ? p.value : p.grad;
  }

  dlhost_optimizer_desc optimizer_;
  int32_t loss_;
  std::vector<HostTensor> tensors_;
  std::vector<HostParam> params_;
  std::vector<int32_t> inputs_;
  uint64_t param_bytes_ = 0, workspace_bytes_ = 0;
};

}  // namespace dlhost::sdk

#endif  // DLHOST_CPU_KIT_HPP
