// dequantize_nbits_block at the vector width of the file that includes this: nbits.cpp (the build's
// baseline) and, in an x86-64-v2 build, x86/nbits_avx2.cpp (tier avx2, where the AVX2 paths below compile).
// Internal linkage throughout: each file keeps its own copy built for its flags.
#pragma once
#include <algorithm>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/cpu/nbits.h"

namespace tern::kernels {

#if defined(__AVX2__) && defined(__FMA__)
namespace {
// 4-bit weights of rows [n0, n0 + 8) × 32 values from k (a 32-value chunk inside one block) to
// out[(k' − k)·ld + r], vectorized: each row's 16 bytes widen to 32 nibbles in k order, an 8×16 byte
// transpose (three rounds of unpacks) turns rows into columns, and each k's 8 values are one
// u8 → float conversion, (q − zp)·scale as the scalar loop computes it (the same bits). The scalar loop took ~3 ns a
// weight: 57% of the 1B-shape model's int4 prefill went to gemm_nbits' dequantization.
void dequantize_rows8_chunk4(const NBitsWeights& w, int64_t n0, int64_t k, int64_t k_blocks, float* out, int64_t ld) {
  const int64_t kb = k / w.block, blob = w.block / 2;
  alignas(32) float scale[8], zero[8];
  __m128i lo_k[8], hi_k[8];  // per row: values k..k+15, k+16..k+31 as bytes
  for (int r = 0; r < 8; ++r) {
    const int64_t n = n0 + r;
    scale[r] = w.scales[n * k_blocks + kb];
    zero[r] = nbits_zero_point(w, n, kb, k_blocks);
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.data + (n * k_blocks + kb) * blob + (k % w.block) / 2));
    const __m128i lo = _mm_and_si128(bytes, _mm_set1_epi8(0x0F)), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F));
    lo_k[r] = _mm_unpacklo_epi8(lo, hi);
    hi_k[r] = _mm_unpackhi_epi8(lo, hi);
  }
  const __m256 vs = _mm256_load_ps(scale), vz = _mm256_load_ps(zero);
  for (int half = 0; half < 2; ++half) {
    const __m128i* v = half ? hi_k : lo_k;
    __m128i t[8], u[8];
    for (int p = 0; p < 4; ++p) {  // rows 2p, 2p+1 interleaved: [k0: r r', k1: r r', …]
      t[2 * p] = _mm_unpacklo_epi8(v[2 * p], v[2 * p + 1]);
      t[2 * p + 1] = _mm_unpackhi_epi8(v[2 * p], v[2 * p + 1]);
    }
    for (int q = 0; q < 2; ++q)  // four rows per k: u[4q + i] holds k = 4i' .. for rows 4q..4q+3
      for (int i = 0; i < 2; ++i) {
        u[4 * q + 2 * i] = _mm_unpacklo_epi16(t[4 * q + i], t[4 * q + 2 + i]);
        u[4 * q + 2 * i + 1] = _mm_unpackhi_epi16(t[4 * q + i], t[4 * q + 2 + i]);
      }
    for (int i = 0; i < 4; ++i) {  // eight rows per k, two k per register
      const __m128i pair[2] = {_mm_unpacklo_epi32(u[i], u[4 + i]), _mm_unpackhi_epi32(u[i], u[4 + i])};
      for (int j = 0; j < 2; ++j)
        for (int e = 0; e < 2; ++e) {
          const int64_t kk = 16 * half + 4 * i + 2 * j + e;
          const __m128i bytes8 = e ? _mm_srli_si128(pair[j], 8) : pair[j];
          const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes8));
          _mm256_storeu_ps(out + kk * ld, _mm256_mul_ps(_mm256_sub_ps(q, vz), vs));
        }
    }
  }
}
}  // namespace
#endif

#if defined(__AVX2__)
namespace {
// Scales and zero points of 8 rows (half h of group g) at block kb of grouped weights, as floats.
void group_block_params(const NBitsWeights& w, int64_t g, int h, int64_t kb, __m256& scale, __m256& zero) {
  const int64_t at = (g * nbits_k_blocks(w) + kb) * kNBitsGroupRows + 8 * h;
  scale =
      w.scales_f16 ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales_f16 + at))) : _mm256_loadu_ps(w.scales + at);
  zero = w.zp_float    ? _mm256_loadu_ps(w.zp_float + at)
         : w.zp_packed ? _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.zp_packed + at))))
                       : _mm256_set1_ps(static_cast<float>(1 << (w.bits - 1)));
}

// Grouped 4-bit weights: rows [n0, n0 + 8) (half h of group g) × the 32 values of chunk c to
// out[k·ld + r], k from 0: run j's 4 bytes per row, byte t widened to int32 lanes, are values 4j + t
// (low nibble) and 16 + 4j + t (high) of 8 rows; (q − zp)·scale as the scalar rule computes it.
void dequantize_group_half_chunk(const NBitsWeights& w, int64_t g, int h, int64_t c, float* out, int64_t ld) {
  __m256 vs, vz;
  group_block_params(w, g, h, c * 32 / w.block, vs, vz);
  const uint8_t* p = w.data + (g * (nbits_k_blocks(w) * w.block / 32) + c) * nbits_chunk_bytes(4) + 32 * h;
  for (int j = 0; j < 4; ++j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * j));
    for (int t = 0; t < 4; ++t) {
      const __m256i b = _mm256_and_si256(_mm256_srli_epi32(v, 8 * t), _mm256_set1_epi32(0xFF));
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0x0F)));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
      _mm256_storeu_ps(out + (4 * j + t) * ld, _mm256_mul_ps(_mm256_sub_ps(lo, vz), vs));
      _mm256_storeu_ps(out + (16 + 4 * j + t) * ld, _mm256_mul_ps(_mm256_sub_ps(hi, vz), vs));
    }
  }
}

