// model.cpp — the compiled training graph of cpu_mxnet (the kit's sdk::Model): the Program's
// arrays (made once at compile, gradients attached with MXAutogradMarkVariables, grad_req write),
// its executor (CachedOp or imperative) for forward, MXAutogradBackwardEx for backward and MXNet's
// SGD operators (optimizer.cpp) for update; under `comm: mxnet_kvstore` its kvstore exchanges
// the gradients after each backward (kvstore.h).
//
// What the ABI pins and how it is kept with MXNet underneath:
// - parameter buffers (param_buffers, all-reduce in place): the trainable arrays and their
//   gradients never move; grad_req write makes every backward overwrite;
// - MXNet's engine is asynchronous: every phase ends with MXNDArrayWaitAll, so the host (which
//   reads buffers between phases) sees finished memory, and each grad-ready notice waits for its
//   gradient first (MXNet computes the rest of backward meanwhile);
// - allocation: the CachedOp plans its memory once (static_alloc); the imperative mode allocates
//   every output per step, as Gluon without hybridize does.
// Thread-safety: one host thread at a time per model; MXNet's engine runs the operators.
#include <map>
#include <string>
#include <utility>

#include "backend.h"
#include "dlhost/common.hpp"
#include "executor.h"
#include "kvstore.h"
#include "optimizer.h"
#include "program.h"

namespace dlhost::cpu_mxnet {
namespace {

namespace sdk = dlhost::sdk;

void wait_all() { check(mx().MXNDArrayWaitAll(), "MXNDArrayWaitAll"); }

size_t elements(const Leaf& l) {
  size_t n = 1;
  for (uint32_t s : l.shape) n *= s;
  return n;
}

// ABI 1.5 model_info departure lines of the SGD update (docs/frameworks.md), with momentum and
// without: MXNet's per-array operator where Gluon's Trainer.step aggregates the arrays.
constexpr const char* kSgdMomentumDeparture =
    "SGD update: one sgd_mom_update per array, not Gluon Trainer.step's multi_sgd_mom_update "
    "over 4 arrays a call (MXNet 1.9.1's aggregation; the same rule): in the profile of the "
    "autoencoder at b100, 1 thread, 4.6 CPU ms a step in sgd_mom_update's kernel against 7.5 in "
    "Gluon's multi_sgd_mom_update, most of its gap to dlhost (20.1 against 22.5-23.5 ms a step; "
    "bench/probe/perf_pair.py). Measured 2026-12-07 on a quiet 2-core Xeon with AVX-512 "
    "(bench/results/2026-12-07-sgd-update)\n";
constexpr const char* kSgdDeparture =
    "SGD update: one sgd_update per array, not Gluon Trainer.step's multi_sgd_update over 4 "
    "arrays a call (MXNet 1.9.1's aggregation; the same rule): in the profile of FCN-5 at b64, "
    "1 thread, 190 CPU ms a step in sgd_update's kernel against 421 in Gluon's "
    "multi_sgd_update, most of its gap to dlhost (663-682 against 901-905 ms a step; "
    "bench/probe/perf_pair.py); Gluon's own step with sgd_update per array: update phase 259 "
    "against 394 CPU ms (bench/probe/mx_gluon_phases.py). Measured 2026-12-07 on a quiet 2-core "
    "Xeon with AVX-512 (bench/results/2026-12-07-sgd-update)\n";

class MxnetModel final : public sdk::Model, public RuntimeHost {
 public:
  MxnetModel(const Context& context, const dlhost_graph& g, const dlhost_optimizer_desc& opt,
             const std::string& mode, const sdk::HostSettings& host)
      : context_(context),
        mode_(mode),
        seed_(uint64_t(host.seed)),
        params_(g),
        ids_(g),
        program_(lower_graph(g)) {
    mark_variables();
    executor_ = make_executor(mode, g, *program_);
    optimizer_ = std::make_unique<Optimizer>(*program_, opt);
    departures_ = program_->departures;
    // One sgd_mom_update or sgd_update per array (the ABI's update, array by array) where Gluon's
    // Trainer.step aggregates the arrays into multi_sgd_mom_update or multi_sgd_update calls:
    // the same rule at about twice the CPU time, so it is declared (issue 40, rule 2).
    if (opt.kind != DLHOST_OPTIMIZER_ADAMW)
      departures_ += opt.momentum > 0 ? kSgdMomentumDeparture : kSgdDeparture;
    for (const DropoutMask& m : program_->masks)
      masks_.emplace_back(elements(program_->leaves[size_t(m.leaf)]));
    implementation_ = std::string(mode == "imperative"
                                      ? "MXImperativeInvoke per operator (Gluon, not hybridized)"
                                      : "CachedOp (static_alloc, static_shape; Gluon hybridized)") +
                      ", autograd backward, " +
                      (opt.kind == DLHOST_OPTIMIZER_ADAMW ? "_adamw_update"
                       : opt.momentum > 0                 ? "sgd_mom_update"
                                                          : "sgd_update") +
                      "; " + context.engine.request.engine + ", " +
                      std::to_string(context.engine.cpu_workers) + " CPU worker x " +
                      std::to_string(context.engine.omp_threads) + " OpenMP threads";
    wait_all();
  }

