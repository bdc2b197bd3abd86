// kernels.h — the few CUDA kernels of gpu_cudnn, for what neither cuDNN nor cuBLAS has: the sum
// of squares behind the losses and the clipping norm (the update itself is in
// kernels_transformer.h); the losses; embedding;
// dropout with the ABI's mask (dlhost_dropout_keep); pooling in Caffe's ceil mode, whose
// clipped last window cuDNN cannot express.
//
// Every function enqueues on `stream` and returns at once: no allocation, no synchronization.
// Sums that decide a value (losses, the gradient norm) run in a fixed number of blocks and a
// fixed order, in double, so a run repeats bit for bit. `beta` 0 overwrites a gradient, 1 adds
// to it (a tensor read by several nodes sums what each sends back).
#ifndef DLHOST_GPU_CUDNN_KERNELS_H
#define DLHOST_GPU_CUDNN_KERNELS_H

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dlhost::gpu_cudnn {

// Blocks of the two-pass reductions: the size of a `partials` buffer (doubles).
constexpr int kReduceBlocks = 256;

// partials <- sum of (x - t)^2 (t may be null: sum of x^2), in kReduceBlocks pieces.
void sum_squares(int64_t n, const float* x, const float* t, double* partials, cudaStream_t stream);
// *out = sum(partials) * factor.
void finish_sum(const double* partials, double factor, float* out, cudaStream_t stream);
// Softmax cross-entropy over log-probabilities (cuDNN's log-softmax): *loss = -mean logp[label].
void xent_loss(int64_t positions, int64_t classes, const float* logp, const int32_t* labels,
               double* partials, float* loss, cudaStream_t stream);
// dx = beta * dx + (exp(logp) - onehot(label)) * (*dloss) / positions.
void xent_backward(int64_t positions, int64_t classes, const float* logp, const int32_t* labels,
                   const float* dloss, float* dx, float beta, cudaStream_t stream);

// MSE backward: g = 2 (*dloss) / n (x - t); dx = beta_x dx + g; dt = beta_t dt - g (dt may be
// null).
void mse_backward(int64_t n, const float* x, const float* t, const float* dloss, float* dx,
                  float beta_x, float* dt, float beta_t, cudaStream_t stream);

// y = x * mask, mask[i] = keep ? 1 / (1 - p) : 0 with keep = dlhost_dropout_keep(seed, node,
// step, i, p).
void dropout_forward(int64_t n, uint64_t seed, uint32_t node, uint64_t step, float p,
                     const float* x, float* y, float* mask, cudaStream_t stream);
// The keep decision dropout_forward makes for element `index`, computed on the host by the same
// code the kernel runs: what tests compare with dlhost_dropout_keep (dlhost_graph.h).
bool dropout_keep(uint64_t seed, uint32_t node, uint64_t step, uint64_t index, float p);
// dx = beta * dx + mask * dy (also the backward of anything that scales element-wise).
void scale_backward(int64_t n, const float* mask, const float* dy, float* dx, float beta,
                    cudaStream_t stream);

// y[r, :] = table[ids[r], :]; dtable += scatter of dy (the caller zeroes dtable first).
void embedding_forward(int64_t rows, int64_t dim, const int32_t* ids, const float* table, float* y,
                       cudaStream_t stream);
void embedding_backward(int64_t rows, int64_t dim, const int32_t* ids, const float* dy,
                        float* dtable, cudaStream_t stream);

// Pooling with ceil mode's clipped last windows (dlhost_pool2d_attrs), as cpu_reference does it.
struct PoolGeometry {
  int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool max = true, count_include_pad = true;
};
void pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax,
                  cudaStream_t stream);
// dx must hold beta * dx already (the caller zeroes it for beta 0): windows overlap, so this adds.
void pool_backward(const PoolGeometry& g, const int32_t* argmax, const float* dy, float* dx,
                   cudaStream_t stream);

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_KERNELS_H
