// model.cpp — the compiled training graph of cpu_mxnet (the kit's sdk::Model): the Program's
// arrays (made once at compile, gradients attached with MXAutogradMarkVariables, grad_req write),
// its executor (CachedOp or imperative) for forward, MXAutogradBackwardEx for backward and MXNet's
// SGD operators (optimizer.cpp) for update.
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
#include "dlhost/dlhost.hpp"
#include "executor.h"
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

class MxnetModel final : public sdk::Model {
 public:
  MxnetModel(const Context& context, const dlhost_graph& g, const dlhost_optimizer_desc& opt,
             const std::string& mode, uint64_t seed)
      : context_(context), mode_(mode), seed_(seed), program_(lower_graph(g)) {
    // Grad-ready order: layers last to first, each layer's parameters in its own order.
    // A tied table (ABI 1.4) is ready once, at the node that owns it (its embedding).
    for (int32_t k = g.num_nodes - 1; k >= 0; --k)
      for (int32_t i = 0; i < g.nodes[k]->num_params; ++i)
        if (g.params[g.nodes[k]->params[i]]->node == k) order_.push_back(g.nodes[k]->params[i]);
    mark_variables();
    executor_ = make_executor(mode, g, *program_);
    optimizer_ = std::make_unique<Optimizer>(*program_, opt);
    for (const DropoutMask& m : program_->masks)
      masks_.emplace_back(elements(program_->leaves[size_t(m.leaf)]));
    implementation_ = std::string(mode == "imperative"
                                      ? "MXImperativeInvoke per operator (Gluon, not hybridized)"
                                      : "CachedOp (static_alloc, static_shape; Gluon hybridized)") +
                      ", autograd backward, " +
                      (opt.kind == DLHOST_OPTIMIZER_ADAMW ? "_adamw_update" : "sgd_mom_update") +
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
    if (data == nullptr || bytes != count * 4)
      sdk::invalid("cpu_mxnet: input " + std::to_string(tensor) + " takes " +
                   std::to_string(count * 4) + " bytes, got " + std::to_string(bytes));
    for (const IdInput& ids : program_->ids)
      if (ids.leaf == leaf) return set_ids(ids, static_cast<const int32_t*>(data), count);
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
      for (int32_t p : order_) {
        program_->params[size_t(p)].grad.wait_to_read();
        ready->fn(ready->user, p);
      }
    wait_all();
  }

  void update() override {
    apply_threads();
    optimizer_->step();
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
    const ParamView& p = param(id);
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
    i.departures = program_->departures.c_str();
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
  void set_ids(const IdInput& ids, const int32_t* data, size_t count) {
    std::vector<float>& staging = staging_[ids.leaf];
    staging.resize(count);
    for (size_t i = 0; i < count; ++i) {
      if (ids.limit > 0 && (data[i] < 0 || data[i] >= ids.limit))
        sdk::invalid("cpu_mxnet: " + ids.what + ": id " + std::to_string(data[i]) +
                     " at position " + std::to_string(i) + " is outside [0, " +
                     std::to_string(ids.limit) + ")");
      staging[i] = float(data[i]);
    }
    program_->leaves[size_t(ids.leaf)].value.copy_from(staging.data(), count);
  }

  // 1/(1-p) where dlhost_dropout_keep keeps element i, else 0: the ABI's mask, every backend's.
  void fill_mask(const DropoutMask& m, std::vector<float>& mask) {
    const float kept = 1.0f / (1.0f - m.probability);
    for (size_t i = 0; i < mask.size(); ++i)
      mask[i] = dlhost_dropout_keep(seed_, m.node, forward_calls_, i, m.probability) ? kept : 0.0f;
    program_->leaves[size_t(m.leaf)].value.copy_from(mask.data(), mask.size());
  }

  const ParamView& param(int32_t id) const {
    if (id < 0 || size_t(id) >= program_->params.size())
      sdk::invalid("cpu_mxnet: no parameter " + std::to_string(id));
    return program_->params[size_t(id)];
  }
  const NDArray& part_of(int32_t id, int32_t part, const void* data, size_t bytes) const {
    const ParamView& p = param(id);
    if (data == nullptr || bytes != p.count * 4)
      sdk::invalid("cpu_mxnet: parameter " + std::to_string(id) + " takes " +
                   std::to_string(p.count * 4) + " bytes, got " + std::to_string(bytes));
    if (part != DLHOST_PARAM_VALUE && part != DLHOST_PARAM_GRAD)
      sdk::invalid("cpu_mxnet: unknown parameter part " + std::to_string(part));
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
  std::unique_ptr<Program> program_;
  std::vector<int32_t> order_;  // parameter ids in grad-ready order
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::vector<float>> masks_;      // host staging of each dropout mask
  std::map<int, std::vector<float>> staging_;  // ids as floats, by leaf
  NDArrayHandle loss_ = nullptr;               // the executor's, from the last forward
  uint64_t forward_calls_ = 0;
  std::string implementation_;
};

}  // namespace

std::unique_ptr<sdk::Model> compile_model(const Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer,
                                          const std::string& mode, uint64_t seed) {
  if (optimizer.kind != DLHOST_OPTIMIZER_SGD && optimizer.kind != DLHOST_OPTIMIZER_ADAMW)
    sdk::unimplemented("cpu_mxnet: optimizer kind " + std::to_string(optimizer.kind) +
                       " not supported");
  if (optimizer.momentum < 0 || optimizer.clip_norm < 0 || optimizer.weight_decay < 0)
    sdk::invalid("cpu_mxnet: negative momentum, weight_decay or clip_norm");
  return std::make_unique<MxnetModel>(context, graph, optimizer, mode, seed);
}

}  // namespace dlhost::cpu_mxnet
