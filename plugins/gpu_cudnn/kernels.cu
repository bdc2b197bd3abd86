// kernels.cu — the CUDA kernels of gpu_cudnn (see kernels.h for what each computes and why it is
// not a library call).
#include <cfloat>

#include "dropout_mask.cuh"
#include "kernels.h"

namespace dlhost::gpu_cudnn {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

// Block-wide sum of one double per thread, in a fixed tree order; thread 0 gets the total.
__device__ double block_sum(double v) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  return s[0];
}

// partials[block] = sum over the block's grid-stride share of term(i).
template <class Term>
__global__ void reduce_kernel(int64_t n, Term term, double* partials) {
  double v = 0;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{kThreads} * gridDim.x)
    v += term(i);
  const double total = block_sum(v);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__device__ double partials_total(const double* partials) {
  double v = 0;
  for (int i = threadIdx.x; i < kReduceBlocks; i += kThreads) v += partials[i];
  return block_sum(v);
}

__global__ void finish_sum_kernel(const double* partials, double factor, float* out) {
  const double total = partials_total(partials);
  if (threadIdx.x == 0) *out = static_cast<float>(total * factor);
}

struct SquaredDiff {
  const float* x;
  const float* t;
  __device__ double operator()(int64_t i) const {
    const double d = static_cast<double>(x[i]) - (t != nullptr ? t[i] : 0.0f);
    return d * d;
  }
};

struct NegLogProbAtLabel {
  const float* logp;
  const int32_t* labels;
  int64_t classes;
  __device__ double operator()(int64_t p) const { return -logp[p * classes + labels[p]]; }
};

__global__ void xent_backward_kernel(int64_t positions, int64_t classes, const float* logp,
                                     const int32_t* labels, const float* dloss, float* dx,
                                     float beta) {
  const float per_position = *dloss / static_cast<float>(positions);
  const int64_t n = positions * classes;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{kThreads} * gridDim.x) {
    const int64_t p = i / classes, c = i % classes;
    const float g = (expf(logp[i]) - (labels[p] == c ? 1.0f : 0.0f)) * per_position;
    dx[i] = (beta != 0.0f ? beta * dx[i] : 0.0f) + g;
  }
}

__global__ void mse_backward_kernel(int64_t n, const float* x, const float* t, const float* dloss,
                                    float* dx, float beta_x, float* dt, float beta_t) {
  const float factor = 2.0f * *dloss / static_cast<float>(n);
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{kThreads} * gridDim.x) {
    const float g = factor * (x[i] - t[i]);
    if (dx != nullptr) dx[i] = (beta_x != 0.0f ? dx[i] : 0.0f) + g;
    if (dt != nullptr) dt[i] = (beta_t != 0.0f ? dt[i] : 0.0f) - g;
  }
}

__global__ void dropout_kernel(int64_t n, uint64_t seed, uint32_t node, uint64_t step, float p,
                               const float* x, float* y, float* mask) {
  const uint64_t base = keep_base(seed, node, step);
  const float kept = 1.0f / (1.0f - p);
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{kThreads} * gridDim.x) {
    mask[i] = keep(base, static_cast<uint64_t>(i), p) ? kept : 0.0f;
    y[i] = x[i] * mask[i];
  }
}

__global__ void scale_backward_kernel(int64_t n, const float* mask, const float* dy, float* dx,
                                      float beta) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{kThreads} * gridDim.x)
    dx[i] = (beta != 0.0f ? beta * dx[i] : 0.0f) + mask[i] * dy[i];
}

__global__ void embedding_forward_kernel(int64_t rows, int64_t dim, const int32_t* ids,
                                         const float* table, float* y) {
  const int64_t n = rows * dim;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{kThreads} * gridDim.x)
    y[i] = table[static_cast<int64_t>(ids[i / dim]) * dim + i % dim];
}

__global__ void embedding_backward_kernel(int64_t rows, int64_t dim, const int32_t* ids,
                                          const float* dy, float* dtable) {
  const int64_t n = rows * dim;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{kThreads} * gridDim.x)
    atomicAdd(&dtable[static_cast<int64_t>(ids[i / dim]) * dim + i % dim], dy[i]);
}

// One output window of ceil-mode pooling: its valid input range and its divisor.
struct Window {
  int64_t h0, h1, w0, w1, divisor;
};
__device__ Window window_of(const PoolGeometry& g, int64_t i, int64_t j) {
  Window w;
  int64_t h0 = i * g.stride_h - g.pad_h, x0 = j * g.stride_w - g.pad_w;
  int64_t h1 = min(h0 + g.kernel_h, g.in_h + g.pad_h), x1 = min(x0 + g.kernel_w, g.in_w + g.pad_w);
  const int64_t full = (h1 - h0) * (x1 - x0);
  w.h0 = max(h0, int64_t{0});
  w.w0 = max(x0, int64_t{0});
  w.h1 = min(h1, g.in_h);
  w.w1 = min(x1, g.in_w);
  w.divisor = g.count_include_pad ? full : (w.h1 - w.h0) * (w.w1 - w.w0);
  return w;
}

