// test_gpu_cudnn_kernels_emulated.cpp — the CUDA kernels of gpu_cudnn's Transformer ops and
// update (kernels_transformer.cu, its very source) run on the CPU under cuda_emulation.h, against
// cpu_reference's kernels (ops_transformer.cpp, the oracle) on the same numbers: layer norm,
// GELU, attention's masked softmax with the dropout mask (between naive products standing in for
// cuBLAS), learned positions, AdamW, SGD, clipping and fp16's loss scaling. Rows longer than a
// block, more rows than the chunks of a reduction, beta 0 and 1. What this cannot check is the
// device itself and cuBLAS; but the arguments gpu_cudnn gives cublasGemmStridedBatchedEx for a
// row-major product (gemm_rows.h) are checked here against cuBLAS's documented column-major
// product, for every transpose pair and the attention's head-slice strides.
#include "cuda_emulation.h"  // first: it defines CUDA's keywords for the source below

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <vector>

#include "gemm_rows.h"                       // gpu_cudnn's row-major GEMM on cuBLAS's arguments
#include "kernels_transformer_emulated.inc"  // kernels_transformer.cu, launches rewritten
#include "ops_transformer.h"                 // cpu_reference's

namespace {

namespace gpu = dlhost::gpu_cudnn;
namespace ref = cpu_reference;

std::vector<float> uniform(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-6;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * scale) << what << " element " << i;
}

// --- layer norm ----------------------------------------------------------------------------------

class EmulatedLayerNorm : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(EmulatedLayerNorm, MatchesTheReference) {
  const auto [rows, c] = GetParam();
  const std::vector<float> x = uniform(rows * c, 1, -2, 3), scale = uniform(c, 2, 0.5f, 1.5f),
                           shift = uniform(c, 3), dy = uniform(rows * c, 4);
  ref::LayerNormShape s;
  s.rows = rows;
  s.channels = c;
  s.epsilon = 1e-5f;
  std::vector<float> want_y(rows * c), want_dx(rows * c, 0.5f), want_ds(c), want_db(c);
  std::vector<double> mean(rows), inv_std(rows);
  ref::layer_norm_forward(s, x.data(), scale.data(), shift.data(), want_y.data(), mean.data(),
                          inv_std.data());
  ref::layer_norm_backward(s, x.data(), scale.data(), mean.data(), inv_std.data(), dy.data(),
                           want_dx.data(), want_ds.data(), want_db.data());  // adds to 0.5

  std::vector<float> y(rows * c), m(rows), r(rows), dx(rows * c, 0.5f), ds(c, 7), db(c, 7);
  std::vector<double> partial(gpu::layer_norm_partial_count(c), 99.0);
  gpu::layer_norm_forward(rows, c, 1e-5f, x.data(), scale.data(), shift.data(), y.data(), m.data(),
                          r.data(), nullptr);
  expect_close(y, want_y, 1e-6, "y");
  for (int64_t i = 0; i < rows; ++i) ASSERT_NEAR(r[i], inv_std[i], 1e-6 * inv_std[i]);
  gpu::layer_norm_backward(rows, c, x.data(), scale.data(), m.data(), r.data(), dy.data(),
                           dx.data(), 1.0f, ds.data(), db.data(), partial.data(), nullptr);
  expect_close(dx, want_dx, 1e-5, "dx (added)");
  expect_close(ds, want_ds, 1e-5, "dscale");
  expect_close(db, want_db, 1e-5, "dshift");
  std::fill(dx.begin(), dx.end(), NAN);  // beta 0 must not read dx
  gpu::layer_norm_backward(rows, c, x.data(), scale.data(), m.data(), r.data(), dy.data(),
                           dx.data(), 0.0f, ds.data(), db.data(), partial.data(), nullptr);
  for (int64_t i = 0; i < rows * c; ++i) want_dx[i] -= 0.5f;
  expect_close(dx, want_dx, 1e-5, "dx (overwritten)");
}

// Fewer rows than the reduction's chunks; rows longer than a block; many rows.
INSTANTIATE_TEST_SUITE_P(Shapes, EmulatedLayerNorm,
                         ::testing::Values(std::pair<int64_t, int64_t>{5, 300},
                                           std::pair<int64_t, int64_t>{70, 24}));

// --- GELU ----------------------------------------------------------------------------------------

