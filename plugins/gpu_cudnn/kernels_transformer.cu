// kernels_transformer.cu — the Transformer kernels and the update kernels of gpu_cudnn (see
// kernels_transformer.h). Row kernels run one block of kThreads per row, every thread striding
// over the row's columns; sums that decide a value are taken in double in a fixed tree order, so
// a run repeats bit for bit.
#include <cfloat>
#include <cmath>

#include "dropout_mask.cuh"
#include "kernels.h"
#include "kernels_transformer.h"

namespace dlhost::gpu_cudnn {
namespace {

constexpr int kThreads = 256;
// Row chunks of the per-channel sums of layer norm's backward (partials, then one pass).
constexpr int kChannelChunks = 64;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

// Block-wide reduction of one value per thread; every thread gets the result. The leading
// barrier lets a kernel call it several times (the previous result has been read by all).
template <class T, class Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T s[kThreads];
  __syncthreads();
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] = op(s[threadIdx.x], s[threadIdx.x + w]);
    __syncthreads();
  }
  return s[0];
}
struct Plus {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ double block_sum(double v) { return block_reduce(v, Plus{}); }

// Grid-stride loop over [0, n).
#define DLHOST_FOR_EACH(i, n)                                             \
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < (n); \
       i += int64_t{kThreads} * gridDim.x)

// --- layer normalization ---------------------------------------------------------------------

__global__ void layer_norm_forward_kernel(int64_t c, float epsilon, const float* x,
                                          const float* scale, const float* shift, float* y,
                                          float* mean, float* inv_std) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * c;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < c; i += kThreads) sum += xr[i];
  const double mu = block_sum(sum) / static_cast<double>(c);
  double sq = 0;
  for (int64_t i = threadIdx.x; i < c; i += kThreads) sq += (xr[i] - mu) * (xr[i] - mu);
  const double rstd = 1.0 / sqrt(block_sum(sq) / static_cast<double>(c) + epsilon);
  for (int64_t i = threadIdx.x; i < c; i += kThreads)
    y[r * c + i] = static_cast<float>(scale[i] * ((xr[i] - mu) * rstd) + shift[i]);
  if (threadIdx.x == 0) {
    mean[r] = static_cast<float>(mu);
    inv_std[r] = static_cast<float>(rstd);
  }
}

__global__ void layer_norm_dx_kernel(int64_t c, const float* x, const float* scale,
                                     const float* mean, const float* inv_std, const float* dy,
                                     float* dx, float beta) {
  const int64_t r = blockIdx.x;
  const double mu = mean[r], rstd = inv_std[r];
  double g_sum = 0, gx_sum = 0;
  for (int64_t i = threadIdx.x; i < c; i += kThreads) {
    const double g = static_cast<double>(dy[r * c + i]) * scale[i];
    g_sum += g;
    gx_sum += g * (x[r * c + i] - mu) * rstd;
  }
  const double g_mean = block_sum(g_sum) / static_cast<double>(c);
  const double gx_mean = block_sum(gx_sum) / static_cast<double>(c);
  for (int64_t i = threadIdx.x; i < c; i += kThreads) {
    const double g = static_cast<double>(dy[r * c + i]) * scale[i];
    const double x_hat = (x[r * c + i] - mu) * rstd;
    const float v = static_cast<float>(rstd * (g - g_mean - x_hat * gx_mean));
    dx[r * c + i] = (beta != 0.0f ? dx[r * c + i] : 0.0f) + v;
  }
}

// partial[chunk, i] = the chunk's rows' sums of dy x_hat (first c) and dy (second c) per channel.
__global__ void layer_norm_dparam_partial_kernel(int64_t rows, int64_t c, const float* x,
                                                 const float* mean, const float* inv_std,
                                                 const float* dy, double* partial) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i >= c) return;
  const int64_t chunk = blockIdx.y, per_chunk = (rows + kChannelChunks - 1) / kChannelChunks;
  const int64_t r0 = chunk * per_chunk, r1 = min(rows, r0 + per_chunk);
  double ds = 0, db = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const double d = dy[r * c + i];
    ds += d * ((x[r * c + i] - static_cast<double>(mean[r])) * inv_std[r]);
    db += d;
  }
  partial[chunk * 2 * c + i] = ds;
  partial[chunk * 2 * c + c + i] = db;
}