__global__ void pool_forward_kernel(PoolGeometry g, const float* x, float* y, int32_t* argmax) {
  const int64_t n = g.planes * g.out_h * g.out_w;
  for (int64_t o = blockIdx.x * int64_t{kThreads} + threadIdx.x; o < n;
       o += int64_t{kThreads} * gridDim.x) {
    const int64_t plane = o / (g.out_h * g.out_w), ij = o % (g.out_h * g.out_w);
    const Window w = window_of(g, ij / g.out_w, ij % g.out_w);
    const float* xp = x + plane * g.in_h * g.in_w;
    float best = -FLT_MAX, sum = 0;
    int64_t at = -1;
    for (int64_t a = w.h0; a < w.h1; ++a)
      for (int64_t b = w.w0; b < w.w1; ++b) {
        const float v = xp[a * g.in_w + b];
        sum += v;
        if (at < 0 || v > best) {
          best = v;
          at = a * g.in_w + b;
        }
      }
    if (g.max) {
      y[o] = at < 0 ? 0.0f : best;
      argmax[o] = at < 0 ? -1 : static_cast<int32_t>(at);
    } else {
      y[o] = w.divisor > 0 ? sum / static_cast<float>(w.divisor) : 0.0f;
    }
  }
}

__global__ void pool_backward_kernel(PoolGeometry g, const int32_t* argmax, const float* dy,
                                     float* dx) {
  const int64_t n = g.planes * g.out_h * g.out_w;
  for (int64_t o = blockIdx.x * int64_t{kThreads} + threadIdx.x; o < n;
       o += int64_t{kThreads} * gridDim.x) {
    const int64_t plane = o / (g.out_h * g.out_w), ij = o % (g.out_h * g.out_w);
    float* dxp = dx + plane * g.in_h * g.in_w;
    if (g.max) {
      if (argmax[o] >= 0) atomicAdd(&dxp[argmax[o]], dy[o]);
      continue;
    }
    const Window w = window_of(g, ij / g.out_w, ij % g.out_w);
    if (w.divisor <= 0) continue;
    const float share = dy[o] / static_cast<float>(w.divisor);
    for (int64_t a = w.h0; a < w.h1; ++a)
      for (int64_t b = w.w0; b < w.w1; ++b) atomicAdd(&dxp[a * g.in_w + b], share);
  }
}

}  // namespace

void sum_squares(int64_t n, const float* x, const float* t, double* partials, cudaStream_t stream) {
  reduce_kernel<<<kReduceBlocks, kThreads, 0, stream>>>(n, SquaredDiff{x, t}, partials);
}

void finish_sum(const double* partials, double factor, float* out, cudaStream_t stream) {
  finish_sum_kernel<<<1, kThreads, 0, stream>>>(partials, factor, out);
}

void xent_loss(int64_t positions, int64_t classes, const float* logp, const int32_t* labels,
               double* partials, float* loss, cudaStream_t stream) {
  reduce_kernel<<<kReduceBlocks, kThreads, 0, stream>>>(
      positions, NegLogProbAtLabel{logp, labels, classes}, partials);
  finish_sum(partials, 1.0 / static_cast<double>(positions), loss, stream);
}

void xent_backward(int64_t positions, int64_t classes, const float* logp, const int32_t* labels,
                   const float* dloss, float* dx, float beta, cudaStream_t stream) {
  xent_backward_kernel<<<blocks_for(positions * classes), kThreads, 0, stream>>>(
      positions, classes, logp, labels, dloss, dx, beta);
}

void mse_backward(int64_t n, const float* x, const float* t, const float* dloss, float* dx,
                  float beta_x, float* dt, float beta_t, cudaStream_t stream) {
  mse_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, t, dloss, dx, beta_x, dt,
                                                              beta_t);
}

void dropout_forward(int64_t n, uint64_t seed, uint32_t node, uint64_t step, float p,
                     const float* x, float* y, float* mask, cudaStream_t stream) {
  dropout_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, seed, node, step, p, x, y, mask);
}

bool dropout_keep(uint64_t seed, uint32_t node, uint64_t step, uint64_t index, float p) {
  return keep(keep_base(seed, node, step), index, p);
}

void scale_backward(int64_t n, const float* mask, const float* dy, float* dx, float beta,
                    cudaStream_t stream) {
  scale_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, mask, dy, dx, beta);
}

void embedding_forward(int64_t rows, int64_t dim, const int32_t* ids, const float* table, float* y,
                       cudaStream_t stream) {
  embedding_forward_kernel<<<blocks_for(rows * dim), kThreads, 0, stream>>>(rows, dim, ids, table,
                                                                            y);
}

void embedding_backward(int64_t rows, int64_t dim, const int32_t* ids, const float* dy,
                        float* dtable, cudaStream_t stream) {
  embedding_backward_kernel<<<blocks_for(rows * dim), kThreads, 0, stream>>>(rows, dim, ids, dy,
                                                                             dtable);
}

void pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax,
                  cudaStream_t stream) {
  pool_forward_kernel<<<blocks_for(g.planes * g.out_h * g.out_w), kThreads, 0, stream>>>(g, x, y,
                                                                                         argmax);
}

void pool_backward(const PoolGeometry& g, const int32_t* argmax, const float* dy, float* dx,
                   cudaStream_t stream) {
  pool_backward_kernel<<<blocks_for(g.planes * g.out_h * g.out_w), kThreads, 0, stream>>>(g, argmax,
                                                                                          dy, dx);
}

}  // namespace dlhost::gpu_cudnn
