// The int8-activation decode kernel, written once over the ISA's u8·s8 dot product (`Dot`) and included
// only by the x86/gemv_nbits_i8_<tier>.cpp files. Everything here has internal linkage: each file's copy
// is compiled with its own tier's flags and must not be merged with another's by the linker.
//
// Layouts: 8-bit weights as ONNX Runtime's MatMulNBits stores them (32-byte chunks in order, a row's
// chunks one after another); 4-bit weights grouped 16 rows at a time (nbits.h). Activations in order.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/gemv_nbits_i8.h"
#include "kernels/cpu/x86/hsum.h"

namespace tern::kernels {
namespace {

// Σ_kb zp[n,kb] · ws[n,kb] · xs·Σxq[kb], the zero points' share of 8-bit row n, once per row after the dot
// products (inside the block loop its scalar arithmetic cost as much as the integer products). The
// default and float zero points run 8 blocks per step; packed ones are read one by one. Every tier computes
// it with the same operations — the scalar steps as explicit fma, not left to each file's contraction — so
// that the tiers agree bit for bit (tests/test_kernels.cpp).
float zero_point_share(const Int8Row& x, const NBitsWeights& w, int64_t n, int64_t k_blocks) {
  const float* ws = w.scales + n * k_blocks;
  const float* zf = w.zp_float ? w.zp_float + n * k_blocks : nullptr;
  // Packed zero points (row n's k_blocks bytes: 8-bit weights, the only ones read as stored here): 8 blocks'
  // a step, vectorized.
  const uint8_t* zp8 = w.zp_packed ? w.zp_packed + n * k_blocks : nullptr;
  auto zero_points = [&](int64_t kb) {  // blocks kb … kb + 7
    if (zf) return _mm256_loadu_ps(zf + kb);
    if (!zp8) return _mm256_set1_ps(128.0f);  // the default zero point
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zp8 + kb))));
  };
  __m256 acc = _mm256_setzero_ps();
  int64_t kb = 0;
  for (; kb + 8 <= k_blocks; kb += 8)
    acc = _mm256_fmadd_ps(_mm256_mul_ps(zero_points(kb), _mm256_loadu_ps(ws + kb)), _mm256_loadu_ps(x.sum + kb), acc);
  float share = hsum(acc);
  for (; kb < k_blocks; ++kb) share = std::fma(nbits_zero_point(w, n, kb, k_blocks) * ws[kb], x.sum[kb], share);
  return share;
}

// 8-bit weights: R output rows share each activation load. Dot::w8(acc, w, s) adds Σ (w − kW8Offset)·s over
// each group of four bytes to acc's int32 lanes, so each lane's sum starts at kW8Offset · (its Σs, Int8Row's
// lane_sum): every lane then holds Σ w·s exactly — the same integers, then the same float steps, on every
// tier. (Adding kW8Offset·Σxq back per block in float instead left the AVX2 tier's last bits apart from
// VNNI's. Summing lane_sum here, per row group, cost the AVX2 tier 7% on a 1×2048×8192 int8 product; read
// precomputed, 0.6% in medians, Zen 4-class AVX-512 machine, TERN_ISA=avx2, 2 threads.)
//
// Blocks of 16 (ggml's Q6_K and Q3_K sub-blocks, imported as 8-bit) go two to a 32-byte chunk: the dot product's
// lanes 0-3 are the first block's, 4-7 the second's, so each half of the float step takes its own block's
// scale. Gemma-3-270M Q4_K_M's nine Q6_K down projections: 8.05 → 3.69 ms over 31 decode steps (float path →
// this), tern profile, Xeon (tier amx), 2 threads. Blocks of 32 and more keep one broadcast scale.
template <class Dot, int R>
void rows8(const Int8Row& x, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t blob = w.block, pair = w.block == 16 ? 2 : 1, chunks = pair * w.block / 32;
  __m256 acc[R];
  const uint8_t* q[R];
  const float* ws[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    q[r] = w.data + (n0 + r) * k_blocks * blob;
    ws[r] = w.scales + (n0 + r) * k_blocks;
  }
  for (int64_t kb = 0; kb < k_blocks; kb += pair) {
    const __m256i from = Dot::kW8Offset == 0
                             ? _mm256_setzero_si256()
                             : _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.lane_sum + 8 * (kb / pair))),
                                                  _mm256_set1_epi32(Dot::kW8Offset));
    __m256i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = from;
    const int8_t* xq = x.q + kb * w.block;
    for (int64_t c = 0; c < chunks; ++c) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * c));
      for (int r = 0; r < R; ++r) {
        const uint8_t* p = q[r] + kb * blob;
        _mm_prefetch(reinterpret_cast<const char*>(p + kNBitsPrefetchRows * k_blocks * blob + 32 * c), _MM_HINT_T0);
        dot[r] = Dot::w8(dot[r], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * c)), xv);
      }
    }
    const float xs = x.scale[kb], xs_next = x.scale[kb + pair - 1];
    for (int r = 0; r < R; ++r) {
      const __m256 scale =
          pair == 1 ? _mm256_set1_ps(ws[r][kb] * xs) : _mm256_setr_m128(_mm_set1_ps(ws[r][kb] * xs), _mm_set1_ps(ws[r][kb + 1] * xs_next));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), scale, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[n0 + r] = hsum(acc[r]) - zero_point_share(x, w, n0 + r, k_blocks);
}

