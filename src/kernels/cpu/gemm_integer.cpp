#include "kernels/cpu/gemm_integer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

namespace {

// q[i] = round(x[i] / scale) clamped to the codes [−zp, 255 − zp], plus `offset`: the uint8 code (offset zp) or
// the code centered on the zero point (offset 0). NaN goes to the lowest code, as ONNX Runtime's max(v, lo) takes lo.
template <typename T>
void quantize_to(const float* x, int64_t n, U8Quantization p, int offset, T* q) {
  const float lo = -static_cast<float>(p.zero_point), hi = 255.0f - static_cast<float>(p.zero_point);
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] / p.scale;
    q[i] = static_cast<T>(static_cast<int>(std::nearbyint(v >= lo ? std::min(v, hi) : lo)) + offset);
  }
}

}  // namespace

void quantize_u8(const float* x, int64_t n, U8Quantization p, uint8_t* q) { quantize_to(x, n, p, p.zero_point, q); }
void quantize_centered(const float* x, int64_t n, U8Quantization p, int16_t* a) { quantize_to(x, n, p, 0, a); }

IntegerMatrix pack_integer_matrix(const void* B, bool is_signed, int64_t K, int64_t N, std::vector<int32_t> zeros) {
  IntegerMatrix w;
  w.K = K;
  w.N = N;
  w.is_signed = is_signed;
  w.rows = Tensor(is_signed ? DType::Int8 : DType::UInt8, {N, K});
  w.zeros = std::move(zeros);
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

// The columns [n0, n1) of every row: the dot products, then the zero points' correction
// Σ_k a·(b − bz) = Σ_k a·b − bz·Σ_k a.
void integer_columns(const int16_t* a, int64_t M, const IntegerMatrix& w, int32_t* c, int64_t n0, int64_t n1) {
  const int64_t K = w.K, N = w.N;
  if (w.is_signed) integer_rows(a, M, K, static_cast<const int8_t*>(w.rows.raw()), n0, n1, c, N);
  else integer_rows(a, M, K, static_cast<const uint8_t*>(w.rows.raw()), n0, n1, c, N);
  if (w.zeros.empty()) return;
  const bool per_column = w.zeros.size() > 1;
  for (int64_t m = 0; m < M; ++m) {
    int32_t a_sum = 0;
    for (int64_t k = 0; k < K; ++k) a_sum += a[m * K + k];
    for (int64_t n = n0; n < n1; ++n) c[m * N + n] -= w.zeros[per_column ? static_cast<size_t>(n) : 0] * a_sum;
  }
}

int64_t column_chunks(int64_t M, const IntegerMatrix& w) { return balanced_chunks(w.N, M * w.N * w.K < (int64_t{1} << 16)); }

}  // namespace

void gemm_integer(const int16_t* a, int64_t M, const IntegerMatrix& w, int32_t* c) {
  parallel_chunks(w.N, column_chunks(M, w), [&](int64_t n0, int64_t n1, int) { integer_columns(a, M, w, c, n0, n1); });
}

void gemm_integer_to_float(const int16_t* a, int64_t M, const IntegerMatrix& w, float a_scale, const float* b_scales, int64_t b_scale_count,
                           const float* bias, float* y) {
  static_assert(sizeof(float) == sizeof(int32_t));
  const int64_t N = w.N;
  auto* sums = reinterpret_cast<int32_t*>(y);  // each chunk's sums, converted where they lie while still in cache
  parallel_chunks(N, column_chunks(M, w), [&](int64_t n0, int64_t n1, int) {
    integer_columns(a, M, w, sums, n0, n1);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = n0; n < n1; ++n) {
        int32_t v;
        std::memcpy(&v, y + m * N + n, sizeof v);
        y[m * N + n] = static_cast<float>(v) * (a_scale * b_scales[b_scale_count == 1 ? 0 : n]) + (bias ? bias[n] : 0.0f);
      }
  });
}

}  // namespace tern::kernels
