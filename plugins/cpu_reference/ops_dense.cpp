// ops_dense.cpp — the ops built on matrix products: fully connected, 2-D convolution (im2col +
// GEMM, the way Caffe's CPU path did it) and the LSTM layer (with backpropagation through time).
#include <cblas.h>

#include <climits>
#include <cmath>
#include <string>

#include "dlhost/common.hpp"
#include "ops.h"

namespace cpu_reference {

namespace {

blasint checked_blas_int(int64_t v) {
  if (v < 0 || v > INT_MAX)
    dlhost::sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "cpu_reference: matrix dimension " +
                                                    std::to_string(v) +
                                                    " does not fit OpenBLAS's integer");
  return static_cast<blasint>(v);
}

double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, checked_blas_int(m), checked_blas_int(n),
              checked_blas_int(k), alpha, a, checked_blas_int(lda), b, checked_blas_int(ldb), beta,
              c, checked_blas_int(ldc));
}

// --- fully connected -------------------------------------------------------------------------
// y[r, o] = sum_i x[r, i] * W[o, i] + b[o]              (y = x W^T + b)
// dx[r, i] += sum_o dy[r, o] * W[o, i]                   (dx = dy W)
// dW[o, i] = sum_r dy[r, o] * x[r, i]                    (dW = dy^T x)
// db[o] = sum_r dy[r, o]

void fc_forward(const FcShape& s, const float* x, const float* w, const float* b, float* y) {
  gemm(false, true, s.rows, s.out, s.in, 1.0f, x, s.in, w, s.in, 0.0f, y, s.out);
  if (b == nullptr) return;
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t o = 0; o < s.out; ++o) y[r * s.out + o] += b[o];
}

void fc_backward(const FcShape& s, const float* x, const float* w, const float* dy, float* dx,
                 float* dw, float* db) {
  if (dx != nullptr)
    gemm(false, false, s.rows, s.in, s.out, 1.0f, dy, s.out, w, s.in, 1.0f, dx, s.in);
  gemm(true, false, s.out, s.in, s.rows, 1.0f, dy, s.out, x, s.in, 0.0f, dw, s.in);
  if (db == nullptr) return;
  for (int64_t o = 0; o < s.out; ++o) {
    double sum = 0;
    for (int64_t r = 0; r < s.rows; ++r) sum += dy[r * s.out + o];
    db[o] = static_cast<float>(sum);
  }
}

// --- 2-D convolution -------------------------------------------------------------------------
// Cross-correlation with zero padding, stride, dilation and groups (G). With Cg = C / G input
// and Og = O / G output channels per group, output channel o of group g = o / Og reads input
// channels g*Cg .. g*Cg + Cg - 1:
//   y[n, o, i, j] = b[o] + sum_{c < Cg, p < KH, q < KW}
//                   W[o, c, p, q] * x[n, g*Cg + c, i*sh - ph + p*dh, j*sw - pw + q*dw]
// (x outside the image is 0). im2col lays the x values one output pixel reads out as a column,
// so each (sample, group) is one matrix product: y_g [Og, OH*OW] = W_g [Og, Cg*KH*KW] * col.
// Backward: dW_g += dy_g * col^T, dcol = W_g^T * dy_g scattered back by col2im, db = sum dy.

namespace {

// col[(c*KH + p)*KW + q, i*OW + j] = x[c, i*sh - ph + p*dh, j*sw - pw + q*dw] for the Cg channels
// of one group of one sample (`x` points at the group's first channel).
void im2col(const ConvShape& s, int64_t channels, const float* x, float* col) {
  const int64_t pixels = s.oh * s.ow;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t p = 0; p < s.kh; ++p)
      for (int64_t q = 0; q < s.kw; ++q) {
        float* row = col + ((c * s.kh + p) * s.kw + q) * pixels;
        for (int64_t i = 0; i < s.oh; ++i) {
          const int64_t y = i * s.sh - s.ph + p * s.dh;
          for (int64_t j = 0; j < s.ow; ++j) {
            const int64_t xx = j * s.sw - s.pw + q * s.dw;
            const bool inside = y >= 0 && y < s.h && xx >= 0 && xx < s.w;
            row[i * s.ow + j] = inside ? x[(c * s.h + y) * s.w + xx] : 0.0f;
          }
        }
      }
}