// Grouped weights (nbits.h), 4 or 8 bits: 16 rows a step, one int32 lane per row, so each block's integer sum is
// the row's and goes into the row's float lane with no reduction; the M ≤ 4 activation rows of a decode
// batch share each load of the weights. Per block of each row, the same operations on every tier and for
// every M:
//   d   = Σ q·xq − zp·Σxq (exact in int32; without zero points zp is the default 2^(bits−1))
//   acc = fma(float(d), ws·xs, acc), and with float zero points acc = fnmadd(zp·ws, xs·Σxq, acc)
// so every tier gives the same bits (and an output's value does not depend on its row's neighbours).
// 8-bit weights are grouped for this kernel too (nbits_groups_native): as stored, each row of a block took its own
// float step and each activation row streamed the matrix again — SmolLM2's 49152×576 Q8_0 lm_head, `tern bench-op
// matmulnbits --shape M,576,49152 --bits 8 --activations int8 --threads 2`, Zen 5 (tier avx512bf16): M = 1 / 4 (a
// speculative check's rows) 0.51 / 1.93 ms as stored, 0.38 / 0.46 ms grouped.
// `V` is the tier's register set: V::kRows rows per register (8 or 16), 16 / V::kRows registers a group.
// A group's bytes are one sequential stream, yet the hardware prefetchers alone leave it short of the memory's
// rate: each line 3 KB ahead is requested into L2 while this one is multiplied (the L2 streamer stops at every
// 4 KB page). Llama-3.2-1B-shaped Q4_0 import, `tern bench --prompt-tokens 16 --new-tokens 64 --threads 2`,
// Xeon (tier amx), alternated: 36.5–37.0 → 40.9–42.6 tok/s (2 KB ahead 40.4–42.4, 4 KB 40.5–41.3, 6 KB
// 39.0–40.0; into L1 instead: 2 KB 40.3–40.6, 4 KB 37.1–38.0); TERN_ISA=avx2: 31.0–33.2 → 41.7–42.8.
constexpr int64_t kGroupPrefetchBytes = 3072;

