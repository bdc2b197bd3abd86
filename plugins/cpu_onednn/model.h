// model.h — the compiled training graph of the cpu_onednn backend: tensors, parameters and the
// fixed lists of steps (oneDNN primitives with bound arguments, plus small loops for the losses)
// that forward, backward and update replay.
//
// Every buffer and primitive is made in the constructor; a training step only replays steps, so
// it allocates nothing and pays no page faults (MACHINE_NOTES: fresh pages cost ~12 us each).
//
// Layout rule: each tensor has one internal memory descriptor chosen by its producer (a blocked
// format after a convolution, plain for inputs and inner products), and its gradient lives in
// that same layout. A primitive that wants another layout gets a reorder into a scratch buffer
// in front of it (or behind it, for what it writes). A parameter's gradient (and velocity) uses
// the layout of its value, so the SGD update is a plain element-wise loop.
//
// Precision bf16 (dlhost_device.h): the products of FC, convolution, attention and the tied
// output layer take bf16 copies of their operands (a reorder in front of each,
// round-to-nearest-even) and write fp32 (oneDNN accumulates in fp32); parameters, their
// gradients, the optimizer state and every other op stay fp32. The LSTM has no bf16 path and
// refuses the mode.
//
// Thread-safety: a Model is used from one host thread at a time (dlhost_backend.h); the
// parallelism is inside the calls, on OpenMP threads.
#ifndef DLHOST_CPU_ONEDNN_MODEL_H
#define DLHOST_CPU_ONEDNN_MODEL_H

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlhost/backend_kit.hpp"
#include "dlhost/framework_kit.hpp"
#include "fusion_plan.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "onednn_compat.h"

namespace dlhost::cpu_onednn {

using Md = dnnl::memory::desc;

// A device opened for one case.
struct Context {
  dnnl::engine engine;
  dnnl::stream stream;
  // The host-set options it was opened with (threads 0: OpenMP's default; the seed), the
  // fallback of each compile's (the framework kit's HostSettings).
  sdk::HostSettings host;
  int threads = 1;  // what OpenMP really gives
  // OpenMP's thread count is per calling thread, so every entry point re-applies it.
  void apply_threads() const;
};

struct Tensor {
  std::string name;
  int32_t dtype = DLHOST_DTYPE_F32;
  std::vector<int64_t> dims;
  int64_t elements = 0;
  bool is_loss = false;
  bool needs_grad = false;    // some parameter lies upstream
  Md md;                      // internal layout of value and diff
  dnnl::memory value, diff;   // diff: only during compile's backward pass, from Model::diff_of
  int64_t diff_offset = -1;   // where `diff` lies in the arena (-1: none yet)
  int64_t label_classes = 0;  // I32 labels or token ids: the valid range for set_input
  bool diff_written = false;  // compile-time: a later consumer already writes the diff
  int consumers = 0;          // graph nodes that read this tensor
  int32_t producer_op = 0;    // DLHOST_OP_* of the node that writes it (0: none)
  bool value_lent = false;    // backward reuses the value's bytes for gradients (lend_value)
  // A node whose output took these bytes in place (an in-place ReLU, a fused conv ReLU, a sum
  // over its input): after forward they hold that node's values, not this tensor's.
  std::string overwritten_by;
};

struct Param {
  std::string name;
  int64_t count = 0;
  Md user_md;                          // canonical layout (dlhost_graph.h)
  dnnl::memory value, grad, velocity;  // velocity: SGD's momentum, or AdamW's first moment
  dnnl::memory moment2;                // AdamW's second moment
  int64_t floats = 0;                  // elements of the internal buffer, padding included
  // Compile-time: a node's backward already writes this gradient, so a later-built one (the
  // embedding under a tied output layer) adds to it instead of overwriting it.
  bool grad_written = false;
};

// One entry of a replayed list: a primitive with its arguments, a loop, or a grad-ready notice.
struct Step {
  std::string what;  // "conv1: convolution backward data", for error messages
  dnnl::primitive prim;
  std::vector<dnnl_exec_arg_t> args;
  Md scratchpad_md;
  std::vector<dnnl::memory> hold;  // memories referenced only from `args`
  std::function<void()> fn;
  int32_t ready_param = -1;
  double spent_ms = 0;  // summed over runs, only with DLHOST_CPU_ONEDNN_PROFILE set
};
using Steps = std::vector<Step>;
using Args = std::vector<std::pair<int, dnnl::memory>>;

class Layer;
class FusedLayer;

// The kit's model interface (dlhost/backend_kit.hpp): plugin.cpp hands it to the host as is.
class Model final : public sdk::Model {
 public:
  // The caller has refused an optimizer kind, precision or negative setting the backend lacks
  // (plugin.cpp, the framework kit's check_compile). `seed` is the case's "seed" option: it
  // picks the dropout masks. `bf16`: precision mode bf16 (the caller has checked that the CPU
  // has bf16 products: has_bf16_isa()). `fused_step`: the
  // host's compile option "fused_step" = "1" (ABI 1.4): nothing reads or changes the gradients
  // between backward and update, so a layer may apply the optimizer where it computes them.
  Model(const Context& context, const dlhost_graph* graph, const dlhost_optimizer_desc& optimizer,
        uint64_t seed, bool bf16 = false, bool fused_step = false);
  ~Model() override;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  void set_input(int32_t tensor, const void* data, size_t bytes) override;
  void forward() override;
  void backward(const dlhost_grad_ready* ready) override;
  void update() override;
  void synchronize() override;
  float loss() const override { return loss_; }
  void param_buffers(int32_t param, dlhost_buffer* value, dlhost_buffer* grad) override;
  void read_param(int32_t param, int32_t part, void* data, size_t bytes) override;
  void read_tensor(int32_t tensor, void* data, size_t bytes) override;
  void write_param(int32_t param, int32_t part, const void* data, size_t bytes) override;
  sdk::ModelInfo info() const override;

