// model.cpp — the compiled training graph of cpu_tensorflow (the kit's sdk::Model): one
// TensorFlow graph (lower.cpp's forward and backward, optimizer.cpp's update) in one session,
// and the ABI's calls as TF_SessionRun calls on it.
//
// A step is two runs, or one when the host passes fused_step (ABI 1.4: nothing reads the
// gradients between backward and update): forward's run then also runs the apply ops wired to
// the TF_AddGradients outputs, and backward and update return at once (the gradient buffers are
// then not filled: the host promised not to read them). Unfused: forward runs the loss and every
// gradient at once (TensorFlow's graph executor keeps no activation between two runs, so the
// backward cannot be a run of its own; see README.md for the partial-run alternative and why it
// lost); backward only publishes the gradients it fetched; update feeds them (or what the host left
// in its buffers) to the optimizer's placeholders and runs the apply ops, which update the
// variables in place.
//
// Parameter buffers (param_buffers, for data-parallel runs) are plugin-owned, 64-byte aligned and
// in TensorFlow's layout: the gradient buffer receives each forward's gradients and update feeds it
// without a copy (TF_NewTensor over it); the value buffer is a staging area: filled from the
// variable when param_buffers is called, assigned back into the variable before the next run that
// reads it (the host broadcasts rank 0's weights into it before the first step); it is not kept
// current after updates. Without param_buffers nothing is copied: the fetched gradient tensors are
// fed back as they are.
//
// A tool runtime (tool_runtime.h, ABI 1.5: `comm: tf_collective`) replaces the fetched gradients
// in backward, before it returns, by what the update is to apply (their mean over the ranks);
// `tf_ps` pulls the variables before each forward and pushes the gradients in backward, and the
// update is then the parameter servers'.
// Thread-safety: one host thread at a time per model; TensorFlow's pools run the ops.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "dlhost/common.hpp"
#include "lower.h"
#include "optimizer.h"
#include "tf_api.h"
#include "tool_runtime.h"

