// layers_spatial.cpp — pooling, global average pooling, activations, LRN and batch normalization
// on cuDNN. Pooling in Caffe's ceil mode, whose last window is clipped to the padded input
// (dlhost_pool2d_attrs), is the one case cuDNN's symmetric descriptors cannot say: those layers
// run the plugin's own kernels (kernels.h).
#include "kernels.h"
#include "layers.h"

namespace dlhost::gpu_cudnn {
namespace {

// A cuDNN pooling layer: x -> y forward, dy -> dx backward (dx added to with `beta`).
struct Pool {
  TensorDesc x, y;
  PoolDesc pool;
};

BackwardBuilder cudnn_pool(Model& m, Tensor& in, Tensor& out, std::shared_ptr<Pool> p) {
  m.add_forward([&m, p, x = in.value, y = out.value] {
    const float one = 1, zero = 0;
    check_cudnn(cudnnPoolingForward(m.cudnn(), p->pool, &one, p->x, x, &zero, p->y, y),
                "cudnnPoolingForward");
  });
  return unary_backward(m, in, out, [&m, p](float beta, auto x, auto dx, auto y, auto dy) {
    const float one = 1;
    check_cudnn(
        cudnnPoolingBackward(m.cudnn(), p->pool, &one, p->y, y, p->y, dy, p->x, x, &beta, p->x, dx),
        "cudnnPoolingBackward");
  });
}

BackwardBuilder kernel_pool(Model& m, Tensor& in, Tensor& out, const PoolGeometry& g) {
  int32_t* argmax = g.max ? m.memory().alloc_n<int32_t>(out.count, out.name + " argmax") : nullptr;
  m.add_forward(
      [&m, g, argmax, x = in.value, y = out.value] { pool_forward(g, x, y, argmax, m.stream()); });
  return [&m, g, argmax, &in, &out] {
    if (in.grad == nullptr) return;
    const bool overwrite = m.beta_for(in) == 0.0f;
    m.add_backward([&m, g, argmax, overwrite, n = in.count, dx = in.grad, dy = out.grad] {
      if (overwrite) check_cuda(cudaMemsetAsync(dx, 0, n * 4, m.stream()), "pool backward");
      pool_backward(g, argmax, dy, dx, m.stream());
    });
  };
}

}  // namespace

BackwardBuilder lower_pool2d(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_pool2d_attrs>(node, DLHOST_POOL2D_ATTRS_STRUCT_SIZE);
  if (a.kind != DLHOST_POOL_MAX && a.kind != DLHOST_POOL_AVG)
    node_unimplemented(node, "pooling kind " + std::to_string(a.kind));
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (in.dims.size() != 4 || out.dims.size() != 4) node_invalid(node, "pool2d wants NCHW");
  PoolGeometry g;
  g.planes = in.dims[0] * in.dims[1];
  g.in_h = in.dims[2];
  g.in_w = in.dims[3];
  g.out_h = out.dims[2];
  g.out_w = out.dims[3];
  g.kernel_h = a.kernel_h;
  g.kernel_w = a.kernel_w;
  g.stride_h = a.stride_h;
  g.stride_w = a.stride_w;
  g.pad_h = a.pad_h;
  g.pad_w = a.pad_w;
  g.max = a.kind == DLHOST_POOL_MAX;
  g.count_include_pad = a.count_include_pad != 0;
  const bool floor_shape = (g.in_h + 2 * g.pad_h - g.kernel_h) / g.stride_h + 1 == g.out_h &&
                           (g.in_w + 2 * g.pad_w - g.kernel_w) / g.stride_w + 1 == g.out_w;
  const std::string name = node.name != nullptr ? node.name : "pool";
  if (!floor_shape) {
    m.note(name + ": ceil-mode pooling kernel");
    return kernel_pool(m, in, out, g);
  }
  auto p = std::make_shared<Pool>();
  set_nchw(p->x, in);
  set_nchw(p->y, out);
  const cudnnPoolingMode_t mode = g.max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                  : g.count_include_pad
                                      ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                      : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  check_cudnn(
      cudnnSetPooling2dDescriptor(p->pool, mode, CUDNN_NOT_PROPAGATE_NAN,
                                  static_cast<int>(g.kernel_h), static_cast<int>(g.kernel_w),
                                  static_cast<int>(g.pad_h), static_cast<int>(g.pad_w),
                                  static_cast<int>(g.stride_h), static_cast<int>(g.stride_w)),
      node_label(node) + ": pooling descriptor");
  return cudnn_pool(m, in, out, p);
}

BackwardBuilder lower_global_avg_pool(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (in.dims.size() != 4) node_invalid(node, "global_avg_pool wants NCHW");
  auto p = std::make_shared<Pool>();
  set_nchw(p->x, in);
  set_nchw(p->y, in.dims[0], in.dims[1], 1, 1);
  const int h = static_cast<int>(in.dims[2]), w = static_cast<int>(in.dims[3]);
  check_cudnn(cudnnSetPooling2dDescriptor(p->pool, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                          CUDNN_NOT_PROPAGATE_NAN, h, w, 0, 0, h, w),
              node_label(node) + ": pooling descriptor");
  return cudnn_pool(m, in, out, p);
}

BackwardBuilder lower_activation(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_activation_attrs>(node, DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE);
  cudnnActivationMode_t mode;
  switch (a.kind) {
    case DLHOST_ACTIVATION_RELU:
      mode = CUDNN_ACTIVATION_RELU;
      break;
    case DLHOST_ACTIVATION_SIGMOID:
      mode = CUDNN_ACTIVATION_SIGMOID;
      break;
    case DLHOST_ACTIVATION_TANH:
      mode = CUDNN_ACTIVATION_TANH;
      break;
    default:
      node_unimplemented(node, "activation kind " + std::to_string(a.kind));
  }
  struct Act {
    TensorDesc t;
    ActDesc act;
  };
  auto p = std::make_shared<Act>();
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  set_nchw(p->t, in);
  check_cudnn(cudnnSetActivationDescriptor(p->act, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0),
              node_label(node) + ": activation descriptor");
  m.add_forward([&m, p, x = in.value, y = out.value] {
    const float one = 1, zero = 0;
    check_cudnn(cudnnActivationForward(m.cudnn(), p->act, &one, p->t, x, &zero, p->t, y),
                "cudnnActivationForward");
  });
  return unary_backward(m, in, out, [&m, p](float beta, auto x, auto dx, auto y, auto dy) {
    const float one = 1;
    check_cudnn(cudnnActivationBackward(m.cudnn(), p->act, &one, p->t, y, p->t, dy, p->t, x, &beta,
                                        p->t, dx),
                "cudnnActivationBackward");
  });
}

BackwardBuilder lower_lrn(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_lrn_attrs>(node, DLHOST_LRN_ATTRS_STRUCT_SIZE);
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (in.dims.size() != 4 || a.size <= 0 || a.size % 2 == 0)
    node_invalid(node, "lrn wants NCHW and an odd size");
  if (a.size > CUDNN_LRN_MAX_N || a.k < CUDNN_LRN_MIN_K || a.beta < CUDNN_LRN_MIN_BETA)
    node_unimplemented(node, "lrn size " + std::to_string(a.size) + ", k " + std::to_string(a.k) +
                                 " or beta outside cuDNN's range");
  struct Lrn {
    TensorDesc t;
    LrnDesc lrn;
  };
  auto p = std::make_shared<Lrn>();
  set_nchw(p->t, in);
  // cuDNN divides alpha by the window itself, as the ABI's formula does.
  check_cudnn(cudnnSetLRNDescriptor(p->lrn, static_cast<unsigned>(a.size), a.alpha, a.beta, a.k),
              node_label(node) + ": LRN descriptor");
  m.add_forward([&m, p, x = in.value, y = out.value] {
    const float one = 1, zero = 0;
    check_cudnn(cudnnLRNCrossChannelForward(m.cudnn(), p->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                            p->t, x, &zero, p->t, y),
                "cudnnLRNCrossChannelForward");
  });
  return unary_backward(m, in, out, [&m, p](float beta, auto x, auto dx, auto y, auto dy) {
    const float one = 1;
    check_cudnn(cudnnLRNCrossChannelBackward(m.cudnn(), p->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                             p->t, y, p->t, dy, p->t, x, &beta, p->t, dx),
                "cudnnLRNCrossChannelBackward");
  });
}

BackwardBuilder lower_batch_norm(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_batch_norm_attrs>(node, DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE);
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if ((in.dims.size() != 2 && in.dims.size() != 4) || node.num_params != 2)
    node_invalid(node, "batch_norm wants rank 2 or 4 and scale, shift");
  if (a.epsilon < CUDNN_BN_MIN_EPSILON)
    node_unimplemented(
        node, "batch_norm epsilon below cuDNN's minimum " + std::to_string(CUDNN_BN_MIN_EPSILON));
  struct Bn {
    TensorDesc t, stats;
    float *mean, *inv_std, *running_mean, *running_var;
    double epsilon, momentum;
  };
  auto p = std::make_shared<Bn>();
  const int64_t c = in.dims[1];
  set_nchw(p->t, in);
  check_cudnn(cudnnDeriveBNTensorDescriptor(p->stats, p->t, CUDNN_BATCHNORM_SPATIAL),
              node_label(node) + ": statistics descriptor");
  float* stats = m.memory().alloc_n<float>(4 * c, in.name + " batch statistics");
  p->mean = stats;
  p->inv_std = stats + c;
  p->running_mean = stats + 2 * c;
  p->running_var = stats + 3 * c;
  const std::vector<float> ones(static_cast<size_t>(c), 1.0f);  // PyTorch's start: variance 1
  m.upload(p->running_var, ones.data(), ones.size() * 4, node_label(node) + ": running variance");
  p->epsilon = a.epsilon;
  p->momentum = a.momentum;
  Param &scale = m.param(node.params[0]), &shift = m.param(node.params[1]);
  m.add_forward([&m, p, x = in.value, y = out.value, S = scale.value, B = shift.value] {
    const float one = 1, zero = 0;
    check_cudnn(cudnnBatchNormalizationForwardTraining(m.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one,
                                                       &zero, p->t, x, p->t, y, p->stats, S, B,
                                                       p->momentum, p->running_mean, p->running_var,
                                                       p->epsilon, p->mean, p->inv_std),
                "cudnnBatchNormalizationForwardTraining");
  });
  return [&m, p, &in, &out, &scale, &shift] {
    // cuDNN always writes dx: a graph input's goes to a scratch nobody reads.
    float* dx = in.grad != nullptr ? in.grad : m.memory().alloc_n<float>(in.count, "bn dx");
    const float beta = in.grad != nullptr ? m.beta_for(in) : 0.0f;
    m.add_backward([&m, p, beta, dx, x = in.value, dy = out.grad, S = scale.value, dS = scale.grad,
                    dB = shift.grad] {
      const float one = 1, zero = 0;
      check_cudnn(cudnnBatchNormalizationBackward(
                      m.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &beta, &one, &zero, p->t, x, p->t,
                      dy, p->t, dx, p->stats, S, dS, dB, p->epsilon, p->mean, p->inv_std),
                  "cudnnBatchNormalizationBackward");
    });
  };
}

}  // namespace dlhost::gpu_cudnn
