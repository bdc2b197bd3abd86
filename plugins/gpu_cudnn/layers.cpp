// layers.cpp — the helpers the layer files share (layers.h) and the dispatch from a graph node to
// its layer.
#include "layers.h"

namespace dlhost::gpu_cudnn {

std::string node_label(const dlhost_node& node) {
  return std::string("node '") + (node.name != nullptr ? node.name : "?") + "'";
}

void expect_inputs(const dlhost_node& node, int32_t count) {
  if (node.num_inputs != count || (count > 0 && node.inputs == nullptr))
    node_invalid(node, "has " + std::to_string(node.num_inputs) + " inputs, its op takes " +
                           std::to_string(count));
}

void node_unimplemented(const dlhost_node& node, const std::string& what) {
  sdk::unimplemented("gpu_cudnn: " + node_label(node) + ": " + what);
}

void node_invalid(const dlhost_node& node, const std::string& what) {
  sdk::invalid("gpu_cudnn: " + node_label(node) + ": " + what);
}

void set_nchw(cudnnTensorDescriptor_t d, int64_t n, int64_t c, int64_t h, int64_t w) {
  check_cudnn(
      cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                 static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
      "cudnnSetTensor4dDescriptor");
}

void set_nchw(cudnnTensorDescriptor_t d, const Tensor& t) {
  if (t.dims.size() == 4)
    set_nchw(d, t.dims[0], t.dims[1], t.dims[2], t.dims[3]);
  else if (t.dims.size() == 2)
    set_nchw(d, t.dims[0], t.dims[1], 1, 1);
  else
    set_nchw(d, 1, t.count, 1, 1);
}

cudnnMathType_t math_type(const Settings& s) {
  return s.precision == Precision::kTf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
}

void gemm(Model& m, const GemmShape& s, float alpha, RowMajor a, RowMajor b, float beta, float* c,
          int64_t ldc, int64_t stride_c, const char* what) {
  const CublasGemm g = cublas_gemm(s, a, b, c, ldc, stride_c);
  check_cublas(cublasGemmStridedBatchedEx(m.cublas(), g.op_a, g.op_b, g.m, g.n, g.k, &alpha, g.a,
                                          CUDA_R_32F, g.lda, g.stride_a, g.b, CUDA_R_32F, g.ldb,
                                          g.stride_b, &beta, g.c, CUDA_R_32F, g.ldc, g.stride_c,
                                          g.batch, m.gemm_compute(), CUBLAS_GEMM_DEFAULT),
               std::string("cublasGemmStridedBatchedEx (") + what + ")");
}

BackwardBuilder unary_backward(Model& m, Tensor& in, Tensor& out, UnaryBackward call) {
  return [&m, &in, &out, call = std::move(call)] {
    if (in.grad == nullptr) return;
    const float beta = m.beta_for(in);
    m.add_backward([call, beta, x = in.value, dx = in.grad, y = out.value, dy = out.grad] {
      call(beta, x, dx, y, dy);
    });
  };
}

BackwardBuilder lower_node(Model& m, const dlhost_graph& graph, uint32_t index) {
  const dlhost_node& node = *graph.nodes[index];
  if (node.num_params > 0 && node.params == nullptr) node_invalid(node, "params missing");
  switch (node.op) {
    case DLHOST_OP_FC:
      return lower_fc(m, node);
    case DLHOST_OP_CONV2D:
      return lower_conv2d(m, node);
    case DLHOST_OP_POOL2D:
      return lower_pool2d(m, node);
    case DLHOST_OP_ACTIVATION:
      return lower_activation(m, node);
    case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
      return lower_softmax_cross_entropy(m, node);
    case DLHOST_OP_MSE_LOSS:
      return lower_mse_loss(m, node);
    case DLHOST_OP_BATCH_NORM:
      return lower_batch_norm(m, node);
    case DLHOST_OP_DROPOUT:
      return lower_dropout(m, node, index);
    case DLHOST_OP_ADD:
      return lower_add(m, node);
    case DLHOST_OP_LRN:
      return lower_lrn(m, node);
    case DLHOST_OP_EMBEDDING:
      return lower_embedding(m, node);
    case DLHOST_OP_LSTM:
      return lower_lstm(m, node);
    case DLHOST_OP_GLOBAL_AVG_POOL:
      return lower_global_avg_pool(m, node);
    case DLHOST_OP_LAYER_NORM:
      return lower_layer_norm(m, node);
    case DLHOST_OP_GELU:
      return lower_gelu(m, node);
    case DLHOST_OP_ATTENTION:
      return lower_attention(m, node, index);
    case DLHOST_OP_POSITION_EMBEDDING:
      return lower_position_embedding(m, node);
    case DLHOST_OP_TIED_FC:
      return lower_tied_fc(m, node);
    default:
      node_unimplemented(node, "op " + std::to_string(node.op) + " is not implemented");
  }
}

}  // namespace dlhost::gpu_cudnn