__global__ void layer_norm_dparam_finish_kernel(int64_t c, const double* partial, float* dscale,
                                                float* dshift) {
  DLHOST_FOR_EACH(i, c) {
    double ds = 0, db = 0;
    for (int chunk = 0; chunk < kChannelChunks; ++chunk) {
      ds += partial[chunk * 2 * c + i];
      db += partial[chunk * 2 * c + c + i];
    }
    dscale[i] = static_cast<float>(ds);
    dshift[i] = static_cast<float>(db);
  }
}

// --- GELU ----------------------------------------------------------------------------------------
// erf: x Phi(x), d/dx = Phi(x) + x phi(x). tanh: x/2 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715
// x^3), d/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2).

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

__global__ void gelu_forward_kernel(bool tanh_form, int64_t n, const float* x, float* y) {
  DLHOST_FOR_EACH(i, n) {
    const float v = x[i];
    y[i] = tanh_form ? 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v)))
                     : 0.5f * v * (1.0f + erff(v * kInvSqrt2));
  }
}

__global__ void gelu_backward_kernel(bool tanh_form, int64_t n, const float* x, const float* dy,
                                     float* dx, float beta) {
  DLHOST_FOR_EACH(i, n) {
    const float v = x[i];
    float d;
    if (tanh_form) {
      const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
      d = 0.5f * (1.0f + t) +
          0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    } else {
      d = 0.5f * (1.0f + erff(v * kInvSqrt2)) + v * kInvSqrt2Pi * expf(-0.5f * v * v);
    }
    dx[i] = (beta != 0.0f ? dx[i] : 0.0f) + d * dy[i];
  }
}

// --- attention's softmax -------------------------------------------------------------------------

__global__ void attention_softmax_forward_kernel(int64_t steps, bool causal, float dropout,
                                                 uint64_t base, float* scores, float* weights,
                                                 uint8_t* keep_out) {
  const int64_t r = blockIdx.x, i = r % steps;
  const int64_t visible = causal ? i + 1 : steps;
  float* s = scores + r * steps;
  float top = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < visible; j += kThreads) top = fmaxf(top, s[j]);
  top = block_reduce(top, Max{});
  double sum = 0;
  for (int64_t j = threadIdx.x; j < visible; j += kThreads) sum += exp(double{s[j]} - top);
  sum = block_sum(sum);
  const float kept = dropout > 0.0f ? 1.0f / (1.0f - dropout) : 1.0f;
  for (int64_t j = threadIdx.x; j < steps; j += kThreads) {
    const float p = j < visible ? static_cast<float>(exp(double{s[j]} - top) / sum) : 0.0f;
    s[j] = p;
    if (weights != nullptr) {
      const uint64_t index = static_cast<uint64_t>(r * steps + j);
      const bool k = keep(base, index, dropout);
      keep_out[r * steps + j] = k ? 1 : 0;
      weights[r * steps + j] = k ? p * kept : 0.0f;
    }
  }
}

__global__ void attention_softmax_backward_kernel(int64_t steps, float dropout, const float* probs,
                                                  const uint8_t* keep_in, float* d) {
  const int64_t r = blockIdx.x;
  const float* p = probs + r * steps;
  float* row = d + r * steps;
  const float kept = dropout > 0.0f ? 1.0f / (1.0f - dropout) : 1.0f;
  double dot = 0;
  for (int64_t j = threadIdx.x; j < steps; j += kThreads) {
    if (keep_in != nullptr) row[j] *= keep_in[r * steps + j] != 0 ? kept : 0.0f;
    dot += static_cast<double>(row[j]) * p[j];
  }
  dot = block_sum(dot);
  // Each thread rewrites only the columns it read above.
  for (int64_t j = threadIdx.x; j < steps; j += kThreads)
    row[j] = static_cast<float>(p[j] * (row[j] - dot));
}

// --- learned positions ---------------------------------------------------------------------------

__global__ void position_forward_kernel(int64_t n, int64_t per_sample, const float* x,
                                        const float* table, float* y) {
  DLHOST_FOR_EACH(i, n) y[i] = x[i] + table[i % per_sample];
}