TEST(Emulated, GeluMatchesTheReference) {
  const int64_t n = 3000;
  const std::vector<float> x = uniform(n, 5, -6, 6), dy = uniform(n, 6);
  for (bool tanh_form : {false, true}) {
    std::vector<float> want_y(n), want_dx(n, 0.25f), y(n), dx(n, 0.25f);
    ref::gelu_forward(tanh_form, n, x.data(), want_y.data());
    ref::gelu_backward(tanh_form, n, x.data(), dy.data(), want_dx.data());
    gpu::gelu_forward(tanh_form, n, x.data(), y.data(), nullptr);
    gpu::gelu_backward(tanh_form, n, x.data(), dy.data(), dx.data(), 1.0f, nullptr);
    expect_close(y, want_y, 1e-6, tanh_form ? "tanh y" : "erf y");
    expect_close(dx, want_dx, 1e-6, tanh_form ? "tanh dx" : "erf dx");
  }
}

// --- attention: naive products around the emulated softmax kernels ------------------------------

struct Dims {
  int64_t n, t, h, d;
  bool causal;
  float dropout;
};

// C[i][j] (+)= alpha sum_k A(i, k) B(k, j) over row-major views, as layers.h's gemm computes.
void product(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < inner; ++k)
        sum += static_cast<double>(ta ? a[k * lda + i] : a[i * lda + k]) *
               (tb ? b[j * ldb + k] : b[k * ldb + j]);
      c[i * ldc + j] += static_cast<float>(alpha * sum);
    }
}

// Printed by value, so that ctest's names are readable and the same in every build.
void PrintTo(const Dims& g, std::ostream* os) {
  *os << "n" << g.n << "_t" << g.t << "_h" << g.h << "_d" << g.d << (g.causal ? "_causal" : "")
      << "_p" << g.dropout;
}

class EmulatedAttention : public ::testing::TestWithParam<Dims> {};

TEST_P(EmulatedAttention, MatchesTheReference) {
  const Dims g = GetParam();
  const int64_t c = g.h * g.d, count = g.n * g.t * c, squares = g.n * g.h * g.t * g.t;
  const std::vector<float> q = uniform(count, 7, -2, 2), k = uniform(count, 8, -2, 2),
                           v = uniform(count, 9), dout = uniform(count, 10);
  const uint64_t seed = 42, step = 3;
  const uint32_t node = 5;
  ref::AttentionShape s{g.n, g.t, g.h, g.d, g.causal, g.dropout};
  std::vector<float> want_o(count), probs(squares), keep(squares), scratch(2 * g.t * g.t);
  ref::attention_forward(s, seed, node, step, q.data(), k.data(), v.data(), want_o.data(),
                         probs.data(), g.dropout > 0 ? keep.data() : nullptr, scratch.data());
  std::vector<float> want_dq(count, 0), want_dk(count, 0), want_dv(count, 0);
  ref::attention_backward(s, q.data(), k.data(), v.data(), probs.data(),
                          g.dropout > 0 ? keep.data() : nullptr, dout.data(), want_dq.data(),
                          want_dk.data(), want_dv.data(), scratch.data());

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.d)));
  std::vector<float> p(squares, 0), weights(squares, 0), o(count, 0), dp(squares, 0);
  std::vector<uint8_t> kept(squares, 7);
  auto at = [&](int64_t n, int64_t h) { return n * g.t * c + h * g.d; };
  auto sq = [&](int64_t n, int64_t h) { return (n * g.h + h) * g.t * g.t; };
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t h = 0; h < g.h; ++h)
      product(false, true, g.t, g.t, g.d, scale, &q[at(n, h)], c, &k[at(n, h)], c, &p[sq(n, h)],
              g.t);
  gpu::attention_softmax_forward(g.n * g.h * g.t, g.t, g.causal, g.dropout, seed, node, step,
                                 p.data(), weights.data(), kept.data(), nullptr);
  expect_close(p, probs, 1e-6, "P");
  const std::vector<float>& used = g.dropout > 0 ? weights : p;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t h = 0; h < g.h; ++h)
      product(false, false, g.t, g.d, g.t, 1, &used[sq(n, h)], g.t, &v[at(n, h)], c, &o[at(n, h)],
              c);
  expect_close(o, want_o, 1e-5, "O");
  if (g.dropout > 0) {
    for (int64_t e = 0; e < squares; ++e)
      ASSERT_EQ(kept[e] != 0, keep[e] != 0.0f) << "mask element " << e;
  }

  std::vector<float> dq(count, 0), dk(count, 0), dv(count, 0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t h = 0; h < g.h; ++h) {
      product(true, false, g.t, g.d, g.t, 1, &used[sq(n, h)], g.t, &dout[at(n, h)], c,
              &dv[at(n, h)], c);
      product(false, true, g.t, g.t, g.d, 1, &dout[at(n, h)], c, &v[at(n, h)], c, &dp[sq(n, h)],
              g.t);
    }
  gpu::attention_softmax_backward(g.n * g.h * g.t, g.t, g.dropout, p.data(),
                                  g.dropout > 0 ? kept.data() : nullptr, dp.data(), nullptr);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t h = 0; h < g.h; ++h) {
      product(false, false, g.t, g.d, g.t, scale, &dp[sq(n, h)], g.t, &k[at(n, h)], c,
              &dq[at(n, h)], c);
      product(true, false, g.t, g.d, g.t, scale, &dp[sq(n, h)], g.t, &q[at(n, h)], c, &dk[at(n, h)],
              c);
    }
  expect_close(dv, want_dv, 1e-5, "dV");
  expect_close(dq, want_dq, 1e-4, "dQ");
  expect_close(dk, want_dk, 1e-4, "dK");
}