namespace dlhost::cpu_tensorflow {
namespace {

namespace sdk = dlhost::sdk;

// 64-byte aligned floats: TensorFlow borrows memory so aligned without copying it.
struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedFree>;
AlignedFloats aligned_floats(int64_t count) {
  const size_t bytes = (static_cast<size_t>(count) * sizeof(float) + 63) / 64 * 64;
  auto* p = static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return AlignedFloats(p);
}

float* data_of(const tf::TensorPtr& t) { return static_cast<float*>(TF_TensorData(t.get())); }

// ABI 1.5 model_info departure lines of the SGD update (docs/frameworks.md): with momentum and
// without, each a fused TensorFlow kernel where Keras 3's SGD runs separate ops.
constexpr const char* kMomentumDeparture =
    "SGD update: ResourceApplyMomentum, TensorFlow's fused kernel (one op a variable), not Keras "
    "3's SGD, whose momentum update is separate TensorFlow ops per variable (m = momentum * m - "
    "lr * g; v += m; the same rule): Keras's own autoencoder step at b100, 2 threads, 22.8 CPU "
    "ms with its SGD against 18.5 with ResourceApplyMomentum (25.2 against 20.9 at 1 thread; "
    "bench/probe/tf_keras_paths.py). "
    "Measured 2026-12-06 on a 2-core Xeon with AVX-512 under load "
    "(bench/results/2026-12-06-quiet-fairness)";
constexpr const char* kGradientDescentDeparture =
    "SGD update: ResourceApplyGradientDescent, TensorFlow's fused kernel (v -= lr * g, one op a "
    "variable), not Keras 3's SGD without momentum, which runs a Mul (g * lr into a new tensor) "
    "and an AssignSubVariableOp per variable (the same rule, twice the passes over the "
    "parameters): Keras's own FCN-5 step at b64, 1 thread, 573 ms with its SGD against 517 with "
    "ResourceApplyGradientDescent (bench/probe/tf_keras_paths.py, 4 rounds); in the profile "
    "(bench/probe/perf_pair.py) 71 CPU ms a step in dlhost's kernel against 70 + 47 in Keras's "
    "two: most of the row's gap (0.87-0.92 in the quiet tables). Measured 2026-12-07 on a quiet "
    "2-core Xeon with AVX-512 "
    "(bench/results/2026-12-07-sgd-update)";

class TfModel final : public sdk::Model, public RuntimeHost {
 public:
  TfModel(const Context& context, const dlhost_graph& g, const dlhost_optimizer_desc& opt,
          const sdk::HostSettings& host)
      : context_(context),
        optimizer_(opt),
        seed_(uint64_t(host.seed)),
        fused_(host.fused_step),
        params_(g),
        ids_(g),
        graph_(TF_NewGraph()) {
    lowered_ = lower_graph(graph_.get(), g);
    update_ = add_update(graph_.get(), lowered_, opt, fused_);
    tf::Op init(graph_.get(), "NoOp", "initialize");
    for (TF_Operation* op : lowered_.initializers) init.after(op);
    tf::Op state(graph_.get(), "NoOp", "forward_state");
    for (TF_Operation* op : lowered_.state_updates) state.after(op);
    forward_targets_ = {state.finish()};
    if (fused_) forward_targets_.push_back(update_.step);
    session_ = std::make_unique<tf::Session>(
        graph_.get(),
        tf::config_proto(context.host.threads, context.inter_op_threads, context.xla));
    run({}, {}, {}, {init.finish()}, "initializing the variables");
    for (const InputFeed& f : lowered_.inputs) {
      inputs_.push_back(f.dtype == TF_FLOAT ? tf::float_tensor(f.dims) : tf::int_tensor(f.dims));
      std::memset(TF_TensorData(inputs_.back().get()), 0, TF_TensorByteSize(inputs_.back().get()));
      workspace_bytes_ += TF_TensorByteSize(inputs_.back().get());
    }
    for (const DropoutFeed& d : lowered_.dropouts) masks_.push_back(tf::float_tensor(d.dims));
    for (const Variable& v : lowered_.params) {
      grads_.push_back(tf::float_tensor(v.dims));
      std::memset(data_of(grads_.back()), 0, size_t(v.count) * sizeof(float));
      param_bytes_ += 2 * uint64_t(v.count) * sizeof(float);  // value and gradient
    }
    for (int32_t t = 0; t < g.num_tensors; ++t) {
      const dlhost_tensor_desc& d = *g.tensors[t];
      int64_t n = 1;
      for (int32_t k = 0; k < d.rank; ++k) n *= d.dims[k];
      workspace_bytes_ += uint64_t(n) * 8;  // the activation and its gradient, F32
    }
    const std::string apply = update_.adamw()
                                  ? "AssignSubVariableOp (decoupled decay) + ResourceApplyAdam"
                              : opt.momentum > 0 ? "ResourceApplyMomentum"
                                                 : "ResourceApplyGradientDescent";
    implementation_ =
        context.library + ", " +
        (context.xla ? "XLA CPU JIT (global_jit_level ON_1)" : "graph mode") +
        (fused_ ? "; fused step: forward = one TF_SessionRun of the loss, every gradient "
                  "(TF_AddGradients) and " +
                      apply + " on them; backward and update return at once"
                : "; forward = one TF_SessionRun of the loss and every gradient "
                  "(TF_AddGradients), backward publishes them, update = one TF_SessionRun of " +
                      apply);
    for (const std::string& n : lowered_.notes) implementation_ += "; " + n;
    for (const std::string& d : lowered_.departures) departures_ += d + "\n";
    // Keras 3's SGD runs its update as separate ops, with momentum and without (issue 40, rule
    // 2): declared wherever the update is one of TensorFlow's fused SGD kernels.
    if (!update_.adamw())
      departures_ +=
          std::string(opt.momentum > 0 ? kMomentumDeparture : kGradientDescentDeparture) + "\n";
  }

