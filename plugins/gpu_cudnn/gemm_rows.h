// gemm_rows.h — how gpu_cudnn asks column-major cuBLAS for a row-major product: cpu_reference's
// gemm convention (row-major C = alpha op(A) op(B) + beta C), batched with strides, turned into
// the arguments of one cublasGemmStridedBatchedEx call. A row-major X is the column-major X^T, so
// C^T = op(B)^T op(A)^T: B goes first, the transposes stay, rows and columns swap. Kept free of
// any CUDA call so that the CPU tests (test_gpu_cudnn_kernels_emulated) check this mapping
// against a plain column-major product, as cuBLAS documents it.
#ifndef DLHOST_GPU_CUDNN_GEMM_ROWS_H
#define DLHOST_GPU_CUDNN_GEMM_ROWS_H

#include <cublas_api.h>

#include <cstdint>

namespace dlhost::gpu_cudnn {

// One row-major matrix operand: `ld` elements between rows, `stride` between the matrices of a
// batch.
struct RowMajor {
  const float* data;
  int64_t ld;
  int64_t stride = 0;
};

// C (rows x cols) = op(A) (rows x inner) op(B) (inner x cols), `batch` times; op(X) = X^T when
// trans_x.
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t rows = 0, cols = 0, inner = 0, batch = 1;
};

// The column-major call: C' (m x n, ldc) = op_a(A') op_b(B'), as cuBLAS reads its arguments.
struct CublasGemm {
  cublasOperation_t op_a, op_b;
  int m, n, k;
  const float* a;
  int lda;
  long long stride_a;
  const float* b;
  int ldb;
  long long stride_b;
  float* c;
  int ldc;
  long long stride_c;
  int batch;
};

inline CublasGemm cublas_gemm(const GemmShape& s, RowMajor a, RowMajor b, float* c, int64_t ldc,
                              int64_t stride_c) {
  return {s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
          s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
          static_cast<int>(s.cols),
          static_cast<int>(s.rows),
          static_cast<int>(s.inner),
          b.data,
          static_cast<int>(b.ld),
          b.stride,
          a.data,
          static_cast<int>(a.ld),
          a.stride,
          c,
          static_cast<int>(ldc),
          stride_c,
          static_cast<int>(s.batch)};
}

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_GEMM_ROWS_H
