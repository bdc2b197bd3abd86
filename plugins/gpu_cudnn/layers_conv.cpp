// layers_conv.cpp — convolution on cuDNN, with its algorithms chosen once per layer at compile:
// `algo: heuristic` takes cuDNN's heuristic ranking (cudnnGet*Algorithm_v7), `algo: exhaustive`
// times every algorithm on the layer's real buffers (cudnnFind*AlgorithmEx), as frameworks'
// autotuning does. Either way the choice respects the workspace limit and, for strict fp32,
// refuses algorithms that would use TF32 tensor cores. The choice, its workspace and the tuning
// time go into model_info. Each direction has its own descriptor, set to the math type its
// algorithm was ranked under (conv_choice.h), and asks for the workspace of that pairing.
#include <algorithm>
#include <chrono>
#include <functional>
#include <initializer_list>

#include "conv_choice.h"
#include "layers.h"

namespace dlhost::gpu_cudnn {
namespace {

constexpr int kMaxAlgos = 16;  // more than any direction has (8, 6, 7 in cuDNN 9)

// Ranks a direction's algorithms by `heuristic` or `exhaustive` (each fills perf and a count)
// and returns the first that fits.
template <class Perf, class Heuristic, class Exhaustive>
ConvChoice choose(Model& m, const std::string& what, Heuristic heuristic, Exhaustive exhaustive) {
  Perf perf[kMaxAlgos];
  int n = 0;
  if (m.settings().exhaustive) {
    const auto start = std::chrono::steady_clock::now();
    check_cudnn(exhaustive(perf, &n), what + ": autotuning");
    m.add_autotune_ms(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  } else {
    check_cudnn(heuristic(perf, &n), what + ": heuristic");
  }
  const bool tf32 = m.settings().precision == Precision::kTf32;
  const int i = pick_algorithm(perf, n, m.settings().workspace_limit, tf32);
  if (i < 0)
    sdk::unimplemented("gpu_cudnn: " + what + ": no algorithm within the workspace limit of " +
                       std::to_string(m.settings().workspace_limit >> 20) + " MiB" +
                       (tf32 ? "" : " without TF32"));
  return choice_of(perf[i], tf32);
}

// Sets the direction's descriptor to the chosen math type and takes the larger of the ranked
// workspace and what cuDNN asks for that algorithm under it.
void settle(cudnnConvolutionDescriptor_t conv, ConvChoice& c, const std::string& what,
            const std::function<cudnnStatus_t(size_t*)>& workspace) {
  check_cudnn(cudnnSetConvolutionMathType(conv, c.math), what + ": math type");
  size_t bytes = 0;
  check_cudnn(workspace(&bytes), what + ": workspace size");
  c.memory = std::max(c.memory, bytes);
}

const char* fwd_name(int a) {
  static const char* const k[] = {
      "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
      "winograd",      "winograd_nonfused"};
  return a >= 0 && a < 8 ? k[a] : "?";
}
const char* data_name(int a) {
  static const char* const k[] = {"algo_0",     "algo_1",   "fft",
                                  "fft_tiling", "winograd", "winograd_nonfused"};
  return a >= 0 && a < 6 ? k[a] : "?";
}
const char* filter_name(int a) {
  static const char* const k[] = {
      "algo_0", "algo_1", "fft", "algo_3", "winograd", "winograd_nonfused", "fft_tiling"};
  return a >= 0 && a < 7 ? k[a] : "?";
}

struct Conv {
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc fwd_conv, data_conv, filter_conv;  // one per direction: each its own math type
  ConvChoice fwd, data, filter;
};

void set_conv(cudnnConvolutionDescriptor_t conv, const dlhost_node& node,
              const dlhost_conv2d_attrs& a, cudnnMathType_t math) {
  check_cudnn(
      cudnnSetConvolution2dDescriptor(
          conv, static_cast<int>(a.pad_h), static_cast<int>(a.pad_w), static_cast<int>(a.stride_h),
          static_cast<int>(a.stride_w), static_cast<int>(a.dilation_h),
          static_cast<int>(a.dilation_w), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      node_label(node) + ": convolution descriptor");
  check_cudnn(cudnnSetConvolutionGroupCount(conv, static_cast<int>(a.groups)),
              node_label(node) + ": groups");
  check_cudnn(cudnnSetConvolutionMathType(conv, math), node_label(node) + ": math type");
}

void describe(Model& m, const dlhost_node& node, const dlhost_conv2d_attrs& a, const Tensor& in,
              const Tensor& out, Conv& c) {
  if (in.dims.size() != 4 || out.dims.size() != 4) node_invalid(node, "conv2d wants NCHW tensors");
  if (a.groups <= 0 || in.dims[1] % a.groups != 0 || out.dims[1] != a.out_channels)
    node_invalid(node, "conv2d shapes do not agree");
  set_nchw(c.x, in);
  set_nchw(c.y, out);
  set_nchw(c.bias, 1, out.dims[1], 1, 1);
  check_cudnn(cudnnSetFilter4dDescriptor(
                  c.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(a.out_channels),
                  static_cast<int>(in.dims[1] / a.groups), static_cast<int>(a.kernel_h),
                  static_cast<int>(a.kernel_w)),
              node_label(node) + ": filter descriptor");
  // Ranked under the case's math type; settle() moves each to its chosen algorithm's.
  for (cudnnConvolutionDescriptor_t conv :
       std::initializer_list<cudnnConvolutionDescriptor_t>{c.fwd_conv, c.data_conv, c.filter_conv})
    set_conv(conv, node, a, math_type(m.settings()));
}

void choose_algorithms(Model& m, const std::string& name, const Tensor& in, const Tensor& out,
                       float* w, float* dw, Conv& c) {
  cudnnHandle_t h = m.cudnn();
  size_t ws = 0;
  void* tune = m.settings().exhaustive ? m.tune_workspace(&ws) : nullptr;
  c.fwd = choose<cudnnConvolutionFwdAlgoPerf_t>(
      m, name + " forward",
      [&](auto* p, int* n) {
        return cudnnGetConvolutionForwardAlgorithm_v7(h, c.x, c.w, c.fwd_conv, c.y, kMaxAlgos, n,
                                                      p);
      },
      [&](auto* p, int* n) {
        return cudnnFindConvolutionForwardAlgorithmEx(h, c.x, in.value, c.w, w, c.fwd_conv, c.y,
                                                      out.value, kMaxAlgos, n, p, tune, ws);
      });
  if (in.grad != nullptr)
    c.data = choose<cudnnConvolutionBwdDataAlgoPerf_t>(
        m, name + " backward data",
        [&](auto* p, int* n) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, c.w, c.y, c.data_conv, c.x,
                                                             kMaxAlgos, n, p);
        },
        [&](auto* p, int* n) {
          return cudnnFindConvolutionBackwardDataAlgorithmEx(
              h, c.w, w, c.y, out.grad, c.data_conv, c.x, in.grad, kMaxAlgos, n, p, tune, ws);
        });
  c.filter = choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
      m, name + " backward filter",
      [&](auto* p, int* n) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, c.x, c.y, c.filter_conv, c.w,
                                                             kMaxAlgos, n, p);
      },
      [&](auto* p, int* n) {
        return cudnnFindConvolutionBackwardFilterAlgorithmEx(
            h, c.x, in.value, c.y, out.grad, c.filter_conv, c.w, dw, kMaxAlgos, n, p, tune, ws);
      });
  settle(c.fwd_conv, c.fwd, name + " forward", [&](size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(
        h, c.x, c.w, c.fwd_conv, c.y, static_cast<cudnnConvolutionFwdAlgo_t>(c.fwd.algo), bytes);
  });
  if (in.grad != nullptr)
    settle(c.data_conv, c.data, name + " backward data", [&](size_t* bytes) {
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
          h, c.w, c.y, c.data_conv, c.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(c.data.algo),
          bytes);
    });
  settle(c.filter_conv, c.filter, name + " backward filter", [&](size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, c.x, c.y, c.filter_conv, c.w,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.filter.algo), bytes);
  });
  m.need_workspace(std::max({c.fwd.memory, c.data.memory, c.filter.memory}));
  // "KiB, TF32" marks a direction that runs on tensor cores.
  auto kib = [](const ConvChoice& x) {
    return "(" + std::to_string(x.memory >> 10) + " KiB" +
           (uses_tensor_cores(x.math) ? ", TF32)" : ")");
  };
  m.note(name + ": fwd=" + fwd_name(c.fwd.algo) + kib(c.fwd) +
         " bwd_data=" + (in.grad != nullptr ? data_name(c.data.algo) : "none") + kib(c.data) +
         " bwd_filter=" + filter_name(c.filter.algo) + kib(c.filter));
}

}  // namespace

