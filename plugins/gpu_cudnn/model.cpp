// model.cpp — compiling a dlhost graph onto one CUDA stream and replaying the training step
// (see model.h); the layers themselves are in layers_*.cpp.
#include "model.h"

#include <cmath>
#include <cstring>

#include "kernels.h"
#include "layers.h"

namespace dlhost::gpu_cudnn {

namespace {

// cuBLAS takes its scratch from the handle; given one here, it never allocates in a step.
constexpr uint64_t kCublasWorkspace = uint64_t{32} << 20;
// Parameters start on 256-byte boundaries inside their arenas, as cuDNN and cuBLAS prefer.
constexpr int64_t kParamAlign = 64;
// Dynamic loss scaling as PyTorch's GradScaler: start at 2^16, halve on a non-finite step,
// double after this many finite ones.
constexpr float kInitialLossScale = 65536.0f;
constexpr int32_t kLossScaleGrowthInterval = 2000;

bool mixed(Precision p) { return p == Precision::kBf16 || p == Precision::kFp16; }

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    default:
      return "fp32";
  }
}

Settings read_settings(const sdk::Options& options, Settings s) {
  s.seed = static_cast<uint64_t>(options.get_int("seed", static_cast<int64_t>(s.seed)));
  if (auto p = options.get("precision")) {
    if (*p == "fp32")
      s.precision = Precision::kFp32;
    else if (*p == "tf32")
      s.precision = Precision::kTf32;
    else if (*p == "bf16")
      s.precision = Precision::kBf16;
    else if (*p == "fp16")
      s.precision = Precision::kFp16;
    else
      sdk::invalid("gpu_cudnn: option precision=" + *p + ": expected fp32|tf32|bf16|fp16");
  }
  if (options.get("loss_scale")) {
    const double scale = options.get_double("loss_scale", 0.0);
    if (!(scale >= 0.0 && scale <= 3.0e38))
      sdk::invalid("gpu_cudnn: option loss_scale=" + *options.get("loss_scale") +
                   ": expected a number >= 0 (0: dynamic)");
    s.loss_scale = static_cast<float>(scale);
  }
  if (auto a = options.get("algo")) {
    if (*a != "heuristic" && *a != "exhaustive")
      sdk::invalid("gpu_cudnn: option algo=" + *a + ": expected heuristic|exhaustive");
    s.exhaustive = *a == "exhaustive";
  }
  if (options.get("workspace_limit_mb")) {
    const int64_t mb = options.get_int_in("workspace_limit_mb", 0, 0, int64_t{1} << 30);
    s.workspace_limit = static_cast<uint64_t>(mb) << 20;
  }
  return s;
}

