#include "kernels/cpu/gemm_integer.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/parallel.h"

namespace tern::kernels {

U8Quantization dynamic_u8_quantization(const float* x, int64_t n) {
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  U8Quantization p;
  p.scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zero = 0.0f - lo / p.scale;  // (NaN for an infinite range: zero point 0)
  p.zero_point = zero > 0 ? static_cast<uint8_t>(std::nearbyint(std::min(zero, 255.0f))) : 0;
  return p;
}

void quantize_u8(const float* x, int64_t n, U8Quantization p, uint8_t* q) {
  const float lo = -static_cast<float>(p.zero_point), hi = 255.0f - static_cast<float>(p.zero_point);
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] / p.scale;  // NaN goes to 0, as ONNX Runtime's max(v, lo) takes lo for it
    q[i] = static_cast<uint8_t>(static_cast<int>(std::nearbyint(v >= lo ? std::min(v, hi) : lo)) + p.zero_point);
  }
}

namespace {

// Rows [0, M) (M ≤ 4: each weight row loaded once for all of them), columns [n0, n1): c[m, n] = Σ_k a[m, k]·b[k, n].
template <int M, typename B>
void rows_block(const int16_t* a, int64_t K, const B* b, int64_t N, int32_t* c, int64_t n0, int64_t n1) {
  for (int m = 0; m < M; ++m) std::fill(c + m * N + n0, c + m * N + n1, 0);
  for (int64_t k = 0; k < K; ++k) {
    const B* row = b + k * N;
    for (int m = 0; m < M; ++m) {
      const int32_t ak = a[m * K + k];
      int32_t* out = c + m * N;
      for (int64_t n = n0; n < n1; ++n) out[n] += ak * static_cast<int32_t>(row[n]);
    }
  }
}

template <typename B>
void gemm_typed(const int16_t* a, int64_t M, const B* b, int64_t K, int64_t N, const int32_t* b_zeros, int64_t b_zero_count, int32_t* c) {
  // Column ranges of 256 (1 KB of int32 sums a row stay in L1 while B's rows stream past).
  const int64_t tiles = (N + 255) / 256;
  parallel_chunks(tiles, balanced_chunks(tiles, M * N * K < (int64_t{1} << 16)), [&](int64_t t0, int64_t t1, int) {
    const int64_t n0 = t0 * 256, n1 = std::min(N, t1 * 256);
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) rows_block<4>(a + m * K, K, b, N, c + m * N, n0, n1);
    for (; m < M; ++m) rows_block<1>(a + m * K, K, b, N, c + m * N, n0, n1);
    if (!b_zeros) return;
    // Σ_k a·(b − bz) = Σ_k a·b − bz·Σ_k a
    for (m = 0; m < M; ++m) {
      int32_t a_sum = 0;
      for (int64_t k = 0; k < K; ++k) a_sum += a[m * K + k];
      for (int64_t n = n0; n < n1; ++n) c[m * N + n] -= b_zeros[b_zero_count == 1 ? 0 : n] * a_sum;
    }
  });
}

}  // namespace

void gemm_integer(const int16_t* a, int64_t M, const void* b, bool b_signed, int64_t K, int64_t N, const int32_t* b_zeros,
                  int64_t b_zero_count, int32_t* c) {
  if (b_signed) gemm_typed(a, M, static_cast<const int8_t*>(b), K, N, b_zeros, b_zero_count, c);
  else gemm_typed(a, M, static_cast<const uint8_t*>(b), K, N, b_zeros, b_zero_count, c);
}

}  // namespace tern::kernels
