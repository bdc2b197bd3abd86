// model.cpp — the compiled training graph of cpu_libtorch (the kit's sdk::Model): persistent
// input and parameter tensors, one ATen closure per node (ops.cpp), backward through autograd and
// the update through torch::optim::SGD or AdamW (optimizer.cpp).
//
// What the ABI pins and how it is kept with a framework underneath:
// - parameter buffers (param_buffers, all-reduce in place): every parameter is a leaf tensor in
//   the canonical layout whose grad() is made at compile; backward zeroes it and autograd
//   accumulates into it in place, so neither pointer ever moves;
// - "backward overwrites": the zeroing above, except where an FC writes its weight and bias
//   gradients into grad() itself (ops.cpp, lower_fc: no zero pass, no add, no fresh tensor per
//   step; a reached FC's notice goes out as it writes them); grad-ready notices go out in reverse
//   layer order: with libtorch 2.x during backward, from a post-accumulate-grad hook on each leaf
//   (the host's all-reduce overlaps the rest of backward); with 1.13, which has no such hook, once
//   autograd returns;
// - allocation: ATen allocates activations and autograd's saved tensors per step, as PyTorch
//   does; the inputs, parameters, gradients, running statistics and dropout masks are made once.
// Thread-safety: one host thread at a time per model; ATen, oneDNN and OpenBLAS parallelize
// inside the calls.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#endif

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "backend.h"
#include "dlhost/dlhost.hpp"
#include "dlhost/graph_access.hpp"
#include "ops.h"
#include "optimizer.h"
#include "tool_runtime.h"

namespace dlhost::cpu_libtorch {
namespace {

namespace sdk = dlhost::sdk;

// Runs `body`; a c10::Error (ATen's checks) becomes INTERNAL naming the call, without the C++
// backtrace ATen appends, or RESOURCE_EXHAUSTED when it is the CPU allocator refusing memory
// ("DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes", an enforce of
// 1.13 and 2.x alike, not c10::OutOfMemoryError): the case is then OOM, not a plugin's fault.
template <class Body>
auto with_torch(const char* call, Body&& body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    const bool oom = dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr ||
                     what.find("DefaultCPUAllocator") != std::string::npos;
    sdk::fail(oom ? DLHOST_CODE_RESOURCE_EXHAUSTED : DLHOST_CODE_INTERNAL,
              std::string(DLHOST_TORCH_PLUGIN_NAME ": ") + call + ": " + what);
  }
}

// An I32 input the host feeds (labels, token ids): ATen's losses and embedding index with I64,
// so set_input widens into `value`; `limit` is the exclusive bound its consumer needs.
struct IdInput {
  at::Tensor staging;  // I32, the bytes as given
  int64_t limit = 0;   // 0: no consumer checks a range
  std::string what;    // "labels of 'loss'", for the error
};

// Grad-ready notices in the ABI's order (reverse layer order), each as soon as every parameter
// before it in that order is final: autograd finishes a layer's weight and bias, and a ResNet's
// two branches, in the order of its own queue.
class ReadyNotices {
 public:
  void expect(std::vector<int32_t> order, size_t num_params) {
    order_ = std::move(order);
    final_.assign(num_params, false);
  }
  void begin(const dlhost_grad_ready* ready) {
    ready_ = ready != nullptr && ready->fn != nullptr ? ready : nullptr;
    std::fill(final_.begin(), final_.end(), false);
    next_ = 0;
  }
  // Called on the thread that runs backward (CPU autograd runs its nodes there).
  void final(int32_t param) {
    final_[size_t(param)] = true;
    for (; next_ < order_.size() && final_[size_t(order_[next_])]; ++next_)
      if (ready_ != nullptr) ready_->fn(ready_->user, order_[next_]);
  }
  // After backward: the rest (all of them without hooks; a parameter autograd never reached
  // keeps its zeroed gradient, which is then final too).
  void finish() {
    for (size_t p = 0; p < final_.size(); ++p) final(int32_t(p));
    ready_ = nullptr;
  }

