#include "kernels/cpu/gemm.h"

#include <Eigen/Core>

namespace tern::kernels {

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T beta,
          T* C, int64_t ldc) {
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

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float, float*,
                          int64_t);
#ifndef TERN_MINIMAL  // (a minimal build's MatMul/Gemm compute in float only: ops/matmul.cpp)
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*, int64_t, double, double*,
                           int64_t);
template void gemm<int32_t>(bool, bool, int64_t, int64_t, int64_t, int32_t, const int32_t*, int64_t, const int32_t*, int64_t, int32_t,
                            int32_t*, int64_t);
template void gemm<int64_t>(bool, bool, int64_t, int64_t, int64_t, int64_t, const int64_t*, int64_t, const int64_t*, int64_t, int64_t,
                            int64_t*, int64_t);
template void gemm<uint32_t>(bool, bool, int64_t, int64_t, int64_t, uint32_t, const uint32_t*, int64_t, const uint32_t*, int64_t, uint32_t,
                             uint32_t*, int64_t);
template void gemm<uint64_t>(bool, bool, int64_t, int64_t, int64_t, uint64_t, const uint64_t*, int64_t, const uint64_t*, int64_t, uint64_t,
                             uint64_t*, int64_t);
#endif

}  // namespace tern::kernels