// The adjoint of im2col: dx[c, y, x] += every col entry that was read from it.
void col2im_add(const ConvShape& s, int64_t channels, const float* col, float* dx) {
  const int64_t pixels = s.oh * s.ow;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t p = 0; p < s.kh; ++p)
      for (int64_t q = 0; q < s.kw; ++q) {
        const float* row = col + ((c * s.kh + p) * s.kw + q) * pixels;
        for (int64_t i = 0; i < s.oh; ++i) {
          const int64_t y = i * s.sh - s.ph + p * s.dh;
          if (y < 0 || y >= s.h) continue;
          for (int64_t j = 0; j < s.ow; ++j) {
            const int64_t xx = j * s.sw - s.pw + q * s.dw;
            if (xx < 0 || xx >= s.w) continue;
            dx[(c * s.h + y) * s.w + xx] += row[i * s.ow + j];
          }
        }
      }
}

}  // namespace

int64_t conv2d_col_size(const ConvShape& s) { return s.c / s.groups * s.kh * s.kw * s.oh * s.ow; }

void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                    float* col) {
  const int64_t cg = s.c / s.groups, og = s.oc / s.groups;
  const int64_t taps = cg * s.kh * s.kw;  // one row of W
  const int64_t pixels = s.oh * s.ow;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < s.groups; ++g) {
      im2col(s, cg, x + (n * s.c + g * cg) * s.h * s.w, col);
      float* y_g = y + (n * s.oc + g * og) * pixels;
      gemm(false, false, og, pixels, taps, 1.0f, w + g * og * taps, taps, col, pixels, 0.0f, y_g,
           pixels);
    }
  if (b == nullptr) return;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.oc; ++o)
      for (int64_t p = 0; p < pixels; ++p) y[(n * s.oc + o) * pixels + p] += b[o];
}

void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                     float* dw, float* db, float* col) {
  const int64_t cg = s.c / s.groups, og = s.oc / s.groups;
  const int64_t taps = cg * s.kh * s.kw;
  const int64_t pixels = s.oh * s.ow;
  for (int64_t i = 0; i < s.oc * taps; ++i) dw[i] = 0.0f;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < s.groups; ++g) {
      const float* dy_g = dy + (n * s.oc + g * og) * pixels;
      // dW_g += dy_g * col^T, with the columns this sample's forward pass read.
      im2col(s, cg, x + (n * s.c + g * cg) * s.h * s.w, col);
      gemm(false, true, og, taps, pixels, 1.0f, dy_g, pixels, col, pixels, 1.0f, dw + g * og * taps,
           taps);
      if (dx == nullptr) continue;
      // dcol = W_g^T * dy_g, then back to the image (reusing the same scratch).
      gemm(true, false, taps, pixels, og, 1.0f, w + g * og * taps, taps, dy_g, pixels, 0.0f, col,
           pixels);
      col2im_add(s, cg, col, dx + (n * s.c + g * cg) * s.h * s.w);
    }
  if (db == nullptr) return;
  for (int64_t o = 0; o < s.oc; ++o) {
    double sum = 0;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t p = 0; p < pixels; ++p) sum += dy[(n * s.oc + o) * pixels + p];
    db[o] = static_cast<float>(sum);
  }
}

// --- LSTM layer ------------------------------------------------------------------------------
// With a_t = W x_t + W_h h_{t-1} + b split into the blocks a^i, a^f, a^g, a^o of H rows:
//   i = sigmoid(a^i), f = sigmoid(a^f), g = tanh(a^g), o = sigmoid(a^o)
//   c_t = f * c_{t-1} + i * g,  h_t = o * tanh(c_t),  h_{-1} = c_{-1} = 0.
// Backward through time, from t = T-1 down to 0, with dh_t = (gradient from above) + W_h^T da_{t+1}
// and dc carried from step t+1 as dc_{t+1} * f_{t+1}:
//   do = dh_t * tanh(c_t),  dc_t = dh_t * o * (1 - tanh(c_t)^2) + dc_{t+1} f_{t+1}
//   di = dc_t * g,  dg = dc_t * i,  df = dc_t * c_{t-1}
//   da^i = di i (1 - i), da^f = df f (1 - f), da^g = dg (1 - g^2), da^o = do o (1 - o)
//   dW = sum_t da_t^T x_t,  dW_h = sum_t da_t^T h_{t-1},  db = sum_t da_t,  dx_t = da_t W.