Model::Model(const dlhost_graph& graph, const dlhost_optimizer_desc& optimizer,
             const Settings& settings)
    : settings_(settings), optimizer_(optimizer) {
  if (optimizer.kind != DLHOST_OPTIMIZER_SGD && optimizer.kind != DLHOST_OPTIMIZER_ADAMW)
    sdk::unimplemented("gpu_cudnn: optimizer kind " + std::to_string(optimizer.kind) +
                       " (SGD and AdamW)");
  // Every handle is owned as soon as it exists: a throw below gives all of them back.
  check_cuda(cudaSetDevice(settings_.device), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_.reset(stream);
  arena_.use_stream(stream);
  cudnnHandle_t cudnn = nullptr;
  check_cudnn(cudnnCreate(&cudnn), "cudnnCreate");
  cudnn_.reset(cudnn);
  check_cudnn(cudnnSetStream(cudnn, stream), "cudnnSetStream");
  cublasHandle_t cublas = nullptr;
  check_cublas(cublasCreate(&cublas), "cublasCreate");
  cublas_.reset(cublas);
  check_cublas(cublasSetStream(cublas, stream), "cublasSetStream");
  // Strict fp32 keeps cuBLAS on FFMA kernels; tf32 lets it round products to TF32 tensor cores.
  check_cublas(
      cublasSetMathMode(cublas, settings_.precision == Precision::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                        : CUBLAS_DEFAULT_MATH),
      "cublasSetMathMode");
  check_cublas(cublasSetWorkspace(cublas, arena_.alloc(kCublasWorkspace, "cuBLAS workspace"),
                                  kCublasWorkspace),
               "cublasSetWorkspace");
  make_tensors(graph);
  make_params(graph);
  lower(graph);
  if (tune_workspace_ != nullptr) arena_.release(tune_workspace_);
  if (workspace_bytes_ > 0) workspace_ = arena_.alloc(workspace_bytes_, "library workspace");
  ones_ = arena_.alloc_n<float>(ones_count_, "ones");
  const std::vector<float> ones(static_cast<size_t>(ones_count_), 1.0f);
  upload(ones_, ones.data(), ones.size() * 4, "ones");
  partials_ = arena_.alloc_n<double>(kReduceBlocks, "reduction partials");
  // d(loss)/d(loss), read by the loss's backward (fp16: the loss scale, seeded every backward).
  const float one = 1.0f;
  if (settings_.precision != Precision::kFp16)
    upload(tensors_[loss_tensor_].grad, &one, 4, "the loss's gradient");
  init_update_state(update_state_,
                    settings_.precision == Precision::kFp16 && settings_.loss_scale > 0.0f
                        ? settings_.loss_scale
                        : (settings_.precision == Precision::kFp16 ? kInitialLossScale : 1.0f),
                    stream);
  check_cuda(cudaGetLastError(), "compile: init_update_state");
  check_cuda(cudaStreamSynchronize(stream), "compile");
  describe();
}

void Model::upload(void* dst, const void* src, size_t bytes, const std::string& what) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()),
             "upload of " + what);
}

Staging::Staging(size_t bytes) {
  check_cuda(cudaMallocHost(&host, bytes == 0 ? 1 : bytes), "cudaMallocHost for an input");
  const cudaError_t e = cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    cudaFreeHost(host);
    check_cuda(e, "cudaEventCreate for an input");
  }
}

Staging::~Staging() {
  cudaEventSynchronize(uploaded);
  cudaEventDestroy(uploaded);
  cudaFreeHost(host);
}

void* Model::tune_workspace(size_t* bytes) {
  if (tune_workspace_ == nullptr) {
    size_t free = 0, total = 0;
    check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    tune_bytes_ = std::min<size_t>(settings_.workspace_limit, free / 2);
    tune_workspace_ = arena_.alloc(tune_bytes_, "autotuning workspace");
  }
  *bytes = tune_bytes_;
  return tune_workspace_;
}

// The members give everything back (model.h); the device must be done with it first.
Model::~Model() { cudaStreamSynchronize(stream()); }

void Model::make_tensors(const dlhost_graph& graph) {
  tensors_.resize(static_cast<size_t>(graph.num_tensors));
  for (int32_t id = 0; id < graph.num_tensors; ++id) {
    const dlhost_tensor_desc& d = *graph.tensors[id];
    Tensor& t = tensors_[id];
    t.name = d.name != nullptr ? d.name : "";
    t.dtype = d.dtype;
    t.dims.assign(d.dims, d.dims + d.rank);
    for (int64_t x : t.dims) t.count *= x;
  }
  for (int32_t k = 0; k < graph.num_inputs; ++k) tensor(graph.inputs[k]).is_input = true;
  for (Tensor& t : tensors_) {
    if (t.dtype == DLHOST_DTYPE_I32 && t.is_input) {
      t.ids = arena_.alloc_n<int32_t>(t.count, t.name);
      continue;
    }
    if (t.dtype != DLHOST_DTYPE_F32)
      sdk::unimplemented("gpu_cudnn: tensor '" + t.name + "' of dtype " + std::to_string(t.dtype) +
                         " (F32 tensors and I32 inputs only)");
    t.value = arena_.alloc_n<float>(t.count, t.name);
    if (!t.is_input) t.grad = arena_.alloc_n<float>(t.count, t.name + " gradient");
  }
  if (graph.loss < 0 || graph.loss >= graph.num_tensors || tensors_[graph.loss].count != 1 ||
      tensors_[graph.loss].grad == nullptr)
    sdk::invalid("gpu_cudnn: the graph's loss is not a computed scalar");
  loss_tensor_ = graph.loss;
}