template <class V, int M, int Bits>
void groups(const Int8Row* x, const NBitsWeights& w, int64_t g0, int64_t g1, float* y, int64_t ldy) {
  constexpr int H = static_cast<int>(kNBitsGroupRows / V::kRows);
  // V::w8 adds Σ (q − kW8Offset)·x (AVX2's signed reading of 8-bit weights), so d starts kW8Offset·Σxq higher.
  constexpr int32_t offset = Bits == 8 ? V::kW8Offset : 0, default_zp = 1 << (Bits - 1);
  // A block's bytes: a run of 64 bytes holds 4 bytes of each of the 16 rows (4-bit: 8 values, 8-bit: 4), and a
  // block of 8-bit weights may be half a chunk (16: GGUF's Q6_K), its runs the chunk's first or last four.
  const int64_t k_blocks = nbits_k_blocks(w), runs = w.block * Bits / 32, block_bytes = 64 * runs;
  for (int64_t g = g0; g < g1; ++g) {
    typename V::F acc[M][H];
    for (int m = 0; m < M; ++m)
      for (int h = 0; h < H; ++h) acc[m][h] = V::zero_f();
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const int64_t at = (g * k_blocks + kb) * kNBitsGroupRows;
      const uint8_t* p = w.data + (g * k_blocks + kb) * block_bytes;  // (then a step at a time)
      // With vpdpbusd (5 cycles of latency) two accumulators a row, for even and odd 64-byte steps: one chain
      // held a 16-row group to ~6 bytes a cycle (1B int4 decode 39.2-39.4 tok/s, 40.5-40.8 with two; four: no
      // more). AVX2's maddubs path ends each step in a 1-cycle add and gains nothing (36.5-36.8 vs 36.8-37.5).
      typename V::I d[M][H], e[M][H];
      for (int m = 0; m < M; ++m) {
        const int32_t xq_sum = x[m].block_sum[kb];
        for (int h = 0; h < H; ++h) e[m][h] = V::zero_i();
        for (int h = 0; h < H; ++h)
          d[m][h] = w.zp_float    ? V::set1_i(offset * xq_sum)
                    : w.zp_packed ? V::add_i(V::times(V::load_u8(w.zp_packed + at + h * V::kRows), -xq_sum), V::set1_i(offset * xq_sum))
                                  : V::set1_i((offset - default_zp) * xq_sum);
      }
      // Four runs a step (4-bit: a chunk of 32 values; 8-bit: 16 values), the step's four unrolled.
      for (int64_t quad = 0; quad < runs / 4; ++quad, p += 256)
        for (int j = 0; j < 4; ++j) {
          _mm_prefetch(reinterpret_cast<const char*>(p + kGroupPrefetchBytes + 64 * j), _MM_HINT_T1);
          if constexpr (Bits == 4) {  // values 32·quad + 4j + t in the low nibbles, 16 more in the high ones
            typename V::I lo_nibbles[H], hi_nibbles[H];
            for (int h = 0; h < H; ++h) V::nibbles(V::load(p + 64 * j + h * 4 * V::kRows), lo_nibbles[h], hi_nibbles[h]);
            for (int m = 0; m < M; ++m) {
              const int8_t* at_x = x[m].q + kb * w.block + 32 * quad + 4 * j;
              int32_t lo, hi;  // the 4 activations the low nibbles meet, and the 4 the high ones meet
              std::memcpy(&lo, at_x, 4);
              std::memcpy(&hi, at_x + 16, 4);
              for (int h = 0; h < H; ++h) {
                typename V::I& sum = V::kTwoChains && (j & 1) ? e[m][h] : d[m][h];
                sum = V::dots(sum, lo_nibbles[h], lo, hi_nibbles[h], hi);
              }
            }
          } else {  // bytes: the values 16·quad + 4j + t
            typename V::I q[H];
            for (int h = 0; h < H; ++h) q[h] = V::load(p + 64 * j + h * 4 * V::kRows);
            for (int m = 0; m < M; ++m) {
              int32_t four;
              std::memcpy(&four, x[m].q + kb * w.block + 16 * quad + 4 * j, 4);
              for (int h = 0; h < H; ++h) {
                typename V::I& sum = V::kTwoChains && (j & 1) ? e[m][h] : d[m][h];
                sum = V::w8(sum, q[h], four);
              }
            }
          }
        }
      for (int m = 0; m < M; ++m)
        for (int h = 0; h < H && V::kTwoChains; ++h) d[m][h] = V::add_i(d[m][h], e[m][h]);
      for (int h = 0; h < H; ++h) {
        const typename V::F ws = w.scales_f16 ? V::load_h(w.scales_f16 + at + h * V::kRows) : V::load_f(w.scales + at + h * V::kRows);
        const typename V::F zw = w.zp_float ? V::mul(V::load_f(w.zp_float + at + h * V::kRows), ws) : V::zero_f();
        for (int m = 0; m < M; ++m) {
          acc[m][h] = V::fma(V::to_float(d[m][h]), V::mul(ws, V::set1_f(x[m].scale[kb])), acc[m][h]);
          if (w.zp_float) acc[m][h] = V::fnma(zw, V::set1_f(x[m].sum[kb]), acc[m][h]);
        }
      }
    }
    const int64_t n0 = g * kNBitsGroupRows;
    for (int m = 0; m < M; ++m) {
      alignas(64) float rows[kNBitsGroupRows];
      for (int h = 0; h < H; ++h) V::store_f(rows + h * V::kRows, acc[m][h]);
      std::memcpy(y + m * ldy + n0, rows, static_cast<size_t>(std::min(kNBitsGroupRows, w.N - n0)) * sizeof(float));
    }
  }
}