  // A batch-norm node's running mean and variance, [channels] each. They are state of the
  // backend, not parameters, so the ABI has no call for them; the white-box test
  // (tests/plugins/cpu_onednn/test_cpu_onednn_internals.cpp, built with this plugin's sources)
  // reads them here.
  struct RunningStats {
    std::string node;
    int64_t channels = 0;
    float* mean = nullptr;
    float* variance = nullptr;
    dnnl::memory buffer;  // owns mean and variance
  };
  const std::vector<RunningStats>& running_stats() const { return running_stats_; }
  // The fusion plan (fusion_plan.h): what the constructor fused, and what it declined and why.
  const FusionPlan& plan() const { return plan_; }

  // --- used by the layers while the constructor builds them ---------------------------------
  const dnnl::engine& engine() const { return context_.engine; }
  int threads() const { return context_.threads; }  // OpenMP threads of the case
  Tensor& tensor(int32_t id);
  Param& param(int32_t id);
  float momentum() const { return optimizer_.momentum; }
  const dnnl::primitive_attr& attr() const { return attr_; }  // user scratchpad
  float* loss_slot() { return &loss_; }
  uint64_t seed() const { return seed_; }
  // Precision bf16: the heavy products read bf16 operands.
  bool bf16() const { return bf16_; }
  // The host's fused_step (see the constructor).
  bool fused_step() const { return fused_step_; }
  // The fusion plan, made from the graph before any layer is built: its spans are built by the
  // fused layers, which say what they applied and declined (fused_layers.cpp).
  FusionPlan& plan() { return plan_; }
  // Whether SGD's step may go into a weight-gradient GEMM (the planner's kFcSgdUpdate):
  // the host's fused_step, plain SGD (the step is linear in the gradient), no clipping (its scale
  // needs every gradient first) and fp32 (bf16's gradients come from matmuls, not dnnl_sgemm).
  bool sgd_in_backward() const {
    return fused_step_ && optimizer_.kind == DLHOST_OPTIMIZER_SGD && optimizer_.clip_norm == 0.0f &&
           !bf16_;
  }
  const dlhost_optimizer_desc& optimizer() const { return optimizer_; }
  // The type the products read: bf16 in precision bf16, else f32.
  dnnl::memory::data_type product_type() const {
    return bf16_ ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  }
  // `plain` (an f32 buffer in plain layout) as the products read it: itself in fp32, else a bf16
  // copy in plain layout, converted by a reorder appended to `steps` (a scratch: see scratch()).
  dnnl::memory product_operand(const dnnl::memory& plain, Steps& steps, const std::string& what);
  // Throws UNIMPLEMENTED naming the node and op when the model is in precision bf16: for the ops
  // whose products have no bf16 path here.
  void refuse_bf16(const std::string& node, const char* op) const;
  // Forward calls completed so far: during a forward, the step number dropout masks use.
  const uint64_t* forward_calls() const { return &forward_calls_; }
  // Allocates running statistics at mean 0, variance 1 (PyTorch's start).
  RunningStats add_running_stats(const std::string& node, int64_t channels);

