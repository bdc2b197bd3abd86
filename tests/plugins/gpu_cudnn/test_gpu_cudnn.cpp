// test_gpu_cudnn.cpp — the gpu_cudnn backend through its C table and ABI 1.2 extensions, as the
// host drives it. Without a device (this development machine): it loads, says why it is not
// usable, and declares its capabilities, stream, events, device memory and options. With one:
// a small CNN trains on the device (loss goes down), events time a step on the model's stream,
// memory statistics and device buffers are sane, uploads through input_buffer, device-to-device
// copies and tensor reads return what was written, and bad options fail with the right codes.
// The convolution choice rule (conv_choice.h) is checked without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conv_choice.h"
#include "core/graph.h"
#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "dlhost/dlhost_device.h"
#include "gpu_test_plugins.h"
#include "graph_attrs.h"
#include "kernels.h"

namespace dlhost {
namespace {

using namespace dlhost::test_attrs;

const LoadedPlugin& plugin() { return gpu_test::backend_plugin("gpu_cudnn"); }

template <class Ext>
const Ext* extension(int32_t type) {
  return reinterpret_cast<const Ext*>(dlhost_find_extension(plugin().table->extensions, type));
}

int32_t code_of(dlhost_status* s) {
  if (s == nullptr) return DLHOST_CODE_OK;
  const int32_t code = host_api()->status_code(s);
  host_api()->status_destroy(s);
  return code;
}

TEST(GpuCudnn, ReportsItsDeviceOrWhyNot) {
  const LoadedPlugin& p = plugin();
  const dlhost_backend_api* api = p.table->backend;
  if (!p.usable) {
    std::printf("gpu_cudnn not usable here: %s\n", p.unusable_reason.c_str());
    EXPECT_NE(p.unusable_reason.find("no"), std::string::npos) << p.unusable_reason;
    EXPECT_TRUE(p.unusable_reason.find("device") != std::string::npos ||
                p.unusable_reason.find("compute capability") != std::string::npos)
        << p.unusable_reason;
    EXPECT_EQ(api->device_count(), 0);
    return;
  }
  ASSERT_GT(api->device_count(), 0);
  const dlhost_device_info* info = nullptr;
  ASSERT_EQ(code_of(api->device_info(0, &info)), DLHOST_CODE_OK);
  std::printf("gpu_cudnn device: %s, %d SMs, %s, %s\n", info->model, info->cores, info->isa,
              info->library);
  EXPECT_EQ(info->kind, DLHOST_DEVICE_GPU);
  EXPECT_STREQ(info->name, "cuda0");
  EXPECT_EQ(std::string(info->isa).rfind("sm_", 0), 0u) << info->isa;
  EXPECT_GT(info->cores, 0);
  EXPECT_GT(info->memory_bytes, 0u);
  for (const char* part : {"compute capability", "MHz SM", "MHz memory"})
    EXPECT_NE(std::string(info->model).find(part), std::string::npos) << info->model;
  for (const char* part : {"cuDNN 9.", "cuBLAS ", "CUDA runtime ", "driver "})
    EXPECT_NE(std::string(info->library).find(part), std::string::npos) << info->library;
}

TEST(GpuCudnn, DeclaresWhatItImplements) {
  const auto* caps = extension<dlhost_backend_caps_ext>(DLHOST_EXT_BACKEND_CAPS);
  ASSERT_NE(caps, nullptr);
  dlhost_backend_caps c{};
  c.struct_size = DLHOST_BACKEND_CAPS_STRUCT_SIZE;
  ASSERT_EQ(code_of(caps->capabilities(&c)), DLHOST_CODE_OK);
  EXPECT_EQ(c.op_count, 19);  // every op through ABI 1.4's Transformer ops
  EXPECT_EQ(c.ops[c.op_count - 1], DLHOST_OP_TIED_FC);
  for (int32_t p :
       {DLHOST_PRECISION_FP32, DLHOST_PRECISION_TF32, DLHOST_PRECISION_BF16, DLHOST_PRECISION_FP16})
    EXPECT_TRUE(c.precisions & (1u << p)) << "precision " << p;
  EXPECT_TRUE(c.optimizers & (1u << DLHOST_OPTIMIZER_SGD));
  EXPECT_TRUE(c.optimizers & (1u << DLHOST_OPTIMIZER_ADAMW));
  EXPECT_EQ(c.memory_spaces, 1u << DLHOST_MEMORY_DEVICE);
  EXPECT_EQ(c.asynchronous, 1);
  // An asynchronous backend must export its stream and events.
  EXPECT_NE(extension<dlhost_stream_ext>(DLHOST_EXT_STREAM), nullptr);
  EXPECT_NE(extension<dlhost_events_ext>(DLHOST_EXT_EVENTS), nullptr);
  EXPECT_NE(extension<dlhost_device_memory_ext>(DLHOST_EXT_DEVICE_MEMORY), nullptr);
  const auto* schema = extension<dlhost_option_schema_ext>(DLHOST_EXT_OPTION_SCHEMA);
  ASSERT_NE(schema, nullptr);
  ASSERT_EQ(schema->count, 2);
  EXPECT_STREQ(schema->options[0]->name, "algo");
  EXPECT_STREQ(schema->options[0]->choices, "heuristic|exhaustive");
  EXPECT_STREQ(schema->options[1]->name, "workspace_limit_mb");
}

// The kernel's mask formula, run on the host, is the ABI's (no device needed).
TEST(GpuCudnn, DropoutMaskIsTheAbis) {
  int64_t kept = 0, n = 0;
  for (uint64_t seed : {0ull, 42ull, 0xFFFFFFFFFFFFull})
    for (uint32_t node : {0u, 7u, 123456u})
      for (uint64_t step : {0ull, 1ull, 99ull})
        for (float p : {0.0f, 0.1f, 0.5f, 0.9f})
          for (uint64_t i = 0; i < 2000; i += 7, ++n) {
            const bool want = dlhost_dropout_keep(seed, node, step, i, p) != 0;
            ASSERT_EQ(gpu_cudnn::dropout_keep(seed, node, step, i, p), want)
                << "seed " << seed << " node " << node << " step " << step << " index " << i
                << " p " << p;
            kept += want;
          }
  EXPECT_GT(kept, n / 3);  // p averages 0.375: the check saw both outcomes many times
  EXPECT_LT(kept, n);
}

// The convolution choice keeps the math type its algorithm was ranked under (a tf32 case may
// pick an FMA algorithm from a tensor-op ranking: it must then run under FMA), and strict fp32
// neither picks a tensor-op algorithm nor runs anything but FMA.
TEST(GpuCudnn, ConvolutionChoiceKeepsItsMathType) {
  auto perf_of = [](cudnnConvolutionFwdAlgo_t algo, size_t memory, cudnnMathType_t math) {
    cudnnConvolutionFwdAlgoPerf_t p{};
    p.algo = algo;
    p.status = CUDNN_STATUS_SUCCESS;
    p.memory = memory;
    p.mathType = math;
    return p;
  };
  cudnnConvolutionFwdAlgoPerf_t perf[3] = {
      perf_of(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, size_t{4} << 30, CUDNN_TENSOR_OP_MATH),
      perf_of(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, 1024, CUDNN_TENSOR_OP_MATH),
      perf_of(CUDNN_CONVOLUTION_FWD_ALGO_GEMM, 2048, CUDNN_FMA_MATH)};
  // tf32, 1 GiB limit: the first fits only after the over-limit one; it keeps TENSOR_OP.
  const int tf32 = gpu_cudnn::pick_algorithm(perf, 3, uint64_t{1} << 30, true);
  ASSERT_EQ(tf32, 1);
  const gpu_cudnn::ConvChoice a = gpu_cudnn::choice_of(perf[tf32], true);
  EXPECT_EQ(a.algo, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  EXPECT_EQ(a.memory, 1024u);
  EXPECT_EQ(a.math, CUDNN_TENSOR_OP_MATH);
  // tf32 picking an FMA algorithm runs it under FMA, not under the descriptor's tensor-op type.
  perf[1].status = CUDNN_STATUS_NOT_SUPPORTED;
  const int fma = gpu_cudnn::pick_algorithm(perf, 3, uint64_t{1} << 30, true);
  ASSERT_EQ(fma, 2);
  EXPECT_EQ(gpu_cudnn::choice_of(perf[fma], true).math, CUDNN_FMA_MATH);
  // Strict fp32 skips tensor-op algorithms and stays on FMA even for a DEFAULT_MATH ranking.
  perf[1].status = CUDNN_STATUS_SUCCESS;
  EXPECT_EQ(gpu_cudnn::pick_algorithm(perf, 3, uint64_t{8} << 30, false), 2);
  perf[2].mathType = CUDNN_DEFAULT_MATH;
  EXPECT_EQ(gpu_cudnn::choice_of(perf[2], false).math, CUDNN_FMA_MATH);
  EXPECT_EQ(gpu_cudnn::pick_algorithm(perf, 2, uint64_t{8} << 30, false), -1);
}

// --- on a device -------------------------------------------------------------------------------

#define REQUIRE_DEVICE()                                                               \
  do {                                                                                 \
    if (!plugin().usable) GTEST_SKIP() << "no GPU here: " << plugin().unusable_reason; \
  } while (0)

// conv 3x3 -> relu -> max pool -> fc(10) -> softmax cross-entropy over [N, 2, 8, 8].
std::unique_ptr<Graph> small_cnn(int64_t batch, int32_t* data, int32_t* labels, int32_t* logits) {
  GraphBuilder b("small_cnn", batch);
  *data = b.input("data", DLHOST_DTYPE_F32, {2, 8, 8});
  int32_t x = b.conv2d("conv", *data, conv(4, 3, 1, 1));
  x = b.activation("relu", x, act(DLHOST_ACTIVATION_RELU));
  x = b.pool2d("pool", x, pool(DLHOST_POOL_MAX, 2, 2, 0, false, true));
  x = b.fc("fc", x, fc(10));
  *logits = x;
  *labels = b.input("labels", DLHOST_DTYPE_I32, {});
  b.softmax_cross_entropy("loss", x, *labels);
  return b.finish();
}

class GpuCudnnDevice : public ::testing::Test {
 protected:
  void open(const std::string& key = "", const std::string& value = "") {
    api = plugin().table->backend;
    options.values["seed"] = "7";
    if (!key.empty()) options.values[key] = value;
    ASSERT_EQ(code_of(api->context_create(0, &options, &context)), DLHOST_CODE_OK);
  }
  int32_t compile() {
    graph = small_cnn(16, &data, &labels, &logits);
    dlhost_optimizer_desc opt{};
    opt.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
    opt.kind = DLHOST_OPTIMIZER_SGD;
    opt.learning_rate = 0.1f;
    opt.momentum = 0.9f;
    opt.clip_norm = 5.0f;
    return code_of(api->compile(context, graph->view(), &opt, &options, &model));
  }
  void init() {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-0.3f, 0.3f);
    for (int32_t p = 0; p < graph->num_params(); ++p) {
      std::vector<float> w(static_cast<size_t>(graph->param(p).count));
      for (float& v : w) v = u(rng);
      ASSERT_EQ(code_of(api->write_param(model, p, DLHOST_PARAM_VALUE, w.data(), w.size() * 4)),
                DLHOST_CODE_OK);
    }
    std::vector<float> x(16 * 2 * 8 * 8);
    for (float& v : x) v = u(rng);
    std::vector<int32_t> y(16);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>(i % 10);
    ASSERT_EQ(code_of(api->set_input(model, data, x.data(), x.size() * 4)), DLHOST_CODE_OK);
    ASSERT_EQ(code_of(api->set_input(model, labels, y.data(), y.size() * 4)), DLHOST_CODE_OK);
  }
  float step() {
    EXPECT_EQ(code_of(api->forward(model)), DLHOST_CODE_OK);
    EXPECT_EQ(code_of(api->backward(model, nullptr)), DLHOST_CODE_OK);
    EXPECT_EQ(code_of(api->update(model)), DLHOST_CODE_OK);
    float loss = 0;
    EXPECT_EQ(code_of(api->read_loss(model, &loss)), DLHOST_CODE_OK);
    return loss;
  }
  void TearDown() override {
    if (model != nullptr) api->model_destroy(model);
    if (context != nullptr) api->context_destroy(context);
  }
  const dlhost_backend_api* api = nullptr;
  dlhost_options options;
  dlhost_context* context = nullptr;
  dlhost_model* model = nullptr;
  std::unique_ptr<Graph> graph;
  int32_t data = -1, labels = -1, logits = -1;
};

TEST_F(GpuCudnnDevice, SmallCnnLossGoesDown) {
  REQUIRE_DEVICE();
  open();
  ASSERT_EQ(compile(), DLHOST_CODE_OK);
  init();
  const float first = step();
  float last = first;
  for (int i = 0; i < 30; ++i) last = step();
  std::printf("small CNN on the GPU: loss %.4f -> %.4f\n", first, last);
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, 0.5f * first);
}

TEST_F(GpuCudnnDevice, EventsTimeAStepAndMemoryIsCounted) {
  REQUIRE_DEVICE();
  open("algo", "exhaustive");
  ASSERT_EQ(compile(), DLHOST_CODE_OK);
  init();
  const auto* ev = extension<dlhost_events_ext>(DLHOST_EXT_EVENTS);
  dlhost_event *start = nullptr, *end = nullptr;
  ASSERT_EQ(code_of(ev->event_create(model, &start)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(ev->event_create(model, &end)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(ev->event_record(start)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(api->forward(model)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(ev->event_record(end)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(ev->event_synchronize(end)), DLHOST_CODE_OK);
  double ms = -1;
  ASSERT_EQ(code_of(ev->event_elapsed_ms(start, end, &ms)), DLHOST_CODE_OK);
  EXPECT_GT(ms, 0.0);
  ev->event_destroy(start);
  ev->event_destroy(end);

  const auto* mem = extension<dlhost_device_memory_ext>(DLHOST_EXT_DEVICE_MEMORY);
  dlhost_memory_stats s{};
  s.struct_size = DLHOST_MEMORY_STATS_STRUCT_SIZE;
  ASSERT_EQ(code_of(mem->memory_stats(model, &s)), DLHOST_CODE_OK);
  EXPECT_GT(s.in_use_bytes, 0u);
  EXPECT_GE(s.peak_bytes, s.in_use_bytes);
  EXPECT_GT(s.total_bytes, s.free_bytes);
  dlhost_buffer value{}, grad{};
  value.struct_size = grad.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  ASSERT_EQ(code_of(api->param_buffers(model, 0, &value, &grad)), DLHOST_CODE_OK);
  EXPECT_EQ(value.memory_space, DLHOST_MEMORY_DEVICE);
  std::vector<float> back(static_cast<size_t>(graph->param(0).count));
  ASSERT_EQ(code_of(mem->copy_to_host(context, model, &value, 0, back.data(), back.size() * 4)),
            DLHOST_CODE_OK);
  std::vector<float> read(back.size());
  ASSERT_EQ(code_of(api->read_param(model, 0, DLHOST_PARAM_VALUE, read.data(), read.size() * 4)),
            DLHOST_CODE_OK);
  EXPECT_EQ(std::memcmp(back.data(), read.data(), back.size() * 4), 0);
  dlhost_model_info info{};
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  ASSERT_EQ(code_of(api->model_info(model, &info)), DLHOST_CODE_OK);
  const std::string impl = info.implementation;
  EXPECT_NE(impl.find("algo exhaustive"), std::string::npos) << impl;
  EXPECT_NE(impl.find("conv: fwd="), std::string::npos) << impl;
  EXPECT_NE(impl.find("TF32 off"), std::string::npos) << impl;
}

// What every `input: upload`, `data: real`, data-parallel and `evaluate: true` case relies on:
// an input's device buffer filled with copy_from_host, a device-to-device copy on the model's
// stream, tensors read back after a forward, and set_input not waiting for the device while
// the caller's memory is still free to reuse at once.
TEST_F(GpuCudnnDevice, UploadsCopiesAndTensorReads) {
  REQUIRE_DEVICE();
  open();
  ASSERT_EQ(compile(), DLHOST_CODE_OK);
  init();
  const auto* mem = extension<dlhost_device_memory_ext>(DLHOST_EXT_DEVICE_MEMORY);
  const auto* reads = extension<dlhost_tensor_read_ext>(DLHOST_EXT_TENSOR_READ);
  ASSERT_NE(reads, nullptr);
  dlhost_buffer in{};
  in.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  ASSERT_EQ(code_of(mem->input_buffer(model, data, &in)), DLHOST_CODE_OK);
  ASSERT_EQ(in.bytes, 16u * 2 * 8 * 8 * 4);
  EXPECT_EQ(in.memory_space, DLHOST_MEMORY_DEVICE);
  std::vector<float> x(in.bytes / 4), back(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) / 97.0f;
  ASSERT_EQ(code_of(mem->copy_from_host(context, model, x.data(), &in, 0, in.bytes)),
            DLHOST_CODE_OK);
  ASSERT_EQ(code_of(reads->read_tensor(model, data, back.data(), in.bytes)), DLHOST_CODE_OK);
  EXPECT_EQ(std::memcmp(x.data(), back.data(), in.bytes), 0);

  // set_input, then the caller reuses its memory before the device could have read it.
  std::vector<float> y(x.size(), 0.25f);
  ASSERT_EQ(code_of(api->set_input(model, data, y.data(), in.bytes)), DLHOST_CODE_OK);
  std::fill(y.begin(), y.end(), -1.0f);
  ASSERT_EQ(code_of(reads->read_tensor(model, data, back.data(), in.bytes)), DLHOST_CODE_OK);
  EXPECT_EQ(back[0], 0.25f);
  EXPECT_EQ(back.back(), 0.25f);

  // copy_device: the first parameter into a buffer of its own, read back equal.
  dlhost_buffer value{}, copy{};
  value.struct_size = copy.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  ASSERT_EQ(code_of(api->param_buffers(model, 0, &value, nullptr)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(mem->buffer_alloc(context, value.bytes + 64, DLHOST_DTYPE_F32, &copy)),
            DLHOST_CODE_OK);
  ASSERT_EQ(code_of(mem->copy_device(model, &value, 0, &copy, 64, value.bytes)), DLHOST_CODE_OK);
  EXPECT_EQ(code_of(mem->copy_device(model, &value, 0, &copy, 128, value.bytes)),
            DLHOST_CODE_OUT_OF_RANGE);
  std::vector<float> w(value.bytes / 4), w2(w.size());
  ASSERT_EQ(code_of(mem->copy_to_host(context, model, &copy, 64, w.data(), value.bytes)),
            DLHOST_CODE_OK);
  ASSERT_EQ(code_of(api->read_param(model, 0, DLHOST_PARAM_VALUE, w2.data(), value.bytes)),
            DLHOST_CODE_OK);
  EXPECT_EQ(std::memcmp(w.data(), w2.data(), value.bytes), 0);
  mem->buffer_free(context, &copy);

  // The logits (the fc's output, the loss's input) after a forward: [16, 10], finite.
  ASSERT_EQ(code_of(api->forward(model)), DLHOST_CODE_OK);
  ASSERT_GE(logits, 0);
  std::vector<float> z(16 * 10);
  ASSERT_EQ(code_of(reads->read_tensor(model, logits, z.data(), z.size() * 4)), DLHOST_CODE_OK);
  for (float v : z) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(code_of(reads->read_tensor(model, logits, z.data(), 4)), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of(reads->read_tensor(model, labels, z.data(), 16 * 4)),
            DLHOST_CODE_INVALID_ARGUMENT);
}

TEST_F(GpuCudnnDevice, BadOptionsFailWithTheirCodes) {
  REQUIRE_DEVICE();
  api = plugin().table->backend;
  dlhost_options scale;
  scale.values["precision"] = "fp16";
  scale.values["loss_scale"] = "-1";
  EXPECT_EQ(code_of(api->context_create(0, &scale, &context)), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(context, nullptr);
  // bf16 reaches the cuBLAS products only: a convolution graph is refused at compile.
  open("precision", "bf16");
  EXPECT_EQ(compile(), DLHOST_CODE_UNIMPLEMENTED);
  api->context_destroy(context);
  context = nullptr;
  dlhost_options algo;
  algo.values["algo"] = "fastest";
  EXPECT_EQ(code_of(api->context_create(0, &algo, &context)), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(context, nullptr);
  open("precision", "tf32");
  ASSERT_EQ(compile(), DLHOST_CODE_OK);
  init();
  std::vector<int32_t> bad(16, 10);  // label 10 of 10 classes
  EXPECT_EQ(code_of(api->set_input(model, labels, bad.data(), bad.size() * 4)),
            DLHOST_CODE_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace dlhost