// The 256-bit register set over a tier's u8·s8 dot product (Dot::u8s8_2): 8 rows a register.
template <class Dot>
struct Ymm {
  using I = __m256i;
  using F = __m256;
  static constexpr int64_t kRows = 8;
  static constexpr bool kTwoChains = Dot::kTwoChains;
  static constexpr int32_t kW8Offset = Dot::kW8Offset;
  static I zero_i() { return _mm256_setzero_si256(); }
  static I set1_i(int32_t v) { return _mm256_set1_epi32(v); }
  static I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static I load_u8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static I times(I v, int32_t s) { return _mm256_mullo_epi32(v, _mm256_set1_epi32(s)); }
  static I add_i(I a, I b) { return _mm256_add_epi32(a, b); }
  // v's low and high nibbles as bytes.
  static void nibbles(I v, I& lo, I& hi) {
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    lo = _mm256_and_si256(v, nibble);
    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
  }
  // d + Σ lo_nibbles · lo's bytes + Σ hi_nibbles · hi's, per int32 lane.
  static I dots(I d, I lo_nibbles, int32_t lo, I hi_nibbles, int32_t hi) {
    return Dot::u8s8_2(d, lo_nibbles, _mm256_set1_epi32(lo), hi_nibbles, _mm256_set1_epi32(hi));
  }
  // d + Σ (q − kW8Offset) · four's bytes, per int32 lane (8-bit weights q).
  static I w8(I d, I q, int32_t four) { return Dot::w8(d, q, _mm256_set1_epi32(four)); }
  static F zero_f() { return _mm256_setzero_ps(); }
  static F set1_f(float v) { return _mm256_set1_ps(v); }
  static F load_f(const float* p) { return _mm256_loadu_ps(p); }
  static F load_h(const f16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F to_float(I v) { return _mm256_cvtepi32_ps(v); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static void store_f(float* p, F v) { _mm256_storeu_ps(p, v); }
};

// Rows [n0, n1) of 8-bit weights as stored, for each of the M activation rows; groups [n0, n1) of grouped
// ones, all M rows at once, with `V`'s registers. y is [M, ldy].
template <class Dot, class V = Ymm<Dot>>
void gemv_rows(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  static_assert(kInt8RowsAPass == 4, "groups is instantiated for 1 to 4 rows");
  if (w.grouped && w.bits == 4) {
    switch (M) {
      case 1: return groups<V, 1, 4>(x, w, n0, n1, y, ldy);
      case 2: return groups<V, 2, 4>(x, w, n0, n1, y, ldy);
      case 3: return groups<V, 3, 4>(x, w, n0, n1, y, ldy);
      default: return groups<V, 4, 4>(x, w, n0, n1, y, ldy);
    }
  }
#ifndef TERN_MINIMAL  // (a minimal build reads 8-bit weights as stored: nbits_groups_native)
  if (w.grouped) {
    switch (M) {
      case 1: return groups<V, 1, 8>(x, w, n0, n1, y, ldy);
      case 2: return groups<V, 2, 8>(x, w, n0, n1, y, ldy);
      case 3: return groups<V, 3, 8>(x, w, n0, n1, y, ldy);
      default: return groups<V, 4, 8>(x, w, n0, n1, y, ldy);
    }
  }
#endif
  const int64_t k_blocks = nbits_k_blocks(w);
  for (int64_t m = 0; m < M; ++m) {
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) rows8<Dot, 4>(x[m], w, k_blocks, n, y + m * ldy);
    for (; n < n1; ++n) rows8<Dot, 1>(x[m], w, k_blocks, n, y + m * ldy);
  }
}

}  // namespace
}  // namespace tern::kernels
