#include "kernels/cpu/gemm_integer.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/gemm_integer_impl.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

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

IntegerMatrix pack_integer_matrix(const void* B, bool is_signed, int64_t K, int64_t N) {
  IntegerMatrix w;
  w.K = K;
  w.N = N;
  w.is_signed = is_signed;
  w.rows = Tensor(is_signed ? DType::Int8 : DType::UInt8, {N, K});
  const auto* b = static_cast<const uint8_t*>(B);
  auto* rows = static_cast<uint8_t*>(w.rows.raw());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) rows[n * K + k] = b[k * N + n];
  return w;
}

namespace {

// Columns [n0, n1) of the weight rows' dot products, at tier avx2 where the build has its twin and the CPU the tier.
template <typename B>
void integer_rows(const int16_t* a, int64_t M, int64_t K, const B* rows, int64_t n0, int64_t n1, int32_t* c, int64_t N) {
#if TERN_FLOAT_KERNELS_AVX2
  if (float_kernels_avx2()) return float_avx2::integer_rows(a, M, K, rows, n0, n1, c, N);
#endif
  integer_rows_at_width(a, M, K, rows, n0, n1, c, N);
}

}  // namespace

void gemm_integer(const int16_t* a, int64_t M, const IntegerMatrix& w, const int32_t* b_zeros, int64_t b_zero_count, int32_t* c) {
  const int64_t K = w.K, N = w.N;
  parallel_chunks(N, balanced_chunks(N, M * N * K < (int64_t{1} << 16)), [&](int64_t n0, int64_t n1, int) {
    if (w.is_signed) integer_rows(a, M, K, static_cast<const int8_t*>(w.rows.raw()), n0, n1, c, N);
    else integer_rows(a, M, K, static_cast<const uint8_t*>(w.rows.raw()), n0, n1, c, N);
    if (!b_zeros) return;
    // Σ_k a·(b − bz) = Σ_k a·b − bz·Σ_k a
    for (int64_t m = 0; m < M; ++m) {
      int32_t a_sum = 0;
      for (int64_t k = 0; k < K; ++k) a_sum += a[m * K + k];
      for (int64_t n = n0; n < n1; ++n) c[m * N + n] -= b_zeros[b_zero_count == 1 ? 0 : n] * a_sum;
    }
  });
}

}  // namespace tern::kernels
