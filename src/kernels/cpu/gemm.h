// Reference GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, with leading dimensions.
// Eigen does the math: the general path (any transpose, integer types, products whose B is not a
// constant). Constant weights go through gemm_packed, repacked once at load. Bands of C's rows go to the
// run's threads (parallel.h), each one Eigen product on one thread: Eigen blocks K by K alone, so a band's
// elements are summed as a single call sums them, whatever the thread count.
#pragma once
#include <cstdint>

#include "kernels/cpu/context.h"

namespace tern::kernels {

template <typename T>
void gemm(const Context& cx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc);

}  // namespace tern::kernels