// Grouped 8-bit weights the same way: run j's 4 bytes per row are values 4j … 4j + 3, and a block of 16 is half a
// chunk (runs 0-3 the first block's, 4-7 the second's). Gemma-3-270M Q4_K_M's Q6_K and Q8_0 matrices (grouped for
// the int8 GEMV) went through the scalar rule: `tern bench models/gemma-3-270m --prompt-tokens 128 --new-tokens 4
// --threads 2`, alternated ×5, Zen 5 (tier avx512bf16): prefill 805 → 1701 tok/s (medians).
void dequantize_group8_half_chunk(const NBitsWeights& w, int64_t g, int h, int64_t c, float* out, int64_t ld) {
  const int64_t k_blocks = nbits_k_blocks(w);
  const uint8_t* p = w.data + (g * (k_blocks * w.block / 32) + c) * nbits_chunk_bytes(8) + 32 * h;
  __m256 vs = _mm256_setzero_ps(), vz = vs;
  for (int j = 0; j < 8; ++j) {
    if (j == 0 || (w.block == 16 && j == 4)) group_block_params(w, g, h, (c * 32 + 4 * j) / w.block, vs, vz);  // (a block's start)
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * j));
    for (int t = 0; t < 4; ++t) {
      const __m256 q = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 8 * t), _mm256_set1_epi32(0xFF)));
      _mm256_storeu_ps(out + (4 * j + t) * ld, _mm256_mul_ps(_mm256_sub_ps(q, vz), vs));
    }
  }
}
}  // namespace
#endif

namespace {
// The code of row n's value k in either layout.
uint32_t nbits_code(const NBitsWeights& w, int64_t n, int64_t k, int64_t k_blocks) {
  if (w.grouped) {
    const int64_t c = k / 32, i = k % 32, chunks = k_blocks * w.block / 32;
    const uint8_t* chunk = w.data + ((n / kNBitsGroupRows) * chunks + c) * nbits_chunk_bytes(w.bits) + (n % kNBitsGroupRows) * 4;
    if (w.bits != 4) {  // (2- and 8-bit: the row's chunk bytes in order, 4 a run)
      const int64_t bit = i * w.bits, byte = bit / 8;
      return (chunk[(byte / 4) * 64 + byte % 4] >> (bit % 8)) & ((1u << w.bits) - 1);
    }
    const uint8_t byte = chunk[(i % 16 / 4) * 64 + i % 4];
    return i < 16 ? byte & 0xFu : byte >> 4;
  }
  const int64_t kb = k / w.block, bit = (k - kb * w.block) * w.bits;
  return (w.data[(n * k_blocks + kb) * (w.block * w.bits / 8) + bit / 8] >> (bit % 8)) & ((1u << w.bits) - 1);
}

void dequantize_block_at_width(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld) {
  const int64_t k_blocks = nbits_k_blocks(w);
#if defined(__AVX2__)
  if (w.grouped && w.bits == 4 && w.block % 32 == 0 && n0 % 8 == 0 && (n1 - n0) % 8 == 0 && k0 % 32 == 0 && (k1 - k0) % 32 == 0) {
    for (int64_t n = n0; n < n1; n += 8)
      for (int64_t k = k0; k < k1; k += 32)
        dequantize_group_half_chunk(w, n / kNBitsGroupRows, static_cast<int>(n % kNBitsGroupRows / 8), k / 32,
                                    out + (k - k0) * ld + (n - n0), ld);
    return;
  }
  if (w.grouped && w.bits == 8 && n0 % 8 == 0 && (n1 - n0) % 8 == 0 && k0 % 32 == 0 && (k1 - k0) % 32 == 0) {
    for (int64_t n = n0; n < n1; n += 8)
      for (int64_t k = k0; k < k1; k += 32)
        dequantize_group8_half_chunk(w, n / kNBitsGroupRows, static_cast<int>(n % kNBitsGroupRows / 8), k / 32,
                                     out + (k - k0) * ld + (n - n0), ld);
    return;
  }
#endif
#if defined(__AVX2__) && defined(__FMA__)
  if (!w.grouped && w.bits == 4 && w.block % 32 == 0 && (n1 - n0) % 8 == 0 && k0 % 32 == 0 && (k1 - k0) % 32 == 0) {
    for (int64_t n = n0; n < n1; n += 8)
      for (int64_t k = k0; k < k1; k += 32) dequantize_rows8_chunk4(w, n, k, k_blocks, out + (k - k0) * ld + (n - n0), ld);
    return;
  }
#endif
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t kb = k0 / w.block; kb * w.block < k1; ++kb) {
      const float scale = nbits_scale(w, n, kb);
      const float zp = nbits_zero_point(w, n, kb, k_blocks);
      const int64_t begin = std::max(k0, kb * w.block), end = std::min({k1, (kb + 1) * w.block, w.K});
      for (int64_t k = begin; k < end; ++k)
        out[(k - k0) * ld + (n - n0)] = (static_cast<float>(nbits_code(w, n, k, k_blocks)) - zp) * scale;
    }
}
}  // namespace

}  // namespace tern::kernels
