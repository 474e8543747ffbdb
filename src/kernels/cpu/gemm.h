// Reference GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, with leading dimensions.
// Eigen does the math: the general path (any transpose, integer types, products whose B is not a
// constant). Constant weights go through gemm_packed, repacked once at load.
#pragma once
#include <cstdint>

namespace tern::kernels {

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T beta,
          T* C, int64_t ldc);

}  // namespace tern::kernels
