// model.h — a training graph compiled by gpu_cudnn: every tensor, gradient, parameter, optimizer
// state and workspace allocated on the device at compile, and the fixed lists of steps (cuDNN,
// cuBLAS and kernel launches on the model's one stream) that forward, backward and update replay.
//
// A step only enqueues: forward/backward/update return before the device work ends, allocate
// nothing and never synchronize with the host (the host synchronizes through events or
// synchronize()). Parameters live in one arena each for values, gradients and velocities, in
// their canonical layouts (dlhost_graph.h), so that the SGD update and the clipping norm are one
// kernel each and read_param/write_param are plain copies. The LSTM keeps cuDNN's packed weight
// space beside them and copies between the two around its calls.
//
// Thread-safety: a Model is used from one host thread at a time (dlhost_backend.h).
#ifndef DLHOST_GPU_CUDNN_MODEL_H
#define DLHOST_GPU_CUDNN_MODEL_H

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_util.h"
#include "kernels_transformer.h"

namespace dlhost::gpu_cudnn {

// fp32: strict FFMA; tf32: TF32 tensor-core products; bf16 and fp16: the GEMMs' inputs rounded
// to bf16 / fp16 on tensor cores with fp32 accumulation, every tensor, master weight and optimizer
// state kept in fp32 (cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF / _16F), fp16 with loss scaling.
enum class Precision { kFp32, kTf32, kBf16, kFp16 };

// What a case asks of the backend (context and compile options).
struct Settings {
  int device = 0;
  uint64_t seed = 42;
  Precision precision = Precision::kFp32;
  bool exhaustive = false;                       // "algo": exhaustive autotuning, else heuristic
  uint64_t workspace_limit = uint64_t{1} << 30;  // "workspace_limit_mb", per convolution call
  float loss_scale = 0;                          // fp16's "loss_scale"; 0: dynamic
};

// Reads the options of `options` over `base` (INVALID_ARGUMENT naming a bad value;
// UNIMPLEMENTED for a precision this backend does not implement).
Settings read_settings(const sdk::Options& options, Settings base);
const char* precision_name(Precision p);

struct Context {
  Settings settings;
};

// A pinned host copy of one input, so that set_input returns without waiting for the device:
// the caller's memory is copied here, and the upload reads it after the call has returned. The
// event orders the next set_input's overwrite after the previous upload has read it.
struct Staging {
  explicit Staging(size_t bytes);
  ~Staging();  // waits for the last upload from it
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  void* host = nullptr;  // cudaMallocHost, the input's bytes
  cudaEvent_t uploaded = nullptr;
};

struct Tensor {
  std::string name;
  int32_t dtype = DLHOST_DTYPE_F32;
  std::vector<int64_t> dims;
  int64_t count = 1;
  bool is_input = false;
  float* value = nullptr;            // F32 tensors
  float* grad = nullptr;             // F32 tensors the graph computes; null for inputs
  int32_t* ids = nullptr;            // I32 inputs (labels, token ids)
  int64_t id_limit = 0;              // I32 inputs: ids must lie in [0, id_limit) (0: not yet known)
  bool grad_written = false;         // compile: a backward step already writes the gradient
  std::unique_ptr<Staging> staging;  // inputs: made on the first set_input
};

struct Param {
  std::string name;
  int64_t count = 0;
  int32_t owner = -1;  // the node that owns it (a tied table is also read by another)
  float *value = nullptr, *grad = nullptr;
  bool grad_written = false;  // compile: a backward step already writes the gradient (tied)
};

struct Step {
  std::function<void()> run;
  int32_t ready_param = -1;  // a grad-ready notice instead of work
  std::string what;          // the node that enqueued it, named when a launch fails
};

class Model final : public sdk::Model {
 public:
  Model(const dlhost_graph& graph, const dlhost_optimizer_desc& optimizer,
        const Settings& settings);
  ~Model() override;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  void set_input(int32_t tensor, const void* data, size_t bytes) override;
  void forward() override;
  void backward(const dlhost_grad_ready* ready) override;
  void update() override;
  void synchronize() override;
  float loss() const override;
  void param_buffers(int32_t param, dlhost_buffer* value, dlhost_buffer* grad) override;
  void read_param(int32_t param, int32_t part, void* data, size_t bytes) override;
  void write_param(int32_t param, int32_t part, const void* data, size_t bytes) override;
  sdk::ModelInfo info() const override;
  uint64_t memory_in_use() const override { return arena_.in_use(); }
  // The F32 value of any tensor after the last forward (each has its own buffer: nothing is
  // computed in place), canonical layout; the kit synchronizes first.
  void read_tensor(int32_t tensor, void* data, size_t bytes) override;