__global__ void position_dtable_kernel(int64_t batch, int64_t per_sample, int64_t table_count,
                                       const float* dy, float* dtable) {
  DLHOST_FOR_EACH(e, table_count) {
    double sum = 0;
    if (e < per_sample)
      for (int64_t b = 0; b < batch; ++b) sum += dy[b * per_sample + e];
    dtable[e] = static_cast<float>(sum);
  }
}

__global__ void pass_gradient_kernel(int64_t n, const float* dy, float* dx, float beta) {
  DLHOST_FOR_EACH(i, n) dx[i] = (beta != 0.0f ? dx[i] : 0.0f) + dy[i];
}

// --- the update ----------------------------------------------------------------------------------

__global__ void init_update_state_kernel(UpdateState* st, float loss_scale) {
  st->factor = 1.0f;
  st->skip = 0;
  st->bias1 = 1.0;
  st->bias2 = 1.0;
  st->loss_scale = loss_scale;
  st->good_steps = 0;
  st->t = 0;
}

// One thread: the scalars of this update, from the gradients as backward left them.
__global__ void prepare_update_kernel(const double* partials, UpdateRule rule, UpdateState* st) {
  double sum = 0;
  if (partials != nullptr)
    for (int b = 0; b < kReduceBlocks; ++b) sum += partials[b];
  float factor = 1.0f;
  int32_t skip = 0;
  if (rule.loss_scaling) {
    skip = isfinite(sum) ? 0 : 1;
    factor = 1.0f / st->loss_scale;
  }
  if (skip == 0 && rule.clip_norm > 0.0f) {
    const double norm = sqrt(sum) * factor;  // of the unscaled gradients
    if (norm > rule.clip_norm) factor = static_cast<float>(factor * (rule.clip_norm / norm));
  }
  st->factor = factor;
  st->skip = skip;
  if (rule.loss_scaling && rule.dynamic_scale) {
    if (skip != 0) {
      st->loss_scale *= 0.5f;
      st->good_steps = 0;
    } else if (++st->good_steps >= rule.growth_interval) {
      st->loss_scale *= 2.0f;
      st->good_steps = 0;
    }
  }
  if (skip == 0) {
    st->t += 1;
    const double t = static_cast<double>(st->t);
    st->bias1 = 1.0 - pow(static_cast<double>(rule.beta1), t);
    st->bias2 = 1.0 - pow(static_cast<double>(rule.beta2), t);
  }
}

__global__ void seed_loss_gradient_kernel(const UpdateState* st, float* dst) {
  *dst = st->loss_scale;
}

__global__ void sgd_step_kernel(int64_t n, float lr, float momentum, float weight_decay,
                                const UpdateState* st, const float* grad, float* value,
                                float* velocity) {
  if (st->skip != 0) return;
  const float s = st->factor;
  DLHOST_FOR_EACH(i, n) {
    float g = s * grad[i] + weight_decay * value[i];
    if (velocity != nullptr) {
      g = momentum * velocity[i] + g;
      velocity[i] = g;
    }
    value[i] -= lr * g;
  }
}

__global__ void adamw_step_kernel(int64_t n, float lr, float beta1, float beta2, float epsilon,
                                  float weight_decay, const UpdateState* st, const float* grad,
                                  float* value, float* m, float* v) {
  if (st->skip != 0) return;
  const double f = st->factor, c1 = st->bias1, c2 = st->bias2;
  const double b1 = beta1, b2 = beta2, rate = lr;
  DLHOST_FOR_EACH(i, n) {
    const double g = grad[i] * f;
    const float mi = static_cast<float>(b1 * m[i] + (1.0 - b1) * g);
    const float vi = static_cast<float>(b2 * v[i] + (1.0 - b2) * g * g);
    m[i] = mi;
    v[i] = vi;
    double w = value[i];
    w -= rate * weight_decay * w;
    w -= rate * (mi / c1) / (sqrt(vi / c2) + epsilon);
    value[i] = static_cast<float>(w);
  }
}

}  // namespace