  void set_input(int32_t tensor, const void* data, size_t bytes) override {
    size_t k = 0;
    while (k < lowered_.inputs.size() && lowered_.inputs[k].tensor != tensor) ++k;
    if (k == lowered_.inputs.size())
      sdk::invalid("cpu_tensorflow: tensor " + std::to_string(tensor) + " is not an input");
    const InputFeed& f = lowered_.inputs[k];
    const size_t want = size_t(f.count) * 4;
    sdk::expect_bytes(f.what, data != nullptr, bytes, want);
    void* dst = TF_TensorData(inputs_[k].get());
    if (f.dtype == TF_INT32) {
      ids_.check(tensor, static_cast<const int32_t*>(data), size_t(f.count));
      std::memcpy(dst, data, bytes);
    } else {
      f.layout.to_tf(static_cast<const float*>(data), static_cast<float*>(dst));
    }
  }

  void forward() override {
    if (runtime_) runtime_->before_forward();
    assign_staged_values();
    std::vector<TF_Output> feeds;
    std::vector<TF_Tensor*> values;
    for (size_t k = 0; k < inputs_.size(); ++k) {
      feeds.push_back(lowered_.inputs[k].placeholder);
      values.push_back(inputs_[k].get());
    }
    for (size_t k = 0; k < masks_.size(); ++k) {
      fill_mask(lowered_.dropouts[k], data_of(masks_[k]));
      feeds.push_back(lowered_.dropouts[k].placeholder);
      values.push_back(masks_[k].get());
    }
    AdamScalars adam;
    if (fused_) feed_adam_scalars(adam, feeds, values);
    std::vector<TF_Output> fetches{lowered_.loss};
    // Fused: the apply ops run in this same run on the gradients; nothing fetches them.
    if (!fused_) fetches.insert(fetches.end(), lowered_.grads.begin(), lowered_.grads.end());
    std::vector<tf::TensorPtr> out = run(feeds, values, fetches, forward_targets_, "forward");
    loss_ = *data_of(out[0]);
    if (fused_) {
      ++forward_calls_;
      return;
    }
    for (size_t p = 0; p < grads_.size(); ++p) {
      grads_[p] = std::move(out[p + 1]);
      if (!grad_buffers_.empty())
        std::memcpy(grad_buffers_[p].get(), data_of(grads_[p]),
                    size_t(lowered_.params[p].count) * sizeof(float));
    }
    ++forward_calls_;
  }

  void backward(const dlhost_grad_ready* ready) override {
    if (forward_calls_ == 0)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "cpu_tensorflow: backward before forward");
    if (runtime_ && !fused_) {
      runtime_->reduce_gradients(grads_);
      for (size_t p = 0; p < grad_buffers_.size(); ++p)
        std::memcpy(grad_buffers_[p].get(), data_of(grads_[p]),
                    size_t(lowered_.params[p].count) * sizeof(float));
    }
    if (ready == nullptr || ready->fn == nullptr) return;
    for (int32_t p : params_.ready_order()) ready->fn(ready->user, p);
  }

  void update() override {
    if (fused_) return;                                  // forward's run applied the update
    if (runtime_ && runtime_->applies_update()) return;  // tf_ps: the parameter servers did
    assign_staged_values();
    std::vector<tf::TensorPtr> borrowed;
    std::vector<TF_Tensor*> values;
    for (size_t p = 0; p < grads_.size(); ++p) {
      if (grad_buffers_.empty()) {
        values.push_back(grads_[p].get());
      } else {
        borrowed.push_back(tf::borrowed_tensor(grad_buffers_[p].get(), lowered_.params[p].dims));
        values.push_back(borrowed.back().get());
      }
    }
    std::vector<TF_Output> feeds = update_.grads;
    AdamScalars adam;
    feed_adam_scalars(adam, feeds, values);
    run(feeds, values, {}, {update_.step}, "update");
  }

  float loss() const override {
    if (forward_calls_ == 0)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "cpu_tensorflow: no forward yet");
    return loss_;
  }