  // A zeroed buffer that counts toward the model's memory.
  dnnl::memory alloc(const Md& md, bool is_param = false);
  // Allocates a parameter's value, gradient (and velocity) in the layout `md`.
  void alloc_param(int32_t id, const Md& md, const Md& user_md);
  // Allocates a tensor's value in layout `md`; its diff (when it needs one) comes later from
  // diff_of().
  void alloc_tensor(Tensor& t, const Md& md);
  // The tensor's gradient buffer, in its layout. Taken from a pool on first use in backward and
  // returned once the tensor's producer has built its backward steps (the last reader, as the
  // steps replay in build order): diffs of tensors whose backward lifetimes do not overlap
  // share memory, which halves a ResNet's workspace.
  dnnl::memory& diff_of(Tensor& t);

  // A buffer in layout `md` that a node writes and reads only within its own steps. While the
  // backward steps are built it comes from the gradient pool and goes back to it once the node
  // is built (later nodes' steps run later, so they may reuse the bytes); in forward it is a
  // buffer of its own, as forward scratches may be read again by the backward steps.
  dnnl::memory scratch(const Md& md);
  // `mem` as layout `want`: itself, or a scratch filled by a reorder appended to `steps`.
  dnnl::memory as_layout(const dnnl::memory& mem, const Md& want, Steps& steps,
                         const std::string& what);
  // Where a node writes the gradient of its input `t` when the primitive produces layout
  // `produced`: t.diff itself when it is the first writer in that layout, else a scratch, with
  // the reorder and/or accumulation into t.diff appended to `post`.
  dnnl::memory diff_sink(Tensor& t, const Md& produced, Steps& post, const std::string& what);
  // Hands `from`'s gradient buffer to `to` as its first-written gradient, for a node whose
  // backward can run in place (an activation): false, and nothing changes, where `to` already
  // has a gradient or another layout. `from` must have no reader left.
  bool pass_diff(Tensor& from, Tensor& to);
  // `to`'s gradient is `from`'s as it is (an identity in backward): `from`'s bytes handed over
  // (pass_diff) where it can, else a copy into `to`'s gradient or a sum onto it, appended to
  // `steps`. Nothing where `to` needs no gradient.
  void hand_over_diff(Tensor& from, Tensor& to, Steps& steps, const std::string& what);
  // Makes `mem` (a buffer of the caller's, in t's layout, filled before any backward step runs:
  // a loss that computes its input's gradient in forward under fused_step) t's gradient. False,
  // and nothing changes, where t already has a gradient or `mem` another layout.
  bool adopt_diff(Tensor& t, const dnnl::memory& mem);
  // Where a primitive producing layout `produced` writes `target` (a parameter gradient):
  // `target` itself, or a scratch whose reorder into `target` is appended to `post`.
  dnnl::memory output_as(const dnnl::memory& target, const Md& produced, Steps& post,
                         const std::string& what);

  void add_primitive(Steps& steps, const std::string& what, const dnnl::primitive& prim,
                     const dnnl::primitive_desc_base& pd, const Args& args);
  void add_function(Steps& steps, const std::string& what, std::function<void()> fn);
  void add_ready(Steps& steps, int32_t param);
  // Node `node` writes its output `y` over the bytes of its input `x` (an in-place activation or
  // sum): y takes x's layout and value, and x is marked overwritten for read_tensor.
  void write_over(Tensor& x, Tensor& y, const std::string& node);
  // Whether backward may still read `t`'s value: its bytes are not lent to gradients yet (an
  // in-place successor's lend_value lends them too).
  bool value_kept(const Tensor& t) const;
  // Counts a primitive's implementation for model_info ("conv fwd=jit:avx512_core x3").
  void note_implementation(const std::string& primitive, const char* impl);

 private:
  void run(Steps& steps);
  // The backward steps of the node writing `output` are all built: its gradient goes back to the
  // pool, its value's bytes are lent to gradients (lend_value) and the node's scratches return
  // (later-built steps run later).
  void end_node_backward(Tensor& output);
  void finish_scratchpad();
  void build_update();
  void release_diff(Tensor& t);
  // Puts the bytes of `t`'s value into the gradient pool once no backward step reads it.
  void lend_value(Tensor& t);
  // `bytes` of the arena: the best-fitting free range, else the free range at its end grown,
  // else new bytes at its end (touched now). Returns the offset.
  size_t take_pooled(size_t bytes);
  // Returns [offset, offset + bytes) to the free ranges, merged with its free neighbours.
  void give_back(size_t offset, size_t bytes);
  void* arena_at(size_t offset) const { return arena_.base + offset; }