  void set_input(int32_t tensor, const void* data, size_t bytes) override {
    const int leaf = tensor >= 0 && size_t(tensor) < program_->input_leaf.size()
                         ? program_->input_leaf[size_t(tensor)]
                         : -1;
    if (leaf < 0) sdk::invalid("cpu_mxnet: tensor " + std::to_string(tensor) + " is not an input");
    const Leaf& l = program_->leaves[size_t(leaf)];
    const size_t count = elements(l);
    sdk::expect_bytes("input " + std::to_string(tensor), data != nullptr, bytes, count * 4);
    if (ids_.holds(tensor)) return set_ids(tensor, l, static_cast<const int32_t*>(data), count);
    l.value.copy_from(static_cast<const float*>(data), count);
  }

  void forward() override {
    apply_threads();
    for (size_t k = 0; k < masks_.size(); ++k) fill_mask(program_->masks[k], masks_[k]);
    loss_ = executor_->forward();
    ++forward_calls_;
    wait_all();
  }

  void backward(const dlhost_grad_ready* ready) override {
    if (loss_ == nullptr)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "cpu_mxnet: backward before forward");
    apply_threads();
    NDArrayHandle loss = loss_;
    check(mx().MXAutogradBackwardEx(1, &loss, nullptr, 0, nullptr, /*retain_graph=*/0,
                                    /*create_graph=*/0, /*is_train=*/1, nullptr, nullptr),
          "MXAutogradBackwardEx");
    if (ready != nullptr && ready->fn != nullptr)
      for (int32_t p : params_.ready_order()) {
        program_->params[size_t(p)].grad.wait_to_read();
        ready->fn(ready->user, p);
      }
    wait_all();
    if (runtime_) runtime_->after_backward();  // the tool runtime's exchange (kvstore.h)
  }

  // RuntimeHost (kvstore.h): the trainable leaves, whole, in leaf order.
  std::vector<NDArrayHandle> trainable_values() const override { return trainable(false); }
  std::vector<NDArrayHandle> trainable_grads() const override { return trainable(true); }
  void set_runtime(std::unique_ptr<ModelRuntime> runtime) override {
    runtime_ = std::move(runtime);
  }
  ModelRuntime* runtime() const override { return runtime_.get(); }

  void update() override {
    apply_threads();
    if (!(runtime_ && runtime_->owns_update())) optimizer_->step();
    wait_all();
  }

  void synchronize() override { wait_all(); }

  float loss() const override {
    if (loss_ == nullptr) sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "cpu_mxnet: no forward yet");
    float value = 0;
    check(mx().MXNDArraySyncCopyToCPU(loss_, &value, 1), "MXNDArraySyncCopyToCPU");
    return value;
  }

  void param_buffers(int32_t id, dlhost_buffer* value, dlhost_buffer* grad) override {
    const ParamView& p = program_->params[params_.index(id)];
    sdk::host_buffer(value, p.value.data(), p.count);
    sdk::host_buffer(grad, p.grad.data(), p.count);
  }
  void read_param(int32_t id, int32_t part, void* data, size_t bytes) override {
    part_of(id, part, data, bytes).copy_to(static_cast<float*>(data), bytes / 4);
  }
  void write_param(int32_t id, int32_t part, const void* data, size_t bytes) override {
    part_of(id, part, data, bytes).copy_from(static_cast<const float*>(data), bytes / 4);
  }