 private:
  std::vector<int32_t> order_;
  std::vector<bool> final_;
  size_t next_ = 0;
  const dlhost_grad_ready* ready_ = nullptr;
};

#if TORCH_VERSION_MAJOR >= 2
// Run by autograd's AccumulateGrad right after it added a leaf's gradient into grad(): the
// parameter appears once in the graph, so its gradient is then final.
struct NotifyWhenAccumulated final : torch::autograd::PostAccumulateGradHook {
  NotifyWhenAccumulated(ReadyNotices* n, int32_t p) : notices(n), param(p) {}
  void operator()(const torch::autograd::Variable&) override { notices->final(param); }
  ReadyNotices* notices;
  int32_t param;
};
#endif

class TorchModel final : public sdk::Model, public RuntimeHost {
 public:
  TorchModel(const Context& context, const dlhost_graph& g, const dlhost_optimizer_desc& opt,
             uint64_t seed, bool plain_autograd)
      : context_(context), seed_(seed), plain_autograd_(plain_autograd) {
    context_.apply_threads();
    for (int32_t t = 0; t < g.num_tensors; ++t) values_.emplace_back();
    make_inputs(g);
    make_params(g);
    for (int32_t k = 0; k < g.num_nodes; ++k) make_node(g, k);
    loss_id_ = g.loss;
    optimizer_ = std::make_unique<Optimizer>(params_, opt);
    std::vector<int32_t> order;
    for (auto s = steps_.rbegin(); s != steps_.rend(); ++s)
      order.insert(order.end(), s->params.begin(), s->params.end());
    notices_.expect(std::move(order), params_.size());
    implementation_ =
        "ATen ops (conv: ATen's choice of oneDNN or native; linear: " + blas_library() +
        " sgemm), autograd backward (FC: weight and bias gradients written into the gradient "
        "buffers), " +
        optimizer_->name();
#if TORCH_VERSION_MAJOR >= 2
    for (size_t p = 0; p < params_.size(); ++p)
      torch::autograd::impl::set_post_acc_grad_hooks(
          params_[p], std::make_unique<NotifyWhenAccumulated>(&notices_, int32_t(p)));
#endif
  }

  void set_input(int32_t tensor, const void* data, size_t bytes) override {
    const at::Tensor& target = input(tensor);
    auto ids = id_inputs_.find(tensor);
    at::Tensor raw = ids == id_inputs_.end() ? target : ids->second.staging;
    if (data == nullptr || bytes != raw.nbytes())
      sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": input " + std::to_string(tensor) + " takes " +
                   std::to_string(raw.nbytes()) + " bytes, got " + std::to_string(bytes));
    std::memcpy(raw.data_ptr(), data, bytes);
    if (ids != id_inputs_.end()) widen_ids(ids->second, target);
  }

  void forward() override {
    context_.apply_threads();
    with_torch("forward", [&] {
      for (const Step& s : steps_) values_[size_t(s.out)] = s.fn(values_);
    });
    ++forward_calls_;
  }

  void backward(const dlhost_grad_ready* ready) override {
    context_.apply_threads();
    notices_.begin(ready);
    with_torch("backward", [&] {
      std::fill(written_.begin(), written_.end(), false);
      for (size_t p = 0; p < params_.size(); ++p)
        if (!writes_own_grad_[p]) params_[p].mutable_grad().zero_();
      // A tool runtime (tool_runtime.h) arms its gradient hooks for this backward.
      if (runtime_) runtime_->before_backward(values_[size_t(loss_id_)]);
      values_[size_t(loss_id_)].backward();
      // An op that writes its own gradients but was not reached: the ABI's "overwrites".
      for (size_t p = 0; p < params_.size(); ++p)
        if (writes_own_grad_[p] && !written_[p]) params_[p].mutable_grad().zero_();
    });
    notices_.finish();
  }

  void update() override {
    context_.apply_threads();
    with_torch("update", [&] { optimizer_->step(); });
  }

