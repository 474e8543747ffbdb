#include "kernels/cpu/gemm.h"

// Eigen on the calling thread: the bands are ours to spread (an OpenMP team inside a band would nest).
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>

#include "kernels/cpu/parallel.h"

namespace tern::kernels {
namespace {

template <typename T>
void gemm_band(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb,
               T beta, T* C, int64_t ldc) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<Mat, 0, Stride> c(C, M, N, Stride(ldc));
  if (beta == T(0)) c.setZero();
  else if (beta != T(1)) c *= beta;
  if (K == 0 || M == 0 || N == 0) return;
  Eigen::Map<const Mat, 0, Stride> a(A, trans_a ? K : M, trans_a ? M : K, Stride(lda));
  Eigen::Map<const Mat, 0, Stride> b(B, trans_b ? N : K, trans_b ? K : N, Stride(ldb));
  if (!trans_a && !trans_b) c.noalias() += alpha * a * b;
  else if (trans_a && !trans_b) c.noalias() += alpha * a.transpose() * b;
  else if (!trans_a && trans_b) c.noalias() += alpha * a * b.transpose();
  else c.noalias() += alpha * a.transpose() * b.transpose();
}

}  // namespace

template <typename T>
void gemm(const Context& cx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc) {
  // Bands of 8 rows or more (Eigen's register blocks are 4-12 rows); small products on one thread.
  const bool small = M * N * K < (int64_t{1} << 16);
  const int64_t bands = small ? 1 : std::min<int64_t>(cx.threads, (M + 7) / 8);
  parallel_chunks(cx.threads, M, bands, [&](int64_t m0, int64_t m1, int) {
    // Row m of op(A) starts at A + m·lda, or (transposed) at column m: A + m.
    const T* a = trans_a ? A + m0 : A + m0 * lda;
    gemm_band(trans_a, trans_b, m1 - m0, N, K, alpha, a, lda, B, ldb, beta, C + m0 * ldc, ldc);
  });
}

#define TERN_GEMM(T) \
  template void gemm<T>(const Context&, bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, T*, int64_t);
TERN_GEMM(float)
#ifndef TERN_MINIMAL  // (a minimal build's MatMul/Gemm compute in float only: ops/matmul.cpp)
TERN_GEMM(double)
TERN_GEMM(int32_t)
TERN_GEMM(int64_t)
TERN_GEMM(uint32_t)
TERN_GEMM(uint64_t)
#endif
#undef TERN_GEMM

}  // namespace tern::kernels