  void param_buffers(int32_t id, dlhost_buffer* value, dlhost_buffer* grad) override {
    const Variable& v = lowered_.params[params_.index(id)];
    if (grad_buffers_.empty()) {  // from now on every forward copies its gradients here
      for (size_t p = 0; p < grads_.size(); ++p) {
        grad_buffers_.push_back(aligned_floats(lowered_.params[p].count));
        value_buffers_.push_back(aligned_floats(lowered_.params[p].count));
        std::memcpy(grad_buffers_[p].get(), data_of(grads_[p]),
                    size_t(lowered_.params[p].count) * sizeof(float));
      }
      staged_.assign(grads_.size(), false);
    }
    const size_t p = size_t(id);
    if (!staged_[p]) {  // the variable's value now; the host may overwrite it before a step
      std::memcpy(value_buffers_[p].get(), data_of(read_variable(v)), size_t(v.count) * 4);
      staged_[p] = true;
    }
    sdk::host_buffer(value, value_buffers_[p].get(), size_t(v.count));
    sdk::host_buffer(grad, grad_buffers_[p].get(), size_t(v.count));
  }

  void read_param(int32_t id, int32_t part, void* data, size_t bytes) override {
    const Variable& v = checked(id, part, data, bytes);
    auto* dst = static_cast<float*>(data);
    if (runtime_ && part != DLHOST_PARAM_GRAD) runtime_->before_read();
    if (part == DLHOST_PARAM_GRAD) {
      v.layout.to_canonical(grad_of(id), dst);
    } else if (!staged_.empty() && staged_[size_t(id)]) {
      v.layout.to_canonical(value_buffers_[size_t(id)].get(), dst);
    } else {
      v.layout.to_canonical(data_of(read_variable(v)), dst);
    }
  }

  void write_param(int32_t id, int32_t part, const void* data, size_t bytes) override {
    const Variable& v = checked(id, part, data, bytes);
    const auto* src = static_cast<const float*>(data);
    if (part == DLHOST_PARAM_GRAD) {
      if (grad_buffers_.empty()) {
        grads_[size_t(id)] = tf::float_tensor(v.dims);
        v.layout.to_tf(src, data_of(grads_[size_t(id)]));
      } else {
        v.layout.to_tf(src, grad_buffers_[size_t(id)].get());
      }
    } else if (!staged_.empty() && staged_[size_t(id)]) {
      v.layout.to_tf(src, value_buffers_[size_t(id)].get());
    } else {
      tf::TensorPtr t = tf::float_tensor(v.dims);
      v.layout.to_tf(src, data_of(t));
      run({v.value}, {t.get()}, {}, {v.assign}, "write_param " + v.name);
    }
  }

  sdk::ModelInfo info() const override {
    sdk::ModelInfo i;
    i.threads = context_.host.threads > 0
                    ? context_.host.threads
                    : static_cast<int32_t>(std::thread::hardware_concurrency());
    i.implementation = implementation_.c_str();
    i.param_bytes = param_bytes_ + update_.state_bytes;
    i.workspace_bytes = workspace_bytes_;
    i.fused_step = fused_;  // one run per step: forward's (ABI 1.5)
    i.departures = departures_.c_str();
    return i;
  }

  // RuntimeHost (tool_runtime.h).
  const Context& context() const override { return context_; }
  const std::vector<Variable>& variables() const override { return lowered_.params; }
  std::vector<int32_t> ready_order() const override { return params_.ready_order(); }
  bool fused() const override { return fused_; }
  tf::TensorPtr read_value(int32_t id) override {
    assign_staged_values();
    return read_variable(lowered_.params[params_.index(id)]);
  }
  void assign_value(int32_t id, TF_Tensor* value) override {
    assign_staged_values();
    const Variable& v = lowered_.params[params_.index(id)];
    run({v.value}, {value}, {}, {v.assign}, "assigning " + v.name);
  }
  void set_runtime(std::unique_ptr<ModelRuntime> runtime) override {
    runtime_ = std::move(runtime);
  }
  ModelRuntime* runtime() const override { return runtime_.get(); }

 private:
  std::vector<tf::TensorPtr> run(const std::vector<TF_Output>& feeds,
                                 const std::vector<TF_Tensor*>& values,
                                 const std::vector<TF_Output>& fetches,
                                 const std::vector<TF_Operation*>& targets,
                                 const std::string& what) {
    std::vector<tf::TensorPtr> out;
    session_->run(feeds, values, fetches, out, targets, what);
    return out;
  }

  tf::TensorPtr read_variable(const Variable& v) {
    return std::move(run({}, {}, {v.read}, {}, "read_param " + v.name)[0]);
  }

