// The int8-activation decode kernel, written once over the ISA's u8·s8 dot product (`Dot`) and included
// only by the x86/gemv_nbits_i8_<tier>.cpp files. Everything here has internal linkage: each file's copy
// is compiled with its own tier's flags and must not be merged with another's by the linker.
//
// Layout (ONNX Runtime's MatMulNBits, as stored): a 4-bit 32-value chunk is 16 bytes, byte j holding
// values 2j (low nibble) and 2j + 1 (high nibble). The activations come reordered per 32 values — the 16
// even ones, then the 16 odd ones — so [low nibbles | high nibbles] in one 256-bit register lines up with
// them without shuffles. 8-bit chunks are 32 bytes in order, and the activations too.
#pragma once
#include <immintrin.h>

#include "kernels/cpu/x86/gemv_nbits_i8.h"

namespace tern::kernels {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Σ_kb zp[n,kb] · ws[n,kb] · xs·Σxq[kb], the zero points' share of row n, once per row after the dot
// products (inside the block loop its scalar arithmetic cost as much as the integer products). The
// default and float zero points run 8 blocks per step; packed ones are read one by one. `offset` is what
// the dot product already subtracted from each weight (Dot::kW8Offset for 8 bits).
float zero_point_share(const Int8Row& x, const NBitsWeights& w, int64_t n, int64_t k_blocks, float offset) {
  const float* ws = w.scales + n * k_blocks;
  if (w.zp_packed) {
    float share = 0;
    for (int64_t kb = 0; kb < k_blocks; ++kb) share += (nbits_zero_point(w, n, kb, k_blocks) - offset) * ws[kb] * x.sum[kb];
    return share;
  }
  const float* zf = w.zp_float ? w.zp_float + n * k_blocks : nullptr;
  const float fixed = static_cast<float>(int64_t{1} << (w.bits - 1)) - offset;  // the default zero point
  if (!zf && fixed == 0) return 0;
  __m256 acc = _mm256_setzero_ps();
  int64_t kb = 0;
  for (; kb + 8 <= k_blocks; kb += 8) {
    const __m256 zp = zf ? _mm256_sub_ps(_mm256_loadu_ps(zf + kb), _mm256_set1_ps(offset)) : _mm256_set1_ps(fixed);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(zp, _mm256_loadu_ps(ws + kb)), _mm256_loadu_ps(x.sum + kb), acc);
  }
  float share = hsum(acc);
  for (; kb < k_blocks; ++kb) share += (zf ? zf[kb] - offset : fixed) * ws[kb] * x.sum[kb];
  return share;
}

// The bytes 8 weight rows ahead (two row groups) are requested while these are multiplied: the hardware
// prefetcher alone left the 49152×576 Q8_0 lm_head of SmolLM2 at 11.8 GB/s with 2 threads (Zen 3, 28.3 GB/s
// measured); with this, 22–30 GB/s (4 rows ahead: 23.5; 16: 22.6–25.2 — noisy VM, 8 chosen).
// Reading past the last row is harmless: a prefetch never faults.
constexpr int64_t kPrefetchRows = 8;

// R output rows share each activation load. Dot::u8s8(acc, u, s) adds Σ u·s over each group of four bytes
// to acc's int32 lanes; 8-bit weights go through Dot::w8 (which may offset them, see kW8Offset).
template <class Dot, int Bits, int R>
void rows(const Int8Row& x, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t blob = w.block * Bits / 8, chunks = w.block / 32;
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256 acc[R];
  const uint8_t* q[R];
  const float* ws[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    q[r] = w.data + (n0 + r) * k_blocks * blob;
    ws[r] = w.scales + (n0 + r) * k_blocks;
  }
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    __m256i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm256_setzero_si256();
    const int8_t* xq = x.q + kb * w.block;
    for (int64_t c = 0; c < chunks; ++c) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * c));
      for (int r = 0; r < R; ++r) {
        const uint8_t* p = q[r] + kb * blob;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchRows * k_blocks * blob + 32 * c), _MM_HINT_T0);
        if constexpr (Bits == 4) {
          const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * c));
          const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), nibble);
          dot[r] = Dot::u8s8(dot[r], u, xv);
        } else {
          dot[r] = Dot::w8(dot[r], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * c)), xv);
        }
      }
    }
    const float xs = x.scale[kb];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), _mm256_set1_ps(ws[r][kb] * xs), acc[r]);
  }
  const float offset = Bits == 8 ? Dot::kW8Offset : 0.0f;
  for (int r = 0; r < R; ++r) y[n0 + r] = hsum(acc[r]) - zero_point_share(x, w, n0 + r, k_blocks, offset);
}

template <class Dot>
void gemv_rows(const Int8Row& x, const NBitsWeights& w, int64_t n0, int64_t n1, float* y) {
  const int64_t k_blocks = (w.K + w.block - 1) / w.block;
  int64_t n = n0;
  if (w.bits == 4) {
    for (; n + 4 <= n1; n += 4) rows<Dot, 4, 4>(x, w, k_blocks, n, y);
    for (; n < n1; ++n) rows<Dot, 4, 1>(x, w, k_blocks, n, y);
  } else {
    for (; n + 4 <= n1; n += 4) rows<Dot, 8, 4>(x, w, k_blocks, n, y);
    for (; n < n1; ++n) rows<Dot, 8, 1>(x, w, k_blocks, n, y);
  }
}

}  // namespace
}  // namespace tern::kernels
