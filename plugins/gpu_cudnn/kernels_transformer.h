// kernels_transformer.h — gpu_cudnn's own CUDA kernels for ABI 1.4's Transformer ops and its
// optimizer step: layer normalization, GELU, the masked softmax (with the attention dropout mask)
// between attention's two batched GEMMs, learned positions, AdamW, and the per-step scalars of
// the update (clipping, fp16 loss scaling, AdamW's bias corrections) kept on the device.
//
// The conventions of kernels.h: every function enqueues on `stream` and returns at once; `beta`
// 0 overwrites an input gradient, 1 adds to it; parameter gradients are overwritten. The kernels
// are written plainly (one block per row, one thread per element or channel): each mirrors the
// formula of cpu_reference's ops_transformer.cpp line for line, so that they can be checked by
// reading as well as by tests/plugins/gpu_cudnn.
#ifndef DLHOST_GPU_CUDNN_KERNELS_TRANSFORMER_H
#define DLHOST_GPU_CUDNN_KERNELS_TRANSFORMER_H

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dlhost::gpu_cudnn {

// --- layer normalization over the last axis of x [rows, channels] ------------------------------
// Saves each row's mean and 1 / sqrt(var + eps) (biased variance) for backward.
void layer_norm_forward(int64_t rows, int64_t channels, float epsilon, const float* x,
                        const float* scale, const float* shift, float* y, float* mean,
                        float* inv_std, cudaStream_t stream);
// dx = beta dx + inv_std (g - mean(g) - x_hat mean(g x_hat)), g = dy * scale (dx may be null);
// dscale = sum over rows of dy x_hat, dshift = sum over rows of dy (overwritten), through
// `partial` (layer_norm_partial_count(channels) doubles: per-chunk sums, then one fixed-order
// pass).
void layer_norm_backward(int64_t rows, int64_t channels, const float* x, const float* scale,
                         const float* mean, const float* inv_std, const float* dy, float* dx,
                         float beta, float* dscale, float* dshift, double* partial,
                         cudaStream_t stream);
int64_t layer_norm_partial_count(int64_t channels);

// --- GELU (erf, or GPT-2's tanh approximation) ---------------------------------------------------
void gelu_forward(bool tanh_approximation, int64_t n, const float* x, float* y,
                  cudaStream_t stream);
void gelu_backward(bool tanh_approximation, int64_t n, const float* x, const float* dy, float* dx,
                   float beta, cudaStream_t stream);

// --- attention's softmax over rows of S [rows, steps], rows = N * heads * steps -----------------
// In place: P = softmax over j of S (entries j > i set to 0 when causal, i = row % steps). When
// dropout > 0, also weights = P * factor with factor = 1 / (1 - dropout) where
// keep(seed, node, step, row * steps + j) and 0 elsewhere, and keep[row * steps + j] = 0 or 1.
void attention_softmax_forward(int64_t rows, int64_t steps, bool causal, float dropout,
                               uint64_t seed, uint32_t node, uint64_t step, float* scores,
                               float* weights, uint8_t* keep, cudaStream_t stream);
// In place on d [rows, steps], the gradient of the dropped weights on entry: dP = d * factor
// (factor from keep; none when keep is null), then d = P * (dP - sum_j dP P).
void attention_softmax_backward(int64_t rows, int64_t steps, float dropout, const float* probs,
                                const uint8_t* keep, float* d, cudaStream_t stream);

// --- learned positions: y[n, e] = x[n, e] + table[e] for e < per_sample = T * C ------------------
void position_embedding_forward(int64_t batch, int64_t per_sample, const float* x,
                                const float* table, float* y, cudaStream_t stream);
// dtable[e] = sum over n of dy[n, e] for e < per_sample, 0 for the rows after (table_count
// floats in all); dx = beta dx + dy (dx may be null).
void position_embedding_backward(int64_t batch, int64_t per_sample, int64_t table_count,
                                 const float* dy, float* dx, float beta, float* dtable,
                                 cudaStream_t stream);

// --- the update ----------------------------------------------------------------------------------

// The scalars one update reads, computed on the device so the host never waits for the device:
// `factor` multiplies every gradient (1 / loss scale, times the clipping factor); `skip` is 1
// when fp16's scaled gradients were not finite (the step is dropped, as PyTorch's GradScaler
// does); `t` counts the updates made, `bias1` = 1 - beta1^t and `bias2` = 1 - beta2^t.
struct UpdateState {
  float factor;
  int32_t skip;
  double bias1, bias2;  // in double, as cpu_reference computes them
  float loss_scale;     // what the backward's loss gradient is seeded with (1 without scaling)
  int32_t good_steps;   // finite steps since the scale last changed (dynamic scaling)
  int64_t t;
};

struct UpdateRule {
  float clip_norm = 0;          // 0: no clipping
  bool loss_scaling = false;    // fp16: gradients arrive multiplied by state.loss_scale
  bool dynamic_scale = false;   // halve the scale on a non-finite step, double it every
  int32_t growth_interval = 0;  // growth_interval finite steps
  float beta1 = 0, beta2 = 0;   // AdamW's (0 for SGD: bias1 and bias2 unused)
};

// state.loss_scale = scale, the rest as before the first update.
void init_update_state(UpdateState* state, float loss_scale, cudaStream_t stream);
// Fills `state` for this update from the gradients' sum of squares (kernels.h's sum_squares into
// `partials`; null when neither clipping nor loss scaling needs it).
void prepare_update(const double* partials, const UpdateRule& rule, UpdateState* state,
                    cudaStream_t stream);
// *dst = state->loss_scale: the loss gradient backward starts from.
void seed_loss_gradient(const UpdateState* state, float* dst, cudaStream_t stream);

// SGD (dlhost_backend.h): g = factor * grad + wd w; v = momentum v + g (v = g when velocity is
// null); w -= lr v. Nothing when state->skip.
void sgd_step(int64_t n, float lr, float momentum, float weight_decay, const UpdateState* state,
              const float* grad, float* value, float* velocity, cudaStream_t stream);
// AdamW (dlhost_backend.h): g = factor * grad; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// w -= lr wd w; w -= lr (m / bias1) / (sqrt(v / bias2) + eps). Nothing when state->skip.
void adamw_step(int64_t n, float lr, float beta1, float beta2, float epsilon, float weight_decay,
                const UpdateState* state, const float* grad, float* value, float* m, float* v,
                cudaStream_t stream);

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_KERNELS_TRANSFORMER_H