// Rows longer than a block (259 steps) and short ones, causal or not, with dropout or without.
INSTANTIATE_TEST_SUITE_P(Shapes, EmulatedAttention,
                         ::testing::Values(Dims{2, 7, 3, 4, true, 0.0f},
                                           Dims{2, 7, 2, 5, false, 0.25f},
                                           Dims{1, 259, 1, 3, true, 0.1f}));

// --- the GEMM mapping ----------------------------------------------------------------------------

// cuBLAS's product as documented, column-major, strided batches: C = alpha op(A) op(B) + beta C,
// C not read when beta is 0; and its rules on the leading dimensions.
void column_major(const gpu::CublasGemm& g, float alpha, float beta) {
  ASSERT_GE(g.lda, g.op_a == CUBLAS_OP_N ? g.m : g.k);
  ASSERT_GE(g.ldb, g.op_b == CUBLAS_OP_N ? g.k : g.n);
  ASSERT_GE(g.ldc, g.m);
  for (int p = 0; p < g.batch; ++p) {
    const float* a = g.a + p * g.stride_a;
    const float* b = g.b + p * g.stride_b;
    float* c = g.c + p * g.stride_c;
    for (int j = 0; j < g.n; ++j)
      for (int i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int l = 0; l < g.k; ++l)
          sum += static_cast<double>(g.op_a == CUBLAS_OP_N ? a[i + l * g.lda] : a[l + i * g.lda]) *
                 (g.op_b == CUBLAS_OP_N ? b[l + j * g.ldb] : b[j + l * g.ldb]);
        float& out = c[i + j * g.ldc];
        out = static_cast<float>(alpha * sum + (beta == 0.0f ? 0.0 : beta * out));
      }
  }
}

struct GemmCase {
  bool ta, tb;
  int64_t rows, cols, inner, batch, lda, stride_a, ldb, stride_b, ldc, stride_c;
};

void PrintTo(const GemmCase& g, std::ostream* os) {
  *os << (g.ta ? "T" : "N") << (g.tb ? "T" : "N") << "_" << g.rows << "x" << g.cols << "x"
      << g.inner << "_batch" << g.batch << "_ld" << g.lda << "_" << g.ldb << "_" << g.ldc;
}

class GemmMapping : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmMapping, ComputesTheRowMajorProduct) {
  const GemmCase g = GetParam();
  const int64_t a_rows = g.ta ? g.inner : g.rows, b_rows = g.tb ? g.cols : g.inner;
  const std::vector<float> a = uniform(g.stride_a * (g.batch - 1) + a_rows * g.lda, 50),
                           b = uniform(g.stride_b * (g.batch - 1) + b_rows * g.ldb, 51);
  const std::vector<float> c0 = uniform(g.stride_c * (g.batch - 1) + g.rows * g.ldc, 52);
  for (float beta : {0.0f, 1.0f}) {
    std::vector<float> want = c0, got = c0;
    for (int64_t p = 0; p < g.batch; ++p) {
      float* c = &want[p * g.stride_c];
      for (int64_t i = 0; i < g.rows; ++i)
        for (int64_t j = 0; j < g.cols; ++j) c[i * g.ldc + j] *= beta;
      product(g.ta, g.tb, g.rows, g.cols, g.inner, 0.5f, &a[p * g.stride_a], g.lda,
              &b[p * g.stride_b], g.ldb, c, g.ldc);
    }
    column_major(gpu::cublas_gemm({g.ta, g.tb, g.rows, g.cols, g.inner, g.batch},
                                  {a.data(), g.lda, g.stride_a}, {b.data(), g.ldb, g.stride_b},
                                  got.data(), g.ldc, g.stride_c),
                 0.5f, beta);
    expect_close(got, want, 1e-6, beta == 0.0f ? "C (beta 0)" : "C (beta 1)");
  }
}

