// ops_transformer.cpp — see ops_transformer.h. Each kernel is the formula of dlhost_graph.h or
// dlhost_backend.h written out; attention's products go through ops.h's gemm, one head at a time.
#include "ops_transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "dlhost/dlhost.h"
#include "ops.h"

namespace cpu_reference {

// --- layer normalization -----------------------------------------------------------------------
// y = scale * x_hat + shift, x_hat = (x - mean) * inv_std over one row. Backward, with
// g = dy * scale: dx = inv_std * (g - mean(g) - x_hat * mean(g * x_hat)).

void layer_norm_forward(const LayerNormShape& s, const float* x, const float* scale,
                        const float* shift, float* y, double* mean, double* inv_std) {
  const int64_t c = s.channels;
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* xr = x + r * c;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < c; ++i) sum += xr[i];
    const double mu = sum / static_cast<double>(c);
    for (int64_t i = 0; i < c; ++i) sq += (xr[i] - mu) * (xr[i] - mu);
    const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(c) + s.epsilon);
    mean[r] = mu;
    inv_std[r] = rstd;
    for (int64_t i = 0; i < c; ++i)
      y[r * c + i] = static_cast<float>(scale[i] * ((xr[i] - mu) * rstd) + shift[i]);
  }
}

void layer_norm_backward(const LayerNormShape& s, const float* x, const float* scale,
                         const double* mean, const double* inv_std, const float* dy, float* dx,
                         float* dscale, float* dshift) {
  const int64_t c = s.channels;
  for (int64_t i = 0; i < c; ++i) {
    double ds = 0, db = 0;
    for (int64_t r = 0; r < s.rows; ++r) {
      ds += dy[r * c + i] * ((x[r * c + i] - mean[r]) * inv_std[r]);
      db += dy[r * c + i];
    }
    dscale[i] = static_cast<float>(ds);
    dshift[i] = static_cast<float>(db);
  }
  if (dx == nullptr) return;
  for (int64_t r = 0; r < s.rows; ++r) {
    double g_mean = 0, gx_mean = 0;
    for (int64_t i = 0; i < c; ++i) {
      const double g = static_cast<double>(dy[r * c + i]) * scale[i];
      g_mean += g;
      gx_mean += g * (x[r * c + i] - mean[r]) * inv_std[r];
    }
    g_mean /= static_cast<double>(c);
    gx_mean /= static_cast<double>(c);
    for (int64_t i = 0; i < c; ++i) {
      const double g = static_cast<double>(dy[r * c + i]) * scale[i];
      const double x_hat = (x[r * c + i] - mean[r]) * inv_std[r];
      dx[r * c + i] += static_cast<float>(inv_std[r] * (g - g_mean - x_hat * gx_mean));
    }
  }
}

// --- GELU --------------------------------------------------------------------------------------
// erf: x Phi(x), Phi the normal CDF; d/dx = Phi(x) + x phi(x).
// tanh: x/2 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3);
//   d/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2).

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
}  // namespace

void gelu_forward(bool tanh_approximation, int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(
        tanh_approximation
            ? 0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v)))
            : 0.5 * v * (1.0 + std::erf(v * kInvSqrt2)));
  }
}

void gelu_backward(bool tanh_approximation, int64_t n, const float* x, const float* dy, float* dx) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    double d;
    if (tanh_approximation) {
      const double t = std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
      d = 0.5 * (1.0 + t) +
          0.5 * v * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * v * v);
    } else {
      d = 0.5 * (1.0 + std::erf(v * kInvSqrt2)) + v * kInvSqrt2Pi * std::exp(-0.5 * v * v);
    }
    dx[i] += static_cast<float>(d * dy[i]);
  }
}

// --- attention -----------------------------------------------------------------------------------
// Per sample n and head h, Q, K, V, O are [T, d] slices with row stride C = H*d at column h*d:
//   S = Q K^T / sqrt(d) (masked to -inf above the diagonal when causal), P = softmax(S) by row,
//   Pd = P * keep, O = Pd V.
// Backward: dV = Pd^T dO; dPd = dO V^T; dP = dPd * keep;
//   dS = P * (dP - rowsum(dP * P)); dQ = dS K / sqrt(d); dK = dS^T Q / sqrt(d).