void lstm_layer_forward(const LstmShape& s, const float* x, const float* w, const float* w_iter,
                        const float* b, float* gates, float* c, float* h) {
  const int64_t H = s.hidden, G = 4 * s.hidden, T = s.steps;
  // W x_t + b for every (n, t) at once: [N*T, C] x [C, 4H].
  gemm(false, true, s.batch * T, G, s.in, 1.0f, x, s.in, w, s.in, 0.0f, gates, G);
  for (int64_t r = 0; r < s.batch * T; ++r)
    for (int64_t k = 0; k < G; ++k) gates[r * G + k] += b[k];
  for (int64_t t = 0; t < T; ++t) {
    // + W_h h_{t-1}: rows n of step t are strided by T*4H (gates) and T*H (h).
    if (t > 0)
      gemm(false, true, s.batch, G, H, 1.0f, h + (t - 1) * H, T * H, w_iter, H, 1.0f, gates + t * G,
           T * G);
    for (int64_t n = 0; n < s.batch; ++n) {
      float* a = gates + (n * T + t) * G;
      for (int64_t j = 0; j < H; ++j) {
        const double i = sigmoid(a[j]);
        const double f = sigmoid(a[H + j]);
        const double g = std::tanh(static_cast<double>(a[2 * H + j]));
        const double o = sigmoid(a[3 * H + j]);
        const double c_prev = t > 0 ? c[(n * T + t - 1) * H + j] : 0.0;
        const double c_t = f * c_prev + i * g;
        a[j] = static_cast<float>(i);
        a[H + j] = static_cast<float>(f);
        a[2 * H + j] = static_cast<float>(g);
        a[3 * H + j] = static_cast<float>(o);
        c[(n * T + t) * H + j] = static_cast<float>(c_t);
        h[(n * T + t) * H + j] = static_cast<float>(o * std::tanh(c_t));
      }
    }
  }
}

void lstm_layer_backward(const LstmShape& s, const float* x, const float* w, const float* w_iter,
                         const float* gates, const float* c, const float* h, const float* dh,
                         float* dx, float* dw, float* dw_iter, float* db, float* dgates,
                         float* carry) {
  const int64_t H = s.hidden, G = 4 * s.hidden, T = s.steps, N = s.batch;
  float* dh_next = carry;          // W_h^T da_{t+1}, [N, H]
  float* dc_next = carry + N * H;  // dc_{t+1} * f_{t+1}, [N, H]
  for (int64_t k = 0; k < 2 * N * H; ++k) carry[k] = 0.0f;
  for (int64_t t = T - 1; t >= 0; --t) {
    for (int64_t n = 0; n < N; ++n) {
      const float* a = gates + (n * T + t) * G;
      float* da = dgates + (n * T + t) * G;
      for (int64_t j = 0; j < H; ++j) {
        const double i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
        const double tanh_c = std::tanh(static_cast<double>(c[(n * T + t) * H + j]));
        const double c_prev = t > 0 ? c[(n * T + t - 1) * H + j] : 0.0;
        const double dh_t = static_cast<double>(dh[(n * T + t) * H + j]) + dh_next[n * H + j];
        const double d_o = dh_t * tanh_c;
        const double dc = dh_t * o * (1.0 - tanh_c * tanh_c) + dc_next[n * H + j];
        const double di = dc * g, dg = dc * i, df = dc * c_prev;
        dc_next[n * H + j] = static_cast<float>(dc * f);
        da[j] = static_cast<float>(di * i * (1.0 - i));
        da[H + j] = static_cast<float>(df * f * (1.0 - f));
        da[2 * H + j] = static_cast<float>(dg * (1.0 - g * g));
        da[3 * H + j] = static_cast<float>(d_o * o * (1.0 - o));
      }
    }
    // dh_next = da_t W_h, what h_{t-1} receives through the recurrence.
    if (t > 0)
      gemm(false, false, N, H, G, 1.0f, dgates + t * G, T * G, w_iter, H, 0.0f, dh_next, H);
  }
  // Weight gradients over all steps at once, now that every da_t is known.
  gemm(true, false, G, s.in, N * T, 1.0f, dgates, G, x, s.in, 0.0f, dw, s.in);
  for (int64_t k = 0; k < G * H; ++k) dw_iter[k] = 0.0f;
  for (int64_t t = 1; t < T; ++t)
    gemm(true, false, G, H, N, 1.0f, dgates + t * G, T * G, h + (t - 1) * H, T * H, 1.0f, dw_iter,
         H);
  for (int64_t k = 0; k < G; ++k) {
    double sum = 0;
    for (int64_t r = 0; r < N * T; ++r) sum += dgates[r * G + k];
    db[k] = static_cast<float>(sum);
  }
  if (dx != nullptr) gemm(false, false, N * T, s.in, G, 1.0f, dgates, G, w, s.in, 1.0f, dx, s.in);
}

}  // namespace cpu_reference
