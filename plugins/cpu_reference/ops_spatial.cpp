// ops_spatial.cpp — the ops that reduce over windows, planes or channels: 2-D pooling, global
// average pooling, batch normalization and local response normalization.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops.h"

namespace cpu_reference {

// --- 2-D pooling -----------------------------------------------------------------------------
// Output pixel (i, j) looks at the window rows [i*sh - ph, i*sh - ph + KH) and columns likewise.
// The window is first clipped to the padded input (a ceil-mode window may hang over its end),
// giving `window_size`; then to the input itself, giving the `valid` elements:
//   max: y = max over the valid elements            (the gradient goes to the first maximum)
//   avg: y = (sum over the valid elements) / divisor,
//        divisor = window_size with count_include_pad (Caffe), else the number of valid ones.
// The graph resolves the output size (floor or ceil mode); this code only follows it.

void pool2d_forward(const PoolShape& s, const float* x, float* y, int64_t* argmax) {
  for (int64_t plane = 0; plane < s.n * s.c; ++plane) {
    const float* xp = x + plane * s.h * s.w;
    for (int64_t i = 0; i < s.oh; ++i)
      for (int64_t j = 0; j < s.ow; ++j) {
        int64_t h0 = i * s.sh - s.ph, w0 = j * s.sw - s.pw;
        int64_t h1 = std::min(h0 + s.kh, s.h + s.ph);
        int64_t w1 = std::min(w0 + s.kw, s.w + s.pw);
        const int64_t window_size = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, s.h);
        w1 = std::min(w1, s.w);
        const int64_t out = plane * s.oh * s.ow + i * s.ow + j;
        if (s.max) {
          int64_t best = -1;
          float best_value = -std::numeric_limits<float>::infinity();
          for (int64_t a = h0; a < h1; ++a)
            for (int64_t b = w0; b < w1; ++b)
              if (best < 0 || xp[a * s.w + b] > best_value) {
                best = a * s.w + b;
                best_value = xp[best];
              }
          // A window with no valid element cannot come out of the graph's size rules; it would
          // read 0 and pass no gradient.
          y[out] = best < 0 ? 0.0f : best_value;
          argmax[out] = best < 0 ? -1 : plane * s.h * s.w + best;
        } else {
          double sum = 0;
          for (int64_t a = h0; a < h1; ++a)
            for (int64_t b = w0; b < w1; ++b) sum += xp[a * s.w + b];
          const int64_t valid = (h1 - h0) * (w1 - w0);
          const int64_t divisor = s.count_include_pad ? window_size : valid;
          y[out] = divisor > 0 ? static_cast<float>(sum / static_cast<double>(divisor)) : 0.0f;
        }
      }
  }
}

void pool2d_backward(const PoolShape& s, const int64_t* argmax, const float* dy, float* dx) {
  if (dx == nullptr) return;
  for (int64_t plane = 0; plane < s.n * s.c; ++plane) {
    float* dxp = dx + plane * s.h * s.w;
    for (int64_t i = 0; i < s.oh; ++i)
      for (int64_t j = 0; j < s.ow; ++j) {
        const int64_t out = plane * s.oh * s.ow + i * s.ow + j;
        if (s.max) {
          if (argmax[out] >= 0) dx[argmax[out]] += dy[out];
          continue;
        }
        // Same window arithmetic as forward: each valid element gets dy / divisor.
        int64_t h0 = i * s.sh - s.ph, w0 = j * s.sw - s.pw;
        int64_t h1 = std::min(h0 + s.kh, s.h + s.ph);
        int64_t w1 = std::min(w0 + s.kw, s.w + s.pw);
        const int64_t window_size = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, s.h);
        w1 = std::min(w1, s.w);
        const int64_t valid = (h1 - h0) * (w1 - w0);
        const int64_t divisor = s.count_include_pad ? window_size : valid;
        if (divisor <= 0) continue;
        const float share = dy[out] / static_cast<float>(divisor);
        for (int64_t a = h0; a < h1; ++a)
          for (int64_t b = w0; b < w1; ++b) dxp[a * s.w + b] += share;
      }
  }
}

// --- global average pooling ------------------------------------------------------------------
// y[p] = (1 / S) sum_s x[p, s];  dx[p, s] += dy[p] / S.

void global_avg_pool_forward(int64_t planes, int64_t spatial, const float* x, float* y) {
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (int64_t k = 0; k < spatial; ++k) sum += x[p * spatial + k];
    y[p] = static_cast<float>(sum / static_cast<double>(spatial));
  }
}

void global_avg_pool_backward(int64_t planes, int64_t spatial, const float* dy, float* dx) {
  if (dx == nullptr) return;
  for (int64_t p = 0; p < planes; ++p) {
    const float share =
        static_cast<float>(static_cast<double>(dy[p]) / static_cast<double>(spatial));
    for (int64_t k = 0; k < spatial; ++k) dx[p * spatial + k] += share;
  }
}

// --- batch normalization (training mode) -----------------------------------------------------
// Per channel c over its m = N * spatial values:
//   mean = (1/m) sum x,  var = (1/m) sum (x - mean)^2 (biased),  x_hat = (x - mean) / sqrt(var +
//   eps) y = scale * x_hat + shift running_mean = (1 - momentum) running_mean + momentum mean
//   running_var  = (1 - momentum) running_var  + momentum var * m / (m - 1) (unbiased)
// Backward (the batch statistics depend on x too):
//   dshift = sum dy,  dscale = sum dy x_hat,
//   dx = scale / sqrt(var + eps) / m * (m dy - dshift - x_hat dscale)