  // --- the kit's device virtuals (extensions.cpp; input_buffer in model.cpp) -------------------
  dlhost_stream model_stream() override;
  std::unique_ptr<sdk::Event> create_event() override;
  dlhost_memory_stats memory_stats() override;
  void copy_to_host(const dlhost_buffer& src, uint64_t offset, void* dst, uint64_t bytes) override;
  void copy_from_host(const void* src, const dlhost_buffer& dst, uint64_t offset,
                      uint64_t bytes) override;
  void copy_device(const dlhost_buffer& src, uint64_t src_offset, const dlhost_buffer& dst,
                   uint64_t dst_offset, uint64_t bytes) override;
  // The device buffer of graph input `tensor` (a per-step upload writes it with copy_from_host).
  dlhost_buffer input_buffer(int32_t tensor) override;
  cudaStream_t stream() const { return stream_.get(); }
  int device() const { return settings_.device; }

  // --- for the layers while the constructor lowers the graph ----------------------------------
  cudnnHandle_t cudnn() const { return cudnn_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }
  // The compute type of the case's precision for cuBLAS's *Ex GEMMs.
  cublasComputeType_t gemm_compute() const;
  const Settings& settings() const { return settings_; }
  Arena& memory() { return arena_; }
  Tensor& tensor(int32_t id);
  Param& param(int32_t id);
  // 0 for the first backward step that writes t's gradient (it overwrites), 1 after (they add).
  // Backward steps are built in the order they run, so this is decided once, at compile.
  float beta_for(Tensor& t);
  void add_forward(std::function<void()> fn) {
    forward_steps_.push_back({std::move(fn), -1, lowering_});
  }
  void add_backward(std::function<void()> fn) {
    backward_steps_.push_back({std::move(fn), -1, lowering_ + " backward"});
  }
  void add_ready(int32_t param) { backward_steps_.push_back({nullptr, param, {}}); }
  // Compile-time host-to-device copy on the model's stream (from pageable memory the source is
  // staged before the call returns, so it may be a temporary).
  void upload(void* dst, const void* src, size_t bytes, const std::string& what);
  // The shared scratch of every library call, read when a step runs (it grows during compile).
  void need_workspace(uint64_t bytes) { workspace_bytes_ = std::max(workspace_bytes_, bytes); }
  void* workspace() const { return workspace_; }
  uint64_t workspace_size() const { return workspace_bytes_; }
  // A device vector of at least n ones (bias products through cuBLAS), filled at the end.
  void need_ones(int64_t n) { ones_count_ = std::max(ones_count_, n); }
  const float* ones() const { return ones_; }
  double* partials() const { return partials_; }
  uint64_t seed() const { return settings_.seed; }
  uint64_t forward_calls() const { return forward_calls_; }
  // One line per layer in model_info: algorithms, workspaces, what ran where.
  void note(const std::string& line) { notes_.push_back(line); }
  void add_autotune_ms(double ms) { autotune_ms_ += ms; }
  // Scratch for exhaustive autotuning (the workspace limit, or half the free memory when less),
  // made on first use and given back before the model runs.
  void* tune_workspace(size_t* bytes);

 private:
  void make_tensors(const dlhost_graph& graph);
  void make_params(const dlhost_graph& graph);
  void lower(const dlhost_graph& graph);
  void run(const std::vector<Step>& steps, const dlhost_grad_ready* ready, const char* phase);
  void describe();
  // The calling thread's current device is per thread: every entry point makes it the model's.
  void use_device() const;
  float* part(int32_t param, int32_t which, size_t bytes);
  // fp16: the loss scale the gradients now carry (read from the device); 1 otherwise.
  float gradient_scale();

  Settings settings_;
  dlhost_optimizer_desc optimizer_{};
  // Declared in the order they must go backwards: the libraries' handles, then the memory they
  // worked in, then the stream (its deleter waits for the work first).
  StreamHandle stream_;
  Arena arena_;
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  std::string lowering_;  // the node being lowered, for the steps it adds
  std::vector<Tensor> tensors_;
  std::vector<Param> params_;
  float *values_ = nullptr, *grads_ = nullptr, *velocity_ = nullptr;
  float *moment1_ = nullptr, *moment2_ = nullptr;  // AdamW's m and v
  UpdateState* update_state_ = nullptr;            // the update's device scalars
  UpdateRule update_rule_;
  int64_t param_floats_ = 0;
  std::vector<Step> forward_steps_, backward_steps_;
  void* workspace_ = nullptr;
  uint64_t workspace_bytes_ = 0;
  float* ones_ = nullptr;
  int64_t ones_count_ = 1;
  double* partials_ = nullptr;
  int32_t loss_tensor_ = -1;
  uint64_t forward_calls_ = 0;
  double autotune_ms_ = 0;
  void* tune_workspace_ = nullptr;
  size_t tune_bytes_ = 0;
  std::vector<std::string> notes_;
  std::string implementation_;
};

// Lowers one node: appends its forward steps now and returns what appends its backward steps,
// called in reverse node order once every forward step exists. UNIMPLEMENTED for an op or
// attribute gpu_cudnn lacks, INVALID_ARGUMENT for a node that does not hold together.
using BackwardBuilder = std::function<void()>;
BackwardBuilder lower_node(Model& m, const dlhost_graph& graph, uint32_t index);

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_MODEL_H
