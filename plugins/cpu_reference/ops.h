// ops.h — the kernels of cpu_reference: one plain function per op and direction, each written
// as the formula it computes, so the file reads as the specification the fast backends are
// checked against.
//
// Conventions shared by every function:
// - Arrays are contiguous, row-major float32 (images NCHW, sequences [N, T, C]).
// - Backward functions ADD into the gradients of their inputs: a tensor may feed several nodes
//   and its gradient is the sum of what each of them sends back. A null input-gradient pointer
//   means nobody wants it (graph inputs get no gradient).
// - Backward functions OVERWRITE the gradients of parameters: a parameter belongs to exactly one
//   node, and the ABI wants each backward call to start afresh.
// - Long sums (reductions over a batch, a window of a whole plane, a loss) run in double, so
//   that the oracle's own rounding stays far below what it is used to detect. Matrix products go
//   through OpenBLAS's sgemm.
// - Nothing here allocates: every buffer, scratch included, is made by the model at compile.
#pragma once

#include <cstdint>

#include "dlhost/graph_access.hpp"

namespace cpu_reference {

// C = alpha * op(A) * op(B) + beta * C for row-major matrices; op(X) is X or X^T. C is m x n and
// the shared dimension is k. Leading dimensions are the row strides as stored.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// --- fully connected -------------------------------------------------------------------------

// `rows` is the product of the kept leading dimensions (N, or N*T for a per-step layer).
// The SDK's geometry (graph_access.hpp): rows x in -> rows x out.
using FcShape = dlhost::sdk::FcGeometry;
void fc_forward(const FcShape& s, const float* x, const float* w, const float* b, float* y);
void fc_backward(const FcShape& s, const float* x, const float* w, const float* dy, float* dx,
                 float* dw, float* db);

// --- 2-D convolution -------------------------------------------------------------------------

// The SDK's geometry (graph_access.hpp): n c h w -> n oc oh ow, kernel, stride, pad, dilation,
// groups.
using ConvShape = dlhost::sdk::Geometry2d;
// Elements of the im2col scratch one (sample, group) needs: (C/groups * KH * KW) x (OH * OW).
int64_t conv2d_col_size(const ConvShape& s);
void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                    float* col);
void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                     float* dw, float* db, float* col);

// --- pooling ---------------------------------------------------------------------------------

// The SDK's geometry (graph_access.hpp: n c h w -> n c oh ow) and the pooling's kind.
struct PoolShape : dlhost::sdk::Geometry2d {
  bool max = true;                // else average
  bool count_include_pad = true;  // average only
};
// `argmax` (one per output, max pooling only) records which input element won.
void pool2d_forward(const PoolShape& s, const float* x, float* y, int64_t* argmax);
void pool2d_backward(const PoolShape& s, const int64_t* argmax, const float* dy, float* dx);

// [planes, spatial] -> [planes]: the mean of each plane.
void global_avg_pool_forward(int64_t planes, int64_t spatial, const float* x, float* y);
void global_avg_pool_backward(int64_t planes, int64_t spatial, const float* dy, float* dx);

// --- normalizations --------------------------------------------------------------------------

// x is [batch, channels, spatial] (spatial = H*W, or 1 for a rank-2 input).
struct BatchNormShape {
  int64_t batch = 0, channels = 0, spatial = 1;
  float epsilon = 1e-5f, momentum = 0.1f;
};
// Saves the batch mean and 1/sqrt(var + eps) per channel for backward and moves the running
// statistics.
void batch_norm_forward(const BatchNormShape& s, const float* x, const float* scale,
                        const float* shift, float* y, double* mean, double* inv_std,
                        double* running_mean, double* running_var);
void batch_norm_backward(const BatchNormShape& s, const float* x, const float* scale,
                         const double* mean, const double* inv_std, const float* dy, float* dx,
                         float* dscale, float* dshift);

struct LrnShape {
  int64_t batch = 0, channels = 0, spatial = 1;
  int64_t size = 5;
  float alpha = 1e-4f, beta = 0.75f, k = 1.0f;
};
// `denominator` saves k + alpha/size * (sum of squares) per element for backward.
void lrn_forward(const LrnShape& s, const float* x, float* y, float* denominator);
void lrn_backward(const LrnShape& s, const float* x, const float* denominator, const float* dy,
                  float* dx);

// --- element-wise ----------------------------------------------------------------------------

enum class Activation { kRelu, kSigmoid, kTanh };
void activation_forward(Activation kind, int64_t n, const float* x, float* y);
void activation_backward(Activation kind, int64_t n, const float* x, const float* y,
                         const float* dy, float* dx);

void add_forward(int64_t n, const float* a, const float* b, float* y);
void add_backward(int64_t n, const float* dy, float* da, float* db);

// `mask` receives the factor each element was multiplied by: 0 or 1 / (1 - probability).
void dropout_forward(uint64_t seed, uint32_t node, uint64_t step, float probability, int64_t n,
                     const float* x, float* y, float* mask);
void dropout_backward(int64_t n, const float* mask, const float* dy, float* dx);

// ids [rows] -> y [rows, dim]. Ids outside [0, vocab) are an error.
void embedding_forward(int64_t rows, int64_t vocab, int64_t dim, const int32_t* ids,
                       const float* table, float* y);
void embedding_backward(int64_t rows, int64_t vocab, int64_t dim, const int32_t* ids,
                        const float* dy, float* dtable);

// --- LSTM ------------------------------------------------------------------------------------

// One layer over a whole batch-first sequence: x [N, T, C] -> h [N, T, H].
struct LstmShape {
  int64_t batch = 0, steps = 0, in = 0, hidden = 0;
};
// Saved for backward: `gates` [N, T, 4H] after their nonlinearities (i, f, g, o blocks) and the
// cell states `c` [N, T, H].
void lstm_layer_forward(const LstmShape& s, const float* x, const float* w, const float* w_iter,
                        const float* b, float* gates, float* c, float* h);
// `dh` [N, T, H] is the gradient arriving at each h_t from above. `dgates` [N, T, 4H] and
// `carry` [2 * N * H] are scratch.
void lstm_layer_backward(const LstmShape& s, const float* x, const float* w, const float* w_iter,
                         const float* gates, const float* c, const float* h, const float* dh,
                         float* dx, float* dw, float* dw_iter, float* db, float* dgates,
                         float* carry);

// --- losses (the value is returned; backward gets dloss, the gradient arriving at the loss) ---

// logits [positions, classes], one label per position.
float softmax_cross_entropy_forward(int64_t positions, int64_t classes, const float* logits,
                                    const int32_t* labels);
void softmax_cross_entropy_backward(int64_t positions, int64_t classes, const float* logits,
                                    const int32_t* labels, float dloss, float* dlogits);

float mse_forward(int64_t n, const float* x, const float* target);
void mse_backward(int64_t n, const float* x, const float* target, float dloss, float* dx,
                  float* dtarget);

// --- optimizer -------------------------------------------------------------------------------

// Sum of g_i^2, for the global gradient norm.
double sum_of_squares(int64_t n, const float* g);
// g' = grad_scale * g + weight_decay * w; v = momentum * v + g'; w -= lr * v. `velocity` may be
// null when momentum is 0 (then v = g').
void sgd_update(int64_t n, float learning_rate, float momentum, float weight_decay,
                float grad_scale, const float* grad, float* value, float* velocity);

}  // namespace cpu_reference
