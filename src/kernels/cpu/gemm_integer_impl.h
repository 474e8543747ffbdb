// gemm_integer.h's dot products below the VNNI tiers and DynamicQuantizeLinear's range and codes, at the vector
// width of the file that includes this: gemm_integer.cpp (the build's baseline) and, in an x86-64-v2 build,
// x86/float_avx2/gemm_integer.cpp (tier avx2). The dot products are plain loops the compiler vectorizes into widening
// multiply-adds (pmaddwd; vpmaddwd at avx2): int16 activations times weight bytes widened to int16, summed in int32.
// Internal linkage, so each file keeps its own copy built for its flags.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <xsimd/xsimd.hpp>

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

// x's range stretched to include 0: lo = min(0, x…), hi = max(0, x…), NaN passed over — the scalar rule's
// (x < lo ? x : lo) lane by lane, so the same two floats whatever the width.
inline void range_at_width(const float* x, int64_t n, float& lo, float& hi) {
  using batch = xsimd::batch<float>;
  batch l[2] = {batch(0.0f), batch(0.0f)}, h[2] = {batch(0.0f), batch(0.0f)};  // (two chains: the selects' latency)
  int64_t i = 0;
  for (; i + 2 * static_cast<int64_t>(batch::size) <= n; i += 2 * batch::size)
    for (int c = 0; c < 2; ++c) {
      const batch v = batch::load_unaligned(x + i + c * static_cast<int64_t>(batch::size));
      l[c] = xsimd::select(v < l[c], v, l[c]);
      h[c] = xsimd::select(v > h[c], v, h[c]);
    }
  alignas(64) float ls[2 * batch::size], hs[2 * batch::size];
  for (int c = 0; c < 2; ++c) l[c].store_aligned(ls + c * batch::size), h[c].store_aligned(hs + c * batch::size);
  lo = 0, hi = 0;
  for (size_t j = 0; j < 2 * batch::size; ++j) lo = ls[j] < lo ? ls[j] : lo, hi = hs[j] > hi ? hs[j] : hi;
  for (; i < n; ++i) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
}

// q[i] = round(x[i] / scale) clamped to [−zp, 255 − zp], plus zp, rounding half to even, NaN to the lowest code: the
// division and the rounding are IEEE's at every width, so every tier writes the same codes.
inline void quantize_u8_at_width(const float* x, int64_t n, float scale, uint8_t zero_point, uint8_t* q) {
  using batch = xsimd::batch<float>;
  const float lo = -static_cast<float>(zero_point), hi = 255.0f - static_cast<float>(zero_point);
  auto code = [&](float v) {
    v = v / scale;
    return static_cast<uint8_t>(static_cast<int>(std::nearbyint(v >= lo ? std::min(v, hi) : lo)) + zero_point);
  };
  // The quotients divided as GCC's vector extension divides (divps, fdiv): xsimd 8 divides float batches on NEON by a
  // refined reciprocal estimate, not IEEE's division (under qemu-aarch64, −2.5 · s / s rounded to −3).
  using lanes = float __attribute__((vector_size(sizeof(batch))));
  const batch l(lo), h(hi), z(static_cast<float>(zero_point));
  alignas(64) int32_t codes[batch::size];
  int64_t i = 0;
  for (; i + static_cast<int64_t>(batch::size) <= n; i += batch::size) {
    lanes d;
    std::memcpy(&d, x + i, sizeof d);
    d = d / scale;
    const batch v = batch::load_unaligned(reinterpret_cast<const float*>(&d));
    xsimd::batch_cast<int32_t>(xsimd::nearbyint(xsimd::select(v >= l, xsimd::select(v < h, v, h), l)) + z).store_aligned(codes);
    for (size_t j = 0; j < batch::size; ++j) q[i + static_cast<int64_t>(j)] = static_cast<uint8_t>(codes[j]);
  }
  for (; i < n; ++i) q[i] = code(x[i]);
}

}  // namespace
}  // namespace tern::kernels