void Model::make_params(const dlhost_graph& graph) {
  params_.resize(static_cast<size_t>(graph.num_params));
  std::vector<int64_t> offsets;
  for (int32_t id = 0; id < graph.num_params; ++id) {
    params_[id].name = graph.params[id]->name != nullptr ? graph.params[id]->name : "";
    params_[id].count = graph.params[id]->count;
    offsets.push_back(param_floats_);
    param_floats_ += (params_[id].count + kParamAlign - 1) / kParamAlign * kParamAlign;
  }
  values_ = arena_.alloc_n<float>(param_floats_, "parameters");
  grads_ = arena_.alloc_n<float>(param_floats_, "parameter gradients");
  if (optimizer_.kind == DLHOST_OPTIMIZER_ADAMW) {
    moment1_ = arena_.alloc_n<float>(param_floats_, "AdamW first moments");
    moment2_ = arena_.alloc_n<float>(param_floats_, "AdamW second moments");
  } else if (optimizer_.momentum != 0.0f) {
    velocity_ = arena_.alloc_n<float>(param_floats_, "velocities");
  }
  update_state_ = arena_.alloc_n<UpdateState>(1, "update scalars");
  update_rule_.clip_norm = optimizer_.clip_norm;
  update_rule_.loss_scaling = settings_.precision == Precision::kFp16;
  update_rule_.dynamic_scale = update_rule_.loss_scaling && settings_.loss_scale == 0.0f;
  update_rule_.growth_interval = kLossScaleGrowthInterval;
  if (optimizer_.kind == DLHOST_OPTIMIZER_ADAMW) {
    update_rule_.beta1 = optimizer_.beta1;  // the kit completed an older struct's defaults
    update_rule_.beta2 = optimizer_.beta2;
  }
  for (int32_t id = 0; id < graph.num_params; ++id) {
    params_[id].owner = graph.params[id]->node;
    params_[id].value = values_ + offsets[id];
    params_[id].grad = grads_ + offsets[id];
  }
}

void Model::lower(const dlhost_graph& graph) {
  std::vector<std::pair<int32_t, BackwardBuilder>> builders;
  for (int32_t i = 0; i < graph.num_nodes; ++i) {
    const dlhost_node& node = *graph.nodes[i];
    if (node.struct_size < DLHOST_NODE_STRUCT_SIZE)
      sdk::invalid("gpu_cudnn: node struct smaller than ABI 1.0's");
    if (node.op == DLHOST_OP_INPUT) continue;
    // bf16 and fp16 reach the cuBLAS products only; cuDNN's convolutions and LSTM stay fp32.
    if (mixed(settings_.precision) && (node.op == DLHOST_OP_CONV2D || node.op == DLHOST_OP_LSTM))
      node_unimplemented(node, std::string("precision ") + precision_name(settings_.precision) +
                                   " covers the cuBLAS ops (fc, attention, tied_fc), not cuDNN's "
                                   "convolution or LSTM");
    lowering_ = node_label(node);
    builders.emplace_back(i, lower_node(*this, graph, static_cast<uint32_t>(i)));
  }
  // fp16: every backward starts from the loss scale (it changes on the device).
  if (settings_.precision == Precision::kFp16)
    backward_steps_.push_back({[this, dL = tensors_[loss_tensor_].grad] {
                                 seed_loss_gradient(update_state_, dL, stream());
                               },
                               -1, "the loss scale"});
  for (auto b = builders.rbegin(); b != builders.rend(); ++b) {
    const dlhost_node& node = *graph.nodes[b->first];
    lowering_ = node_label(node);
    b->second();
    // A tied table is listed by its reader too: ready once, after its owner's contribution.
    for (int32_t k = 0; k < node.num_params; ++k)
      if (param(node.params[k]).owner == b->first) add_ready(node.params[k]);
  }
  for (const Tensor& t : tensors_)
    if (t.ids != nullptr && t.id_limit == 0)
      sdk::unimplemented("gpu_cudnn: I32 input '" + t.name + "' is read by no op it knows");
}