  // AdamW's per-update scalars (optimizer.h), for the run that applies update t = updates_ + 1.
  struct AdamScalars {
    tf::TensorPtr beta1_power, beta2_power, epsilon_hat;
  };
  void feed_adam_scalars(AdamScalars& s, std::vector<TF_Output>& feeds,
                         std::vector<TF_Tensor*>& values) {
    if (!update_.adamw()) return;
    const double t = double(++updates_);
    const double b2t = std::pow(double(optimizer_.beta2), t);
    const auto scalar = [&](tf::TensorPtr& tensor, TF_Output feed, double value) {
      tensor = tf::float_tensor({});
      *data_of(tensor) = float(value);
      feeds.push_back(feed);
      values.push_back(tensor.get());
    };
    scalar(s.beta1_power, update_.beta1_power, std::pow(double(optimizer_.beta1), t));
    scalar(s.beta2_power, update_.beta2_power, b2t);
    scalar(s.epsilon_hat, update_.epsilon_hat, double(optimizer_.epsilon) * std::sqrt(1.0 - b2t));
  }

  // Values the host may have written into the value buffers, into the variables.
  void assign_staged_values() {
    for (size_t p = 0; p < staged_.size(); ++p) {
      if (!staged_[p]) continue;
      const Variable& v = lowered_.params[p];
      tf::TensorPtr t = tf::borrowed_tensor(value_buffers_[p].get(), v.dims);
      run({v.value}, {t.get()}, {}, {v.assign}, "assigning the value buffer of " + v.name);
      staged_[p] = false;
    }
  }

  const float* grad_of(int32_t id) const {
    return grad_buffers_.empty() ? data_of(grads_[size_t(id)]) : grad_buffers_[size_t(id)].get();
  }

  // The pinned mask of this forward (dlhost_dropout_keep indexes the canonical layout).
  void fill_mask(const DropoutFeed& d, float* mask) {
    const int64_t n = tf::elements(d.dims);
    std::vector<float> canonical(d.layout.identity() ? 0 : size_t(n));
    sdk::DropoutMask{seed_, d.node, forward_calls_, d.probability}.fill(
        d.layout.identity() ? mask : canonical.data(), uint64_t(n));
    if (!d.layout.identity()) d.layout.to_tf(canonical.data(), mask);
  }

  const Variable& checked(int32_t id, int32_t part, const void* data, size_t bytes) const {
    return lowered_.params[params_.access(id, part, data, bytes)];
  }

  Context context_;
  dlhost_optimizer_desc optimizer_;
  uint64_t seed_;
  uint64_t updates_ = 0;  // AdamW's t so far
  bool fused_;            // the host's fused_step (ABI 1.4): forward's one run is the whole step
  sdk::ParamTable params_;
  sdk::IdInputs ids_;
  tf::GraphPtr graph_;
  Lowered lowered_;
  Update update_;
  std::unique_ptr<tf::Session> session_;
  std::vector<TF_Operation*> forward_targets_;
  std::vector<tf::TensorPtr> inputs_;  // by lowered_.inputs, TensorFlow's layout
  std::vector<tf::TensorPtr> masks_;   // by lowered_.dropouts
  std::vector<tf::TensorPtr> grads_;   // the last forward's (or written) gradients
  std::vector<AlignedFloats> grad_buffers_, value_buffers_;  // once param_buffers was called
  std::vector<bool> staged_;  // value buffer p holds what the variable must take before a run
  uint64_t forward_calls_ = 0;
  float loss_ = 0;
  uint64_t param_bytes_ = 0, workspace_bytes_ = 0;
  std::string implementation_;
  std::string departures_;                 // model_info's departures: the lowering's, one a line
  std::unique_ptr<ModelRuntime> runtime_;  // the tool runtime attached, if any
};

}  // namespace

RuntimeHost* runtime_host(sdk::Model& model) { return dynamic_cast<TfModel*>(&model); }

std::unique_ptr<sdk::Model> compile_model(const Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer,
                                          const sdk::HostSettings& host) {
  return std::make_unique<TfModel>(context, graph, optimizer, host);
}

}  // namespace dlhost::cpu_tensorflow