BackwardBuilder lower_conv2d(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_conv2d_attrs>(node, DLHOST_CONV2D_ATTRS_STRUCT_SIZE);
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (node.num_params != (a.has_bias ? 2 : 1)) node_invalid(node, "conv2d parameter count");
  Param& w = m.param(node.params[0]);
  Param* b = a.has_bias ? &m.param(node.params[1]) : nullptr;
  auto c = std::make_shared<Conv>();
  describe(m, node, a, in, out, *c);
  choose_algorithms(m, node.name != nullptr ? node.name : "conv", in, out, w.value, w.grad, *c);
  m.add_forward([&m, c, x = in.value, y = out.value, W = w.value, B = b ? b->value : nullptr] {
    const float one = 1, zero = 0;
    check_cudnn(cudnnConvolutionForward(m.cudnn(), &one, c->x, x, c->w, W, c->fwd_conv,
                                        static_cast<cudnnConvolutionFwdAlgo_t>(c->fwd.algo),
                                        m.workspace(), c->fwd.memory, &zero, c->y, y),
                "cudnnConvolutionForward");
    if (B != nullptr)
      check_cudnn(cudnnAddTensor(m.cudnn(), &one, c->bias, B, &one, c->y, y), "cudnnAddTensor");
  });
  return [&m, c, &in, &out, w, b] {
    const float beta = in.grad != nullptr ? m.beta_for(in) : 0.0f;
    m.add_backward([&m, c, beta, x = in.value, dx = in.grad, dy = out.grad, W = w.value,
                    dW = w.grad, dB = b ? b->grad : nullptr] {
      const float one = 1, zero = 0;
      check_cudnn(cudnnConvolutionBackwardFilter(
                      m.cudnn(), &one, c->x, x, c->y, dy, c->filter_conv,
                      static_cast<cudnnConvolutionBwdFilterAlgo_t>(c->filter.algo), m.workspace(),
                      c->filter.memory, &zero, c->w, dW),
                  "cudnnConvolutionBackwardFilter");
      if (dB != nullptr)
        check_cudnn(cudnnConvolutionBackwardBias(m.cudnn(), &one, c->y, dy, &zero, c->bias, dB),
                    "cudnnConvolutionBackwardBias");
      if (dx != nullptr)
        check_cudnn(
            cudnnConvolutionBackwardData(m.cudnn(), &one, c->w, W, c->y, dy, c->data_conv,
                                         static_cast<cudnnConvolutionBwdDataAlgo_t>(c->data.algo),
                                         m.workspace(), c->data.memory, &beta, c->x, dx),
            "cudnnConvolutionBackwardData");
    });
  };
}

}  // namespace dlhost::gpu_cudnn