Tensor& Model::tensor(int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(tensors_.size()))
    sdk::invalid("gpu_cudnn: tensor id " + std::to_string(id) + " out of range");
  return tensors_[id];
}

Param& Model::param(int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(params_.size()))
    sdk::invalid("gpu_cudnn: parameter id " + std::to_string(id) + " out of range");
  return params_[id];
}

float Model::beta_for(Tensor& t) {
  const float beta = t.grad_written ? 1.0f : 0.0f;
  t.grad_written = true;
  return beta;
}

// --- the training step -----------------------------------------------------------------------

void Model::use_device() const { check_cuda(cudaSetDevice(settings_.device), "cudaSetDevice"); }

void Model::set_input(int32_t id, const void* data, size_t bytes) {
  use_device();
  Tensor& t = tensor(id);
  if (!t.is_input) sdk::invalid("gpu_cudnn: tensor '" + t.name + "' is not a graph input");
  const size_t expected = static_cast<size_t>(t.count) * 4;
  if (data == nullptr || bytes != expected)
    sdk::invalid("gpu_cudnn: input '" + t.name + "' takes " + std::to_string(expected) +
                 " bytes, got " + std::to_string(bytes));
  if (t.ids != nullptr) {
    const auto* ids = static_cast<const int32_t*>(data);
    for (int64_t i = 0; i < t.count; ++i)
      if (ids[i] < 0 || ids[i] >= t.id_limit)
        sdk::invalid("gpu_cudnn: input '" + t.name + "' element " + std::to_string(i) + " is " +
                     std::to_string(ids[i]) + ", outside [0, " + std::to_string(t.id_limit) + ")");
  }
  // The caller's memory is borrowed for the call only, and waiting for the device here would
  // stall every step: copy into this input's pinned staging (once the previous upload from it
  // has been read) and enqueue the upload from there.
  if (!t.staging) t.staging = std::make_unique<Staging>(bytes);
  check_cuda(cudaEventSynchronize(t.staging->uploaded), "set_input: previous upload");
  std::memcpy(t.staging->host, data, bytes);
  void* dst = t.ids != nullptr ? static_cast<void*>(t.ids) : static_cast<void*>(t.value);
  check_cuda(cudaMemcpyAsync(dst, t.staging->host, bytes, cudaMemcpyHostToDevice, stream()),
             "set_input '" + t.name + "'");
  check_cuda(cudaEventRecord(t.staging->uploaded, stream()), "set_input: cudaEventRecord");
}

dlhost_buffer Model::input_buffer(int32_t id) {
  const Tensor& t = tensor(id);
  if (!t.is_input)
    sdk::invalid("gpu_cudnn: input_buffer: tensor '" + t.name + "' is not a graph input");
  dlhost_buffer b{};
  b.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  b.data = t.ids != nullptr ? static_cast<void*>(t.ids) : static_cast<void*>(t.value);
  b.bytes = static_cast<uint64_t>(t.count) * 4;
  b.dtype = t.dtype;
  b.memory_space = DLHOST_MEMORY_DEVICE;
  b.device = settings_.device;
  return b;
}

void Model::read_tensor(int32_t id, void* data, size_t bytes) {
  const Tensor& t = tensor(id);
  if (t.value == nullptr)
    sdk::invalid("gpu_cudnn: read_tensor: tensor '" + t.name + "' is not F32");
  if (data == nullptr || bytes != static_cast<size_t>(t.count) * 4)
    sdk::invalid("gpu_cudnn: read_tensor: tensor '" + t.name + "' holds " +
                 std::to_string(t.count * 4) + " bytes, asked for " + std::to_string(bytes));
  use_device();
  check_cuda(cudaMemcpyAsync(data, t.value, bytes, cudaMemcpyDeviceToHost, stream()),
             "read_tensor '" + t.name + "'");
  check_cuda(cudaStreamSynchronize(stream()), "read_tensor '" + t.name + "'");
}