// Every transpose pair with padded rows and batches apart; then the attention's products as
// layers_transformer.cpp issues them for one sample (T 5, 4 heads of d 3, C 12): head slices of
// [T, C] rows d columns apart, T x T squares T*T apart.
INSTANTIATE_TEST_SUITE_P(
    Cases, GemmMapping,
    ::testing::Values(GemmCase{false, false, 5, 4, 3, 3, 5, 40, 6, 30, 7, 50},
                      GemmCase{false, true, 5, 4, 3, 3, 5, 40, 5, 30, 7, 50},
                      GemmCase{true, false, 5, 4, 3, 3, 7, 30, 6, 30, 7, 50},
                      GemmCase{true, true, 5, 4, 3, 3, 7, 30, 5, 30, 7, 50},
                      GemmCase{false, true, 5, 5, 3, 4, 12, 3, 12, 3, 5, 25},   // S = Q K^T
                      GemmCase{false, false, 5, 3, 5, 4, 5, 25, 12, 3, 12, 3},  // O = P V
                      GemmCase{true, false, 5, 3, 5, 4, 5, 25, 12, 3, 12, 3},   // dV, dK
                      GemmCase{false, true, 6, 4, 3, 1, 3, 0, 3, 0, 4, 0},      // fc forward
                      GemmCase{true, false, 4, 3, 6, 1, 4, 0, 3, 0, 3, 0}));    // fc dW

// --- positions -----------------------------------------------------------------------------------

TEST(Emulated, PositionEmbeddingMatchesTheReference) {
  const int64_t n = 3, t = 5, c = 4, max_positions = 9;
  const std::vector<float> x = uniform(n * t * c, 11), table = uniform(max_positions * c, 12),
                           dy = uniform(n * t * c, 13);
  std::vector<float> want_y(n * t * c), y(n * t * c), want_dx(n * t * c, 1), dx(n * t * c, 1);
  std::vector<float> want_dt(max_positions * c, 5), dt(max_positions * c, 5);
  ref::position_embedding_forward(n, t, c, x.data(), table.data(), want_y.data());
  ref::position_embedding_backward(n, t, c, max_positions, dy.data(), want_dx.data(),
                                   want_dt.data());
  gpu::position_embedding_forward(n, t * c, x.data(), table.data(), y.data(), nullptr);
  gpu::position_embedding_backward(n, t * c, max_positions * c, dy.data(), dx.data(), 1.0f,
                                   dt.data(), nullptr);
  expect_close(y, want_y, 1e-7, "y");
  expect_close(dx, want_dx, 1e-7, "dx");
  expect_close(dt, want_dt, 1e-6, "dtable");
}

// --- the update ----------------------------------------------------------------------------------

double sum_of_squares(const std::vector<float>& g) {
  double s = 0;
  for (float x : g) s += static_cast<double>(x) * x;
  return s;
}

// partials as kernels.h's sum_squares leaves them: the total in the first, zeros after.
std::vector<double> partials_of(double total) {
  std::vector<double> p(gpu::kReduceBlocks, 0.0);
  p[0] = total;
  return p;
}

