// model.cpp — the compiled training graph of cpu_libtorch (the kit's sdk::Model): persistent
// input and parameter tensors, one ATen closure per node (ops.cpp), backward through autograd and
// the update through torch::optim::SGD or AdamW (optimizer.cpp).
//
// What the ABI pins and how it is kept with a framework underneath:
// - parameter buffers (param_buffers, all-reduce in place): every parameter is a leaf tensor in
//   the canonical layout whose grad() is made at compile; backward zeroes it and autograd
//   accumulates into it in place, so neither pointer ever moves;
// - "backward overwrites": the zeroing above, except where an FC writes its weight and bias
//   gradients into grad() itself (ops.cpp, Lowering::fc: no zero pass, no add, no fresh tensor per
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
#include "dlhost/common.hpp"
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

#if TORCH_VERSION_MAJOR >= 2
// Run by autograd's AccumulateGrad right after it added a leaf's gradient into grad(): the
// parameter appears once in the graph, so its gradient is then final.
struct NotifyWhenAccumulated final : torch::autograd::PostAccumulateGradHook {
  NotifyWhenAccumulated(sdk::GradReadyNotices* n, int32_t p) : notices(n), param(p) {}
  void operator()(const torch::autograd::Variable&) override { notices->final(param); }
  sdk::GradReadyNotices* notices;
  int32_t param;
};
#endif

class TorchModel final : public sdk::Model, public RuntimeHost {
 public:
  TorchModel(const Context& context, const dlhost_graph& g, const dlhost_optimizer_desc& opt,
             const sdk::HostSettings& host, bool plain_autograd)
      : context_(context),
        seed_(uint64_t(host.seed)),
        plain_autograd_(plain_autograd),
        table_(g),
        ids_(g) {
    context_.apply_threads();
    for (int32_t t = 0; t < g.num_tensors; ++t) values_.emplace_back();
    make_inputs(g);
    make_params(g);
    for (int32_t k = 0; k < g.num_nodes; ++k) make_node(g, k);
    loss_id_ = g.loss;
    optimizer_ = std::make_unique<Optimizer>(params_, opt);
    notices_.expect(table_.ready_order());
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
    auto ids = id_staging_.find(tensor);
    at::Tensor raw = ids == id_staging_.end() ? target : ids->second;
    sdk::expect_bytes("input " + std::to_string(tensor), data != nullptr, bytes, raw.nbytes());
    if (ids != id_staging_.end())
      ids_.check(tensor, static_cast<const int32_t*>(data), size_t(raw.numel()));
    std::memcpy(raw.data_ptr(), data, bytes);
    if (ids != id_staging_.end()) target.copy_(raw);
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
    at::Tensor& p = params_[table_.index(id)];
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
        id_staging_[d.id] = at::zeros(dims, at::kInt);
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
    // Without the two hooks an FC goes through autograd like every other op.
    const LowerEnv env{g,
                       params_,
                       seed_,
                       &forward_calls_,
                       plain_autograd_ ? nullptr : &writes_own_grad_,
                       plain_autograd_ ? nullptr : &gradient_written_};
    steps_.push_back({n.output, lower_node(env, k)});
    const dlhost_tensor_desc& out = *g.tensors[n.output];
    int64_t elements = 1;
    for (int32_t d = 0; d < out.rank; ++d) elements *= out.dims[d];
    workspace_bytes_ += uint64_t(elements) * 8;  // the activation and its gradient, F32
  }

  const at::Tensor& input(int32_t tensor) const {
    for (int32_t id : inputs_)
      if (id == tensor) return values_[size_t(id)];
    sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": tensor " + std::to_string(tensor) +
                 " is not an input");
  }
  void* part_of(int32_t id, int32_t part, const void* data, size_t bytes) {
    at::Tensor& p = params_[table_.access(id, part, data, bytes)];
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
  sdk::ParamTable table_;  // id bounds, sizes, the grad-ready order
  sdk::IdInputs ids_;      // labels and token ids, checked at set_input
  uint64_t forward_calls_ = 0;
  Values values_;
  std::vector<int32_t> inputs_;
  // I32 inputs (labels, token ids) as the host gives them: ATen's losses and embedding index
  // with I64, so set_input checks the ids (ids_) and widens them into values_.
  std::map<int32_t, at::Tensor> id_staging_;
  std::vector<at::Tensor> params_;
  std::vector<Step> steps_;
  std::unique_ptr<Optimizer> optimizer_;
  sdk::GradReadyNotices notices_;
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
                                          const dlhost_optimizer_desc& optimizer,
                                          const sdk::HostSettings& host, bool plain_autograd) {
  return with_torch("compile", [&]() -> std::unique_ptr<sdk::Model> {
    return std::make_unique<TorchModel>(context, graph, optimizer, host, plain_autograd);
  });
}

}  // namespace dlhost::cpu_libtorch