  sdk::ModelInfo info() const override {
    sdk::ModelInfo i;
    i.threads = context_.engine.omp_threads;
    i.implementation = implementation_.c_str();
    i.param_bytes = param_bytes() + optimizer_->state_bytes();
    i.workspace_bytes = program_->activation_bytes;
    i.departures = departures_.c_str();
    return i;
  }
  // Parameters, gradients, momentum, inputs, running statistics, masks, and every activation
  // with its gradient (what the CachedOp's static memory plan holds at most).
  uint64_t memory_in_use() const override {
    uint64_t bytes = optimizer_->state_bytes() + program_->activation_bytes;
    for (const Leaf& l : program_->leaves) bytes += elements(l) * (l.grad ? 8 : 4);
    return bytes;
  }

 private:
  std::vector<NDArrayHandle> trainable(bool grads) const {
    std::vector<NDArrayHandle> out;
    for (const Leaf& l : program_->leaves)
      if (l.kind == LeafKind::kTrainable) out.push_back(grads ? l.grad.get() : l.value.get());
    return out;
  }

  // NaiveEngine runs the operators on this thread, whose OpenMP count is its own (the threaded
  // engines' workers got theirs when they started); like at::set_num_threads, per step.
  void apply_threads() const {
    check(mx().MXSetNumOMPThreads(context_.engine.omp_threads), "MXSetNumOMPThreads");
  }

  void mark_variables() {
    std::vector<NDArrayHandle> values, grads;
    for (const Leaf& l : program_->leaves)
      if (l.kind == LeafKind::kTrainable) {
        values.push_back(l.value.get());
        grads.push_back(l.grad.get());
      }
    std::vector<uint32_t> write(values.size(), 1);  // OpReqType kWriteTo: backward overwrites
    check(mx().MXAutogradMarkVariables(uint32_t(values.size()), values.data(), write.data(),
                                       grads.data()),
          "MXAutogradMarkVariables");
  }

  // MXNet's Embedding and pick index with float arrays: ids are checked, then held as floats
  // (exact below 2^24).
  void set_ids(int32_t tensor, const Leaf& l, const int32_t* data, size_t count) {
    ids_.check(tensor, data, count);
    std::vector<float>& staging = staging_[tensor];
    staging.assign(data, data + count);
    l.value.copy_from(staging.data(), count);
  }

  // The ABI's mask, every backend's (framework_kit.hpp).
  void fill_mask(const DropoutMask& m, std::vector<float>& mask) {
    sdk::DropoutMask{seed_, m.node, forward_calls_, m.probability}.fill(mask.data(), mask.size());
    program_->leaves[size_t(m.leaf)].value.copy_from(mask.data(), mask.size());
  }

  const NDArray& part_of(int32_t id, int32_t part, const void* data, size_t bytes) const {
    const ParamView& p = program_->params[params_.access(id, part, data, bytes)];
    return part == DLHOST_PARAM_VALUE ? p.value : p.grad;
  }
  uint64_t param_bytes() const {
    uint64_t bytes = 0;
    for (const Leaf& l : program_->leaves)
      if (l.kind == LeafKind::kTrainable) bytes += elements(l) * 8;  // value and gradient
    return bytes;
  }

  Context context_;
  std::string mode_;
  uint64_t seed_;
  sdk::ParamTable params_;  // id bounds, sizes, the grad-ready order
  sdk::IdInputs ids_;       // labels and token ids, checked at set_input
  std::unique_ptr<Program> program_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::vector<float>> masks_;          // host staging of each dropout mask
  std::map<int32_t, std::vector<float>> staging_;  // ids as floats, by input tensor
  NDArrayHandle loss_ = nullptr;                   // the executor's, from the last forward
  uint64_t forward_calls_ = 0;
  std::string implementation_;
  std::string departures_;  // model_info's: the lowering's and the update's, one a line
  // Declared last: destroyed first, while the arrays it exchanges still exist.
  std::unique_ptr<ModelRuntime> runtime_;
};

}  // namespace

RuntimeHost* runtime_host(sdk::Model& model) { return dynamic_cast<MxnetModel*>(&model); }

std::unique_ptr<sdk::Model> compile_model(const Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer,
                                          const std::string& mode, const sdk::HostSettings& host) {
  return std::make_unique<MxnetModel>(context, graph, optimizer, mode, host);
}

}  // namespace dlhost::cpu_mxnet