  float loss() const override {
    const at::Tensor& l = values_[size_t(loss_id_)];
    if (!l.defined())
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, DLHOST_TORCH_PLUGIN_NAME ": no forward yet");
    return l.item<float>();
  }

  void param_buffers(int32_t id, dlhost_buffer* value, dlhost_buffer* grad) override {
    at::Tensor& p = param(id);
    sdk::host_buffer(value, p.data_ptr<float>(), size_t(p.numel()));
    sdk::host_buffer(grad, p.mutable_grad().data_ptr<float>(), size_t(p.numel()));
  }
  void read_param(int32_t id, int32_t part, void* data, size_t bytes) override {
    std::memcpy(data, part_of(id, part, data, bytes), bytes);
  }
  void write_param(int32_t id, int32_t part, const void* data, size_t bytes) override {
    std::memcpy(part_of(id, part, data, bytes), data, bytes);
  }

  std::vector<at::Tensor>& parameters() override { return params_; }
  void set_runtime(std::unique_ptr<ModelRuntime> runtime) override {
    runtime_ = std::move(runtime);
  }
  ModelRuntime* runtime() const override { return runtime_.get(); }

  sdk::ModelInfo info() const override {
    sdk::ModelInfo i;
    i.threads = context_.threads;
    i.implementation = implementation_.c_str();
    i.param_bytes = param_bytes() + optimizer_->state_bytes();
    i.workspace_bytes = workspace_bytes_;
    return i;
  }
  // What the model holds between steps: parameters, gradients, momentum, inputs and the last
  // forward's activations.
  uint64_t memory_in_use() const override {
    uint64_t bytes = param_bytes() + optimizer_->state_bytes();
    for (const at::Tensor& t : values_)
      if (t.defined()) bytes += t.nbytes();
    return bytes;
  }

 private:
  struct Step {
    int32_t out;
    std::vector<int32_t> params;
    NodeForward fn;
  };

  void make_inputs(const dlhost_graph& g) {
    for (int32_t k = 0; k < g.num_inputs; ++k) {
      const dlhost_tensor_desc& d = *g.tensors[g.inputs[k]];
      const std::vector<int64_t> dims(d.dims, d.dims + d.rank);
      if (d.dtype == DLHOST_DTYPE_F32) {
        values_[size_t(d.id)] = at::zeros(dims);
      } else if (d.dtype == DLHOST_DTYPE_I32) {
        values_[size_t(d.id)] = at::zeros(dims, at::kLong);
        id_inputs_[d.id] = {at::zeros(dims, at::kInt), 0, "input '" + std::string(d.name) + "'"};
      } else {
        sdk::unimplemented(DLHOST_TORCH_PLUGIN_NAME ": input '" + std::string(d.name) +
                           "' is not F32 or I32");
      }
      workspace_bytes_ += values_[size_t(d.id)].nbytes();
      inputs_.push_back(d.id);
    }
  }

  void make_params(const dlhost_graph& g) {
    for (int32_t k = 0; k < g.num_params; ++k) {
      const dlhost_param_desc& d = *g.params[k];
      at::Tensor p = at::zeros(std::vector<int64_t>(d.dims, d.dims + d.rank)).requires_grad_();
      p.mutable_grad() = at::zeros_like(p);
      params_.push_back(std::move(p));
    }
    writes_own_grad_.assign(params_.size(), false);
    written_.assign(params_.size(), false);
  }

  void make_node(const dlhost_graph& g, int32_t k) {
    const dlhost_node& n = *g.nodes[k];
    if (n.op == DLHOST_OP_INPUT) return;
    if (n.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY)
      bound_ids(n.inputs[1], g.tensors[n.inputs[0]]->dims[g.tensors[n.inputs[0]]->rank - 1]);
    if (n.op == DLHOST_OP_EMBEDDING)
      bound_ids(n.inputs[0], sdk::node_attrs<dlhost_embedding_attrs>(n).vocab);
    // Without the two hooks an FC goes through autograd like every other op.
    const LowerEnv env{g,
                       params_,
                       seed_,
                       &forward_calls_,
                       plain_autograd_ ? nullptr : &writes_own_grad_,
                       plain_autograd_ ? nullptr : &gradient_written_};
    // Only the parameters the node owns: a tied table (ABI 1.4) is listed, and ready, once.
    std::vector<int32_t> owned;
    for (int32_t p = 0; p < n.num_params; ++p)
      if (g.params[n.params[p]]->node == k) owned.push_back(n.params[p]);
    steps_.push_back({n.output, std::move(owned), lower_node(env, k)});
    const dlhost_tensor_desc& out = *g.tensors[n.output];
    int64_t elements = 1;
    for (int32_t d = 0; d < out.rank; ++d) elements *= out.dims[d];
    workspace_bytes_ += uint64_t(elements) * 8;  // the activation and its gradient, F32
  }

  void bound_ids(int32_t tensor, int64_t limit) {
    auto ids = id_inputs_.find(tensor);
    if (ids != id_inputs_.end()) ids->second.limit = limit;
  }

  static void widen_ids(const IdInput& ids, const at::Tensor& target) {
    const int32_t* p = ids.staging.data_ptr<int32_t>();
    for (int64_t i = 0; ids.limit > 0 && i < ids.staging.numel(); ++i)
      if (p[i] < 0 || p[i] >= ids.limit)
        sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": " + ids.what + ": id " + std::to_string(p[i]) +
                     " at position " + std::to_string(i) + " is outside [0, " +
                     std::to_string(ids.limit) + ")");
    target.copy_(ids.staging);
  }

  const at::Tensor& input(int32_t tensor) const {
    for (int32_t id : inputs_)
      if (id == tensor) return values_[size_t(id)];
    sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": tensor " + std::to_string(tensor) +
                 " is not an input");
  }
  at::Tensor& param(int32_t id) {
    if (id < 0 || size_t(id) >= params_.size())
      sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": no parameter " + std::to_string(id));
    return params_[size_t(id)];
  }
  void* part_of(int32_t id, int32_t part, const void* data, size_t bytes) {
    at::Tensor& p = param(id);
    if (data == nullptr || bytes != p.nbytes())
      sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": parameter " + std::to_string(id) + " takes " +
                   std::to_string(p.nbytes()) + " bytes, got " + std::to_string(bytes));
    if (part != DLHOST_PARAM_VALUE && part != DLHOST_PARAM_GRAD)
      sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": unknown parameter part " + std::to_string(part));
    return part == DLHOST_PARAM_VALUE ? p.data_ptr() : p.mutable_grad().data_ptr();
  }
  uint64_t param_bytes() const {
    uint64_t bytes = 0;
    for (const at::Tensor& p : params_) bytes += 2 * p.nbytes();  // value and gradient
    return bytes;
  }

  Context context_;
  uint64_t seed_;
  bool plain_autograd_;
  uint64_t forward_calls_ = 0;
  Values values_;
  std::vector<int32_t> inputs_;
  std::map<int32_t, IdInput> id_inputs_;
  std::vector<at::Tensor> params_;
  std::vector<Step> steps_;
  std::unique_ptr<Optimizer> optimizer_;
  ReadyNotices notices_;
  // Parameters whose op writes grad() itself in backward (ops.h, LowerEnv), and which of them
  // it wrote in the running backward; the callback the ops call, alive as long as the model.
  std::vector<bool> writes_own_grad_;
  std::vector<bool> written_;
  const std::function<void(int32_t)> gradient_written_ = [this](int32_t p) {
    written_[size_t(p)] = true;
    notices_.final(p);
  };
  std::string implementation_;
  int32_t loss_id_ = -1;
  uint64_t workspace_bytes_ = 0;
  // Last, so that it goes first: its hooks sit on the parameters' gradient accumulators.
  std::unique_ptr<ModelRuntime> runtime_;
};

}  // namespace

RuntimeHost* runtime_host(sdk::Model& model) { return dynamic_cast<TorchModel*>(&model); }

std::unique_ptr<sdk::Model> compile_model(const Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer, uint64_t seed,
                                          bool plain_autograd) {
  if (optimizer.kind != DLHOST_OPTIMIZER_SGD && optimizer.kind != DLHOST_OPTIMIZER_ADAMW)
    sdk::unimplemented(DLHOST_TORCH_PLUGIN_NAME ": optimizer kind " +
                       std::to_string(optimizer.kind) + " not supported");
  if (optimizer.momentum < 0 || optimizer.clip_norm < 0 || optimizer.weight_decay < 0)
    sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": negative momentum, weight_decay or clip_norm");
  return with_torch("compile", [&]() -> std::unique_ptr<sdk::Model> {
    return std::make_unique<TorchModel>(context, graph, optimizer, seed, plain_autograd);
  });
}

}  // namespace dlhost::cpu_libtorch
