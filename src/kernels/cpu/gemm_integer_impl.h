// gemm_integer.h's dot products below the VNNI tiers, at the vector width of the file that includes this: gemm_integer.cpp (the build's
// baseline) and, in an x86-64-v2 build, x86/float_avx2/gemm_integer.cpp (tier avx2). Plain loops the compiler
// vectorizes into widening multiply-adds (pmaddwd; vpmaddwd at avx2): int16 activations times weight bytes widened
// to int16, summed in int32. Internal linkage, so each file keeps its own copy built for its flags.
#pragma once
#include <cstdint>

namespace tern::kernels {
namespace {

// Columns [n0, n1) of c[m, n] = Σ_k a[m, k] · w[n, k]: four activation rows a pass over each weight row.
template <typename B>
void integer_rows_at_width(const int16_t* a, int64_t M, int64_t K, const B* w, int64_t n0, int64_t n1, int32_t* c, int64_t N) {
  for (int64_t n = n0; n < n1; ++n) {
    const B* row = w + n * K;
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) {
      const int16_t *a0 = a + m * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
      int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int16_t b = row[k];
        s0 += a0[k] * b;
        s1 += a1[k] * b;
        s2 += a2[k] * b;
        s3 += a3[k] * b;
      }
      c[m * N + n] = s0;
      c[(m + 1) * N + n] = s1;
      c[(m + 2) * N + n] = s2;
      c[(m + 3) * N + n] = s3;
    }
    for (; m < M; ++m) {
      const int16_t* am = a + m * K;
      int32_t s = 0;
      for (int64_t k = 0; k < K; ++k) s += am[k] * static_cast<int16_t>(row[k]);
      c[m * N + n] = s;
    }
  }
}

}  // namespace
}  // namespace tern::kernels