void batch_norm_forward(const BatchNormShape& s, const float* x, const float* scale,
                        const float* shift, float* y, double* mean, double* inv_std,
                        double* running_mean, double* running_var) {
  const int64_t m = s.batch * s.spatial;
  auto at = [&](int64_t n, int64_t c, int64_t k) { return (n * s.channels + c) * s.spatial + k; };
  for (int64_t c = 0; c < s.channels; ++c) {
    double sum = 0;
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t k = 0; k < s.spatial; ++k) sum += x[at(n, c, k)];
    const double mu = sum / static_cast<double>(m);
    double squares = 0;
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t k = 0; k < s.spatial; ++k) {
        const double d = x[at(n, c, k)] - mu;
        squares += d * d;
      }
    const double var = squares / static_cast<double>(m);
    const double istd = 1.0 / std::sqrt(var + static_cast<double>(s.epsilon));
    mean[c] = mu;
    inv_std[c] = istd;
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t k = 0; k < s.spatial; ++k) {
        const double x_hat = (x[at(n, c, k)] - mu) * istd;
        y[at(n, c, k)] = static_cast<float>(scale[c] * x_hat + shift[c]);
      }
    // With one value per channel the unbiased variance is undefined; keep the biased one (0).
    const double unbiased = m > 1 ? var * static_cast<double>(m) / static_cast<double>(m - 1) : var;
    const double mom = s.momentum;
    running_mean[c] = (1.0 - mom) * running_mean[c] + mom * mu;
    running_var[c] = (1.0 - mom) * running_var[c] + mom * unbiased;
  }
}

void batch_norm_backward(const BatchNormShape& s, const float* x, const float* scale,
                         const double* mean, const double* inv_std, const float* dy, float* dx,
                         float* dscale, float* dshift) {
  const int64_t m = s.batch * s.spatial;
  auto at = [&](int64_t n, int64_t c, int64_t k) { return (n * s.channels + c) * s.spatial + k; };
  for (int64_t c = 0; c < s.channels; ++c) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t k = 0; k < s.spatial; ++k) {
        const double x_hat = (x[at(n, c, k)] - mean[c]) * inv_std[c];
        sum_dy += dy[at(n, c, k)];
        sum_dy_xhat += dy[at(n, c, k)] * x_hat;
      }
    dshift[c] = static_cast<float>(sum_dy);
    dscale[c] = static_cast<float>(sum_dy_xhat);
    if (dx == nullptr) continue;
    const double factor = scale[c] * inv_std[c] / static_cast<double>(m);
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t k = 0; k < s.spatial; ++k) {
        const double x_hat = (x[at(n, c, k)] - mean[c]) * inv_std[c];
        const double g =
            factor * (static_cast<double>(m) * dy[at(n, c, k)] - sum_dy - x_hat * sum_dy_xhat);
        dx[at(n, c, k)] += static_cast<float>(g);
      }
  }
}

// --- local response normalization across channels --------------------------------------------
// With the window W(c) = [c - (size-1)/2, c + (size-1)/2] clipped to the channels (zero padding):
//   d_c = k + alpha / size * sum_{c' in W(c)} x_{c'}^2,   y_c = x_c * d_c^(-beta)
// Backward (c is in W(c') exactly when c' is in W(c)):
//   dx_c += dy_c d_c^(-beta)
//           - 2 alpha beta / size * x_c * sum_{c' in W(c)} dy_{c'} x_{c'} d_{c'}^(-beta-1)

void lrn_forward(const LrnShape& s, const float* x, float* y, float* denominator) {
  const int64_t half = (s.size - 1) / 2;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t k = 0; k < s.spatial; ++k) {
        double squares = 0;
        for (int64_t cc = std::max<int64_t>(0, c - half); cc <= std::min(s.channels - 1, c + half);
             ++cc) {
          const double v = x[(n * s.channels + cc) * s.spatial + k];
          squares += v * v;
        }
        const int64_t e = (n * s.channels + c) * s.spatial + k;
        const double d = s.k + s.alpha / static_cast<double>(s.size) * squares;
        denominator[e] = static_cast<float>(d);
        y[e] = static_cast<float>(x[e] * std::pow(d, -static_cast<double>(s.beta)));
      }
}

void lrn_backward(const LrnShape& s, const float* x, const float* denominator, const float* dy,
                  float* dx) {
  if (dx == nullptr) return;
  const int64_t half = (s.size - 1) / 2;
  const double coefficient = 2.0 * s.alpha * s.beta / static_cast<double>(s.size);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t k = 0; k < s.spatial; ++k) {
        double through_others = 0;
        for (int64_t cc = std::max<int64_t>(0, c - half); cc <= std::min(s.channels - 1, c + half);
             ++cc) {
          const int64_t e = (n * s.channels + cc) * s.spatial + k;
          through_others += static_cast<double>(dy[e]) * x[e] *
                            std::pow(static_cast<double>(denominator[e]), -1.0 - s.beta);
        }
        const int64_t e = (n * s.channels + c) * s.spatial + k;
        const double direct =
            dy[e] * std::pow(static_cast<double>(denominator[e]), -static_cast<double>(s.beta));
        dx[e] += static_cast<float>(direct - coefficient * x[e] * through_others);
      }
}

}  // namespace cpu_reference