void attention_forward(const AttentionShape& s, uint64_t seed, uint32_t node, uint64_t step,
                       const float* q, const float* k, const float* v, float* o, float* probs,
                       float* keep, float* scratch) {
  const int64_t t = s.steps, d = s.head_dim, c = s.heads * s.head_dim;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float kept = s.dropout > 0 ? 1.0f / (1.0f - s.dropout) : 1.0f;
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t at = n * t * c + h * d;
      float* p = probs + (n * s.heads + h) * t * t;
      gemm(false, true, t, t, d, scale, q + at, c, k + at, c, 0.0f, p, t);
      for (int64_t i = 0; i < t; ++i) {
        float* row = p + i * t;
        const int64_t visible = s.causal ? i + 1 : t;
        double top = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t j = 0; j < visible; ++j) top = std::max(top, static_cast<double>(row[j]));
        for (int64_t j = 0; j < visible; ++j) sum += std::exp(row[j] - top);
        for (int64_t j = 0; j < t; ++j)
          row[j] = j < visible ? static_cast<float>(std::exp(row[j] - top) / sum) : 0.0f;
      }
      const float* weights = p;
      if (keep != nullptr) {
        float* factor = keep + (n * s.heads + h) * t * t;
        const uint64_t base = static_cast<uint64_t>((n * s.heads + h) * t * t);
        for (int64_t e = 0; e < t * t; ++e) {
          factor[e] =
              dlhost_dropout_keep(seed, node, step, base + static_cast<uint64_t>(e), s.dropout)
                  ? kept
                  : 0.0f;
          scratch[e] = p[e] * factor[e];
        }
        weights = scratch;
      }
      gemm(false, false, t, d, t, 1.0f, weights, t, v + at, c, 0.0f, o + at, c);
    }
  }
}

void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const float* probs, const float* keep, const float* dout, float* dq,
                        float* dk, float* dv, float* scratch) {
  const int64_t t = s.steps, d = s.head_dim, c = s.heads * s.head_dim;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  float* weights = scratch;     // Pd [T, T]
  float* dp = scratch + t * t;  // dP, then dS [T, T]
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t at = n * t * c + h * d;
      const float* p = probs + (n * s.heads + h) * t * t;
      const float* factor = keep != nullptr ? keep + (n * s.heads + h) * t * t : nullptr;
      for (int64_t e = 0; e < t * t; ++e) weights[e] = factor ? p[e] * factor[e] : p[e];
      if (dv != nullptr)
        gemm(true, false, t, d, t, 1.0f, weights, t, dout + at, c, 1.0f, dv + at, c);
      gemm(false, true, t, t, d, 1.0f, dout + at, c, v + at, c, 0.0f, dp, t);
      for (int64_t i = 0; i < t; ++i) {
        float* row = dp + i * t;
        const float* prow = p + i * t;
        double dot = 0;
        for (int64_t j = 0; j < t; ++j) {
          if (factor != nullptr) row[j] *= factor[i * t + j];
          dot += static_cast<double>(row[j]) * prow[j];
        }
        for (int64_t j = 0; j < t; ++j) row[j] = static_cast<float>(prow[j] * (row[j] - dot));
      }
      if (dq != nullptr) gemm(false, false, t, d, t, scale, dp, t, k + at, c, 1.0f, dq + at, c);
      if (dk != nullptr) gemm(true, false, t, d, t, scale, dp, t, q + at, c, 1.0f, dk + at, c);
    }
  }
}

// --- learned positions
// ----------------------------------------------------------------------------

void position_embedding_forward(int64_t batch, int64_t steps, int64_t channels, const float* x,
                                const float* table, float* y) {
  const int64_t per_sample = steps * channels;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t e = 0; e < per_sample; ++e)
      y[n * per_sample + e] = x[n * per_sample + e] + table[e];
}

void position_embedding_backward(int64_t batch, int64_t steps, int64_t channels,
                                 int64_t max_positions, const float* dy, float* dx, float* dtable) {
  const int64_t per_sample = steps * channels;
  std::fill(dtable + per_sample, dtable + max_positions * channels, 0.0f);
  for (int64_t e = 0; e < per_sample; ++e) {
    double sum = 0;
    for (int64_t n = 0; n < batch; ++n) sum += dy[n * per_sample + e];
    dtable[e] = static_cast<float>(sum);
  }
  if (dx != nullptr)
    for (int64_t i = 0; i < batch * per_sample; ++i) dx[i] += dy[i];
}

// --- AdamW
// ------------------------------------------------------------------------------------------

void adamw_update(const AdamWSettings& a, uint64_t t, int64_t n, float grad_scale,
                  const float* grad, float* value, float* m, float* v) {
  const double c1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(t));
  const double c2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(t));
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(grad[i]) * grad_scale;
    m[i] = static_cast<float>(a.beta1 * m[i] + (1.0 - a.beta1) * g);
    v[i] = static_cast<float>(a.beta2 * v[i] + (1.0 - a.beta2) * g * g);
    double w = value[i];
    w -= static_cast<double>(a.learning_rate) * a.weight_decay * w;
    w -= a.learning_rate * (m[i] / c1) / (std::sqrt(v[i] / c2) + a.epsilon);
    value[i] = static_cast<float>(w);
  }
}

}  // namespace cpu_reference