TEST(Emulated, AdamWWithClippingAndLossScaleMatchesTheReference) {
  const int64_t n = 1000;
  std::vector<float> w = uniform(n, 14), m(n, 0), v(n, 0);
  std::vector<float> want_w = w, want_m(n, 0), want_v(n, 0);
  ref::AdamWSettings a;
  a.learning_rate = 1e-2f;
  a.beta1 = 0.9f;
  a.beta2 = 0.99f;
  a.epsilon = 1e-6f;
  a.weight_decay = 0.05f;
  gpu::UpdateRule rule;
  rule.clip_norm = 3.0f;
  rule.loss_scaling = true;  // fp16: the gradients arrive multiplied by the loss scale
  rule.dynamic_scale = false;
  rule.beta1 = a.beta1;
  rule.beta2 = a.beta2;
  gpu::UpdateState st{};
  gpu::init_update_state(&st, 1024.0f, nullptr);
  for (uint64_t t = 1; t <= 4; ++t) {
    const std::vector<float> g = uniform(n, static_cast<uint32_t>(20 + t), -0.5f, 0.5f);
    const double norm = std::sqrt(sum_of_squares(g));
    const float clip = norm > rule.clip_norm ? static_cast<float>(rule.clip_norm / norm) : 1.0f;
    ref::adamw_update(a, t, n, clip, g.data(), want_w.data(), want_m.data(), want_v.data());
    std::vector<float> scaled = g;
    for (float& x : scaled) x *= 1024.0f;
    const std::vector<double> partials = partials_of(sum_of_squares(scaled));
    gpu::prepare_update(partials.data(), rule, &st, nullptr);
    ASSERT_EQ(st.skip, 0);
    ASSERT_EQ(st.t, static_cast<int64_t>(t));
    gpu::adamw_step(n, a.learning_rate, a.beta1, a.beta2, a.epsilon, a.weight_decay, &st,
                    scaled.data(), w.data(), m.data(), v.data(), nullptr);
    expect_close(w, want_w, 1e-6, "w");
    expect_close(m, want_m, 1e-6, "m");
    expect_close(v, want_v, 1e-6, "v");
  }
}

TEST(Emulated, DynamicLossScaleDropsOverflowsAndGrows) {
  const int64_t n = 16;
  std::vector<float> w = uniform(n, 30), m(n, 0), v(n, 0), g = uniform(n, 31);
  gpu::UpdateRule rule;
  rule.loss_scaling = true;
  rule.dynamic_scale = true;
  rule.growth_interval = 2;
  rule.beta1 = 0.9f;
  rule.beta2 = 0.999f;
  gpu::UpdateState st{};
  gpu::init_update_state(&st, 65536.0f, nullptr);
  float seeded = 0;
  gpu::seed_loss_gradient(&st, &seeded, nullptr);
  EXPECT_EQ(seeded, 65536.0f);
  const std::vector<float> before = w;
  std::vector<double> partials = partials_of(INFINITY);  // an overflow
  gpu::prepare_update(partials.data(), rule, &st, nullptr);
  gpu::adamw_step(n, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, &st, g.data(), w.data(), m.data(), v.data(),
                  nullptr);
  EXPECT_EQ(st.skip, 1);
  EXPECT_EQ(w, before);
  EXPECT_EQ(st.t, 0);
  EXPECT_EQ(st.loss_scale, 32768.0f);
  partials = partials_of(NAN);
  gpu::prepare_update(partials.data(), rule, &st, nullptr);
  EXPECT_EQ(st.skip, 1);
  EXPECT_EQ(st.loss_scale, 16384.0f);
  partials = partials_of(sum_of_squares(g));
  gpu::prepare_update(partials.data(), rule, &st, nullptr);
  EXPECT_EQ(st.skip, 0);
  EXPECT_EQ(st.t, 1);
  EXPECT_EQ(st.factor, 1.0f / 16384.0f);
  EXPECT_EQ(st.loss_scale, 16384.0f);
  gpu::prepare_update(partials.data(), rule, &st, nullptr);  // the second finite step: grow
  EXPECT_EQ(st.loss_scale, 32768.0f);
  EXPECT_EQ(st.good_steps, 0);
}

TEST(Emulated, SgdWithMomentumWeightDecayAndClipping) {
  const int64_t n = 500;
  std::vector<float> w = uniform(n, 40), vel(n, 0), want = w, want_vel(n, 0);
  gpu::UpdateRule rule;
  rule.clip_norm = 0.5f;
  gpu::UpdateState st{};
  gpu::init_update_state(&st, 1.0f, nullptr);
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = uniform(n, static_cast<uint32_t>(41 + step));
    const double norm = std::sqrt(sum_of_squares(g));
    const float clip = norm > rule.clip_norm ? static_cast<float>(rule.clip_norm / norm) : 1.0f;
    for (int64_t i = 0; i < n; ++i) {  // dlhost_backend.h's order
      float s = clip * g[i] + 0.01f * want[i];
      want_vel[i] = 0.9f * want_vel[i] + s;
      want[i] -= 0.1f * want_vel[i];
    }
    const std::vector<double> partials = partials_of(sum_of_squares(g));
    gpu::prepare_update(partials.data(), rule, &st, nullptr);
    gpu::sgd_step(n, 0.1f, 0.9f, 0.01f, &st, g.data(), w.data(), vel.data(), nullptr);
    expect_close(w, want, 1e-6, "w");
  }
}

}  // namespace