// A launch error is sticky until read: reading it after every step (a host-side query, no
// synchronization) names the node whose launch failed instead of the phase.
void Model::run(const std::vector<Step>& steps, const dlhost_grad_ready* ready, const char* phase) {
  use_device();
  for (const Step& s : steps) {
    if (s.run) {
      s.run();
      check_cuda(cudaGetLastError(), std::string(phase) + " of " + s.what);
    } else if (ready != nullptr && ready->fn != nullptr) {
      ready->fn(ready->user, s.ready_param);
    }
  }
}

void Model::forward() {
  run(forward_steps_, nullptr, "forward");
  ++forward_calls_;
}

void Model::backward(const dlhost_grad_ready* ready) {
  if (forward_calls_ == 0) sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "backward before forward");
  if (ready != nullptr && ready->struct_size < DLHOST_GRAD_READY_STRUCT_SIZE)
    sdk::invalid("gpu_cudnn: grad_ready struct smaller than ABI 1.0's");
  run(backward_steps_, ready, "backward");
}

// The scalars (clipping factor, fp16's unscaling and skip, AdamW's bias corrections) are made on
// the device from the gradients' sum of squares, so update never waits for the device.
void Model::update() {
  use_device();
  const bool reduce = update_rule_.clip_norm > 0.0f || update_rule_.loss_scaling;
  if (reduce) sum_squares(param_floats_, grads_, nullptr, partials_, stream());
  prepare_update(reduce ? partials_ : nullptr, update_rule_, update_state_, stream());
  check_cuda(cudaGetLastError(), "update: the gradient norm and the update's scalars");
  if (optimizer_.kind == DLHOST_OPTIMIZER_ADAMW)
    adamw_step(param_floats_, optimizer_.learning_rate, optimizer_.beta1, optimizer_.beta2,
               optimizer_.epsilon, optimizer_.weight_decay, update_state_, grads_, values_,
               moment1_, moment2_, stream());
  else
    sgd_step(param_floats_, optimizer_.learning_rate, optimizer_.momentum, optimizer_.weight_decay,
             update_state_, grads_, values_, velocity_, stream());
  check_cuda(cudaGetLastError(), "update: the optimizer step");
}

cublasComputeType_t Model::gemm_compute() const {
  switch (settings_.precision) {
    case Precision::kTf32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Precision::kBf16:
      return CUBLAS_COMPUTE_32F_FAST_16BF;
    case Precision::kFp16:
      return CUBLAS_COMPUTE_32F_FAST_16F;
    default:
      return CUBLAS_COMPUTE_32F;
  }
}

float Model::gradient_scale() {
  if (settings_.precision != Precision::kFp16) return 1.0f;
  UpdateState st{};
  check_cuda(cudaMemcpyAsync(&st, update_state_, sizeof st, cudaMemcpyDeviceToHost, stream()),
             "reading the loss scale");
  check_cuda(cudaStreamSynchronize(stream()), "reading the loss scale");
  return st.loss_scale;
}

void Model::synchronize() { check_cuda(cudaStreamSynchronize(stream()), "synchronize"); }

float Model::loss() const {
  float value = 0;
  check_cuda(
      cudaMemcpyAsync(&value, tensors_[loss_tensor_].value, 4, cudaMemcpyDeviceToHost, stream()),
      "read_loss");
  check_cuda(cudaStreamSynchronize(stream()), "read_loss");
  return value;
}

// --- parameters ------------------------------------------------------------------------------

float* Model::part(int32_t id, int32_t which, size_t bytes) {
  Param& p = param(id);
  if (which != DLHOST_PARAM_VALUE && which != DLHOST_PARAM_GRAD)
    sdk::invalid("gpu_cudnn: unknown parameter part " + std::to_string(which));
  if (bytes != static_cast<size_t>(p.count) * 4)
    sdk::invalid("gpu_cudnn: parameter '" + p.name + "' holds " + std::to_string(p.count * 4) +
                 " bytes, got " + std::to_string(bytes));
  return which == DLHOST_PARAM_VALUE ? p.value : p.grad;
}

