// layers.h — what the layer files of gpu_cudnn share: checked access to a node's inputs and
// attributes, the row-major GEMM of every cuBLAS product, RAII over cuDNN descriptors (a layer's
// descriptors live in a struct its step closures share), and the lowering function of each op
// (layers_spatial.cpp, layers_dense.cpp, layers_lstm.cpp). Each lower_* appends forward steps and
// returns the backward builder.
#ifndef DLHOST_GPU_CUDNN_LAYERS_H
#define DLHOST_GPU_CUDNN_LAYERS_H

#include <memory>
#include <string>

#include "dlhost/graph_access.hpp"
#include "gemm_rows.h"
#include "model.h"

namespace dlhost::gpu_cudnn {

std::string node_label(const dlhost_node& node);
void expect_inputs(const dlhost_node& node, int32_t count);
// Throws UNIMPLEMENTED naming the node (`what` says what is missing).
[[noreturn]] void node_unimplemented(const dlhost_node& node, const std::string& what);
[[noreturn]] void node_invalid(const dlhost_node& node, const std::string& what);

// The node's attribute struct, refused when missing or shorter than `min_size`.
template <class Attrs>
const Attrs& attrs_of(const dlhost_node& node, size_t min_size) {
  return dlhost::sdk::node_attrs<Attrs>(node, min_size);
}

// One cuDNN descriptor, created on construction and destroyed with its owner.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  Descriptor() { check_cudnn(Create(&d_), "creating a descriptor"); }
  ~Descriptor() { Destroy(d_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  operator T() const { return d_; }  // NOLINT: used where cuDNN wants the raw descriptor

 private:
  T d_{};
};
using TensorDesc =
    Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc =
    Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                            cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                            cudnnDestroyPoolingDescriptor>;
using ActDesc = Descriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor,
                           cudnnDestroyActivationDescriptor>;
using LrnDesc =
    Descriptor<cudnnLRNDescriptor_t, cudnnCreateLRNDescriptor, cudnnDestroyLRNDescriptor>;

// An NCHW float tensor descriptor of dims (n, c, h, w).
void set_nchw(cudnnTensorDescriptor_t d, int64_t n, int64_t c, int64_t h, int64_t w);
// `t` as NCHW: rank 4 as is, rank 2 [N, C] as (N, C, 1, 1), anything else as (1, count, 1, 1).
void set_nchw(cudnnTensorDescriptor_t d, const Tensor& t);
// cuDNN's math type for the case's precision: FMA only for strict fp32 (no TF32).
cudnnMathType_t math_type(const Settings& s);

// cpu_reference's gemm convention on cuBLAS (gemm_rows.h): row-major C (rows x cols, ldc) =
// alpha op(A) op(B) + beta C, `batch` times, products in the case's precision
// (Model::gemm_compute), accumulation in fp32.
void gemm(Model& m, const GemmShape& s, float alpha, RowMajor a, RowMajor b, float beta, float* c,
          int64_t ldc, int64_t stride_c, const char* what);

// The backward builder of an element-wise or windowed layer y = f(x) whose one call writes dx
// scaled by `beta` (0 overwrites, 1 adds): nothing when x takes no gradient.
using UnaryBackward =
    std::function<void(float beta, const float* x, float* dx, const float* y, const float* dy)>;
BackwardBuilder unary_backward(Model& m, Tensor& in, Tensor& out, UnaryBackward call);

BackwardBuilder lower_conv2d(Model& m, const dlhost_node& node);
BackwardBuilder lower_pool2d(Model& m, const dlhost_node& node);
BackwardBuilder lower_global_avg_pool(Model& m, const dlhost_node& node);
BackwardBuilder lower_activation(Model& m, const dlhost_node& node);
BackwardBuilder lower_lrn(Model& m, const dlhost_node& node);
BackwardBuilder lower_batch_norm(Model& m, const dlhost_node& node);
BackwardBuilder lower_fc(Model& m, const dlhost_node& node);
// y [rows, n] = x [rows, k] w^T (+ b): fc's steps, shared with tied_fc (w the embedding's table).
BackwardBuilder fc_layer(Model& m, Tensor& in, Tensor& out, int64_t rows, int64_t k, int64_t n,
                         Param& w, Param* b);
BackwardBuilder lower_add(Model& m, const dlhost_node& node);
BackwardBuilder lower_dropout(Model& m, const dlhost_node& node, uint32_t index);
BackwardBuilder lower_softmax_cross_entropy(Model& m, const dlhost_node& node);
BackwardBuilder lower_mse_loss(Model& m, const dlhost_node& node);
BackwardBuilder lower_embedding(Model& m, const dlhost_node& node);
BackwardBuilder lower_lstm(Model& m, const dlhost_node& node);
// ABI 1.4's Transformer ops (layers_transformer.cpp).
BackwardBuilder lower_layer_norm(Model& m, const dlhost_node& node);
BackwardBuilder lower_gelu(Model& m, const dlhost_node& node);
BackwardBuilder lower_attention(Model& m, const dlhost_node& node, uint32_t index);
BackwardBuilder lower_position_embedding(Model& m, const dlhost_node& node);
BackwardBuilder lower_tied_fc(Model& m, const dlhost_node& node);

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_LAYERS_H