  Context context_;
  dlhost_optimizer_desc optimizer_;
  dnnl::primitive_attr attr_;
  std::vector<Tensor> tensors_;
  std::vector<Param> params_;
  std::vector<int32_t> inputs_;
  std::vector<std::unique_ptr<Layer>> layers_;  // by graph node; null where a fused layer builds it
  std::vector<std::unique_ptr<FusedLayer>> fused_layers_;
  std::vector<FusedLayer*> fused_layer_of_;  // by graph node; null where a plain layer builds it
  Steps forward_steps_, backward_steps_;
  // DLHOST_CPU_ONEDNN_PROFILE=1: time every step and print the totals to stderr when the model
  // goes. ONEDNN_VERBOSE shows primitives only, not the dnnl_sgemm calls and loops between them.
  using Clock = std::chrono::steady_clock;
  bool profile_ = false;
  double update_ms_ = 0;
  Clock::time_point profile_start() const;
  static double ms_since(Clock::time_point start);
  void print_profile() const;
  dnnl::memory scratchpad_;
  void adamw_update(float scale);
  float loss_ = 0.0f;
  uint64_t updates_ = 0;  // AdamW's t: update calls so far
  uint64_t seed_ = 0;
  bool bf16_ = false;
  bool fused_step_ = false;
  FusionPlan plan_;
  uint64_t forward_calls_ = 0;
  std::vector<RunningStats> running_stats_;
  // Tensor values and gradients live in one arena: a virtual reservation that only grows
  // (no pointer ever moves) and whose pages count once touched. Freed ranges (gradients past
  // their last reader, values past theirs: lend_value) merge with their neighbours, so the
  // dead activations of a ResNet stage hold the larger gradients of the next one.
  struct Arena {
    char* base = nullptr;
    size_t reserved = 0, used = 0;
    Arena() = default;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    ~Arena();
  };
  Arena arena_;
  std::map<size_t, size_t> free_ranges_;  // offset -> bytes, disjoint, never adjacent
  bool building_backward_ = false;
  std::vector<const char*> lent_values_;  // value bytes already freed (never freed twice)
  bool values_overwritten_ = false;       // a backward ran since the last forward
  // (offset, bytes) of the arena scratches of the node being built
  std::vector<std::pair<size_t, size_t>> node_scratches_;
  const dlhost_grad_ready* ready_ = nullptr;
  uint64_t param_bytes_ = 0, workspace_bytes_ = 0;
  std::vector<std::pair<std::string, int>> implementations_;
  std::string implementation_;
  // Fixed chunks of the gradients for a deterministic global norm, whatever the thread count.
  struct Chunk {
    const float* data;
    int64_t n;
  };
  std::vector<Chunk> norm_chunks_;
  std::vector<double> norm_partials_;
};

// One graph node turned into steps. Layers are built in graph order (forward) and asked for
// their backward steps in reverse order, which is what decides who overwrites and who
// accumulates a shared input's gradient.
class Layer {
 public:
  virtual ~Layer() = default;
  virtual void build_forward(Model& m, Steps& steps) = 0;
  virtual void build_backward(Model& m, Steps& steps) = 0;
};

// Makes the layer for node `index` of the graph, or throws UNIMPLEMENTED / INVALID_ARGUMENT
// naming it.
std::unique_ptr<Layer> make_layer(const dlhost_graph* graph, int32_t index);

// The nodes of one span of the fusion plan turned into steps by one object (fused_layers.cpp),
// asked for each node's steps at that node's place in the order, as a plain layer would be:
// what runs, and which buffers are free when, stays as with the plain layers.
class FusedLayer {
 public:
  virtual ~FusedLayer() = default;
  virtual void build_forward(Model& m, Steps& steps, int32_t node) = 0;
  virtual void build_backward(Model& m, Steps& steps, int32_t node) = 0;
};

// Makes the fused layer that builds `span` of the fusion plan (fused_layers.cpp).
std::unique_ptr<FusedLayer> make_fused_layer(const dlhost_graph* graph, const FusedSpan& span);

// Runs `body`; a dnnl::error becomes INTERNAL (UNIMPLEMENTED when oneDNN has no implementation,
// RESOURCE_EXHAUSTED when it ran out of memory) prefixed with `what`.
void with_dnnl(const std::string& what, const std::function<void()>& body);

// Whether oneDNN dispatches bf16 products on this CPU (avx512_core_bf16, AMX or newer), after
// ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA; the name of the ISA it dispatches.
bool has_bf16_isa();
// Why precision bf16 is not offered here: "precision bf16 needs avx512_core_bf16 or AMX; this
// CPU: avx2" (the ISA oneDNN dispatches).
std::string bf16_isa_gap();

// Plain row-major layout for `dims` (nc, nchw, ...).
Md plain_md(const std::vector<int64_t>& dims, dnnl::memory::data_type type);

}  // namespace dlhost::cpu_onednn

#endif  // DLHOST_CPU_ONEDNN_MODEL_H
