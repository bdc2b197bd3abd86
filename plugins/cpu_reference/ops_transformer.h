// ops_transformer.h — cpu_reference's kernels for ABI 1.4's Transformer ops and AdamW, with the
// conventions of ops.h (row-major float32, backward ADDS into input gradients and OVERWRITES
// parameter gradients, long sums in double, nothing allocated here).
#pragma once

#include <cstdint>

namespace cpu_reference {

// --- layer normalization over the last axis: x [rows, channels] -------------------------------

struct LayerNormShape {
  int64_t rows = 0, channels = 0;
  float epsilon = 1e-5f;
};
// Saves each row's mean and 1/sqrt(var + eps) for backward.
void layer_norm_forward(const LayerNormShape& s, const float* x, const float* scale,
                        const float* shift, float* y, double* mean, double* inv_std);
void layer_norm_backward(const LayerNormShape& s, const float* x, const float* scale,
                         const double* mean, const double* inv_std, const float* dy, float* dx,
                         float* dscale, float* dshift);

// --- GELU ------------------------------------------------------------------------------------

void gelu_forward(bool tanh_approximation, int64_t n, const float* x, float* y);
void gelu_backward(bool tanh_approximation, int64_t n, const float* x, const float* dy, float* dx);

// --- multi-head scaled dot-product attention: q, k, v, o [N, T, H*d] --------------------------

struct AttentionShape {
  int64_t batch = 0, steps = 0, heads = 1, head_dim = 1;
  bool causal = false;
  float dropout = 0;  // probability of dropping a weight
};
// `probs` [N, H, T, T] saves the softmax weights; `keep` [N, H, T, T] (null when dropout is 0)
// the factor each weight was multiplied by (0 or 1 / (1 - dropout)). `scratch` is T*T floats.
void attention_forward(const AttentionShape& s, uint64_t seed, uint32_t node, uint64_t step,
                       const float* q, const float* k, const float* v, float* o, float* probs,
                       float* keep, float* scratch);
// `scratch` is 2*T*T floats.
void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const float* probs, const float* keep, const float* dout, float* dq,
                        float* dk, float* dv, float* scratch);

// --- learned positions: x [N, T, C] + table[0:T] ----------------------------------------------

void position_embedding_forward(int64_t batch, int64_t steps, int64_t channels, const float* x,
                                const float* table, float* y);
// dtable [max_positions, C]: rows from T on are zeroed.
void position_embedding_backward(int64_t batch, int64_t steps, int64_t channels,
                                 int64_t max_positions, const float* dy, float* dx, float* dtable);

// --- AdamW (dlhost_backend.h's formula) --------------------------------------------------------

struct AdamWSettings {
  float learning_rate = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f, weight_decay = 0;
};
// `t` counts the updates, from 1; `grad_scale` is the global-norm clipping factor (1 = none).
void adamw_update(const AdamWSettings& a, uint64_t t, int64_t n, float grad_scale,
                  const float* grad, float* value, float* m, float* v);

}  // namespace cpu_reference