void layer_norm_forward(int64_t rows, int64_t channels, float epsilon, const float* x,
                        const float* scale, const float* shift, float* y, float* mean,
                        float* inv_std, cudaStream_t stream) {
  layer_norm_forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      channels, epsilon, x, scale, shift, y, mean, inv_std);
}

void layer_norm_backward(int64_t rows, int64_t channels, const float* x, const float* scale,
                         const float* mean, const float* inv_std, const float* dy, float* dx,
                         float beta, float* dscale, float* dshift, double* partial,
                         cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((channels + kThreads - 1) / kThreads), kChannelChunks);
  layer_norm_dparam_partial_kernel<<<grid, kThreads, 0, stream>>>(rows, channels, x, mean, inv_std,
                                                                  dy, partial);
  layer_norm_dparam_finish_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(channels, partial,
                                                                                 dscale, dshift);
  if (dx != nullptr)
    layer_norm_dx_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        channels, x, scale, mean, inv_std, dy, dx, beta);
}

int64_t layer_norm_partial_count(int64_t channels) { return 2 * kChannelChunks * channels; }

void gelu_forward(bool tanh_approximation, int64_t n, const float* x, float* y,
                  cudaStream_t stream) {
  gelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(tanh_approximation, n, x, y);
}

void gelu_backward(bool tanh_approximation, int64_t n, const float* x, const float* dy, float* dx,
                   float beta, cudaStream_t stream) {
  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(tanh_approximation, n, x, dy, dx,
                                                               beta);
}

void attention_softmax_forward(int64_t rows, int64_t steps, bool causal, float dropout,
                               uint64_t seed, uint32_t node, uint64_t step, float* scores,
                               float* weights, uint8_t* keep_out, cudaStream_t stream) {
  attention_softmax_forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      steps, causal, dropout, keep_base(seed, node, step), scores,
      dropout > 0.0f ? weights : nullptr, keep_out);
}

void attention_softmax_backward(int64_t rows, int64_t steps, float dropout, const float* probs,
                                const uint8_t* keep_in, float* d, cudaStream_t stream) {
  attention_softmax_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      steps, dropout, probs, keep_in, d);
}

void position_embedding_forward(int64_t batch, int64_t per_sample, const float* x,
                                const float* table, float* y, cudaStream_t stream) {
  position_forward_kernel<<<blocks_for(batch * per_sample), kThreads, 0, stream>>>(
      batch * per_sample, per_sample, x, table, y);
}

void position_embedding_backward(int64_t batch, int64_t per_sample, int64_t table_count,
                                 const float* dy, float* dx, float beta, float* dtable,
                                 cudaStream_t stream) {
  position_dtable_kernel<<<blocks_for(table_count), kThreads, 0, stream>>>(batch, per_sample,
                                                                           table_count, dy, dtable);
  if (dx != nullptr)
    pass_gradient_kernel<<<blocks_for(batch * per_sample), kThreads, 0, stream>>>(
        batch * per_sample, dy, dx, beta);
}

void init_update_state(UpdateState* state, float loss_scale, cudaStream_t stream) {
  init_update_state_kernel<<<1, 1, 0, stream>>>(state, loss_scale);
}

void prepare_update(const double* partials, const UpdateRule& rule, UpdateState* state,
                    cudaStream_t stream) {
  prepare_update_kernel<<<1, 1, 0, stream>>>(partials, rule, state);
}

void seed_loss_gradient(const UpdateState* state, float* dst, cudaStream_t stream) {
  seed_loss_gradient_kernel<<<1, 1, 0, stream>>>(state, dst);
}

void sgd_step(int64_t n, float lr, float momentum, float weight_decay, const UpdateState* state,
              const float* grad, float* value, float* velocity, cudaStream_t stream) {
  sgd_step_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, lr, momentum, weight_decay, state,
                                                          grad, value, velocity);
}

void adamw_step(int64_t n, float lr, float beta1, float beta2, float epsilon, float weight_decay,
                const UpdateState* state, const float* grad, float* value, float* m, float* v,
                cudaStream_t stream) {
  adamw_step_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, lr, beta1, beta2, epsilon,
                                                            weight_decay, state, grad, value, m, v);
}

}  // namespace dlhost::gpu_cudnn