void Model::read_param(int32_t id, int32_t which, void* data, size_t bytes) {
  float* src = part(id, which, bytes);
  use_device();
  if (data == nullptr) sdk::invalid("gpu_cudnn: read_param into NULL");
  check_cuda(cudaMemcpyAsync(data, src, bytes, cudaMemcpyDeviceToHost, stream()), "read_param");
  check_cuda(cudaStreamSynchronize(stream()), "read_param");
  // fp16's gradients carry the loss scale on the device; what is read is the loss's gradient.
  if (which == DLHOST_PARAM_GRAD && settings_.precision == Precision::kFp16) {
    const float inv = 1.0f / gradient_scale();
    auto* g = static_cast<float*>(data);
    for (size_t i = 0; i < bytes / 4; ++i) g[i] *= inv;
  }
}

void Model::write_param(int32_t id, int32_t which, const void* data, size_t bytes) {
  float* dst = part(id, which, bytes);
  use_device();
  if (data == nullptr) sdk::invalid("gpu_cudnn: write_param from NULL");
  std::vector<float> scaled;
  if (which == DLHOST_PARAM_GRAD && settings_.precision == Precision::kFp16) {
    const float s = gradient_scale();
    const auto* g = static_cast<const float*>(data);
    scaled.assign(g, g + bytes / 4);
    for (float& v : scaled) v *= s;
    data = scaled.data();
  }
  check_cuda(cudaMemcpyAsync(dst, data, bytes, cudaMemcpyHostToDevice, stream()), "write_param");
  check_cuda(cudaStreamSynchronize(stream()), "write_param");
}

void Model::param_buffers(int32_t id, dlhost_buffer* value, dlhost_buffer* grad) {
  const Param& p = param(id);
  for (auto [out, data] : {std::pair{value, p.value}, std::pair{grad, p.grad}}) {
    if (out == nullptr) continue;
    if (DLHOST_HAS_FIELD(out, dlhost_buffer, data)) out->data = data;
    if (DLHOST_HAS_FIELD(out, dlhost_buffer, bytes))
      out->bytes = static_cast<uint64_t>(p.count) * 4;
    if (DLHOST_HAS_FIELD(out, dlhost_buffer, dtype)) out->dtype = DLHOST_DTYPE_F32;
    if (DLHOST_HAS_FIELD(out, dlhost_buffer, memory_space))
      out->memory_space = DLHOST_MEMORY_DEVICE;
    if (DLHOST_HAS_FIELD(out, dlhost_buffer, device)) out->device = settings_.device;
  }
}

void Model::describe() {
  implementation_ =
      std::string("cuDNN + cuBLAS on cuda") + std::to_string(settings_.device) + ", precision " +
      precision_name(settings_.precision) +
      (settings_.precision == Precision::kFp32 ? " (TF32 off)" : "") +
      (mixed(settings_.precision)
           ? std::string(" (cuBLAS products on ") + precision_name(settings_.precision) +
                 " tensor cores, fp32 tensors, master weights and optimizer state" +
                 (settings_.precision == Precision::kFp16 ? settings_.loss_scale > 0.0f
                                                                ? ", static loss scale"
                                                                : ", dynamic loss scale from 65536"
                                                          : "") +
                 ")"
           : std::string()) +
      ", optimizer " + (optimizer_.kind == DLHOST_OPTIMIZER_ADAMW ? "AdamW" : "SGD") + ", algo " +
      (settings_.exhaustive ? "exhaustive" : "heuristic") + ", workspace limit " +
      std::to_string(settings_.workspace_limit >> 20) + " MiB, shared workspace " +
      std::to_string(workspace_bytes_ >> 10) + " KiB, autotune " +
      std::to_string(static_cast<int64_t>(autotune_ms_)) + " ms";
  for (const std::string& n : notes_) implementation_ += "; " + n;
}

sdk::ModelInfo Model::info() const {
  const uint64_t param_bytes = static_cast<uint64_t>(param_floats_) * 4;
  return {1, implementation_.c_str(), param_bytes, arena_.in_use() - param_bytes};
}

}  // namespace dlhost::gpu_cudnn
