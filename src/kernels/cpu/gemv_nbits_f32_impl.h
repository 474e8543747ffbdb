// gemv_nbits_f32.h's kernel, written once over a register set `V` with V::kRows rows a register: Scalar
// here (one row, the portable path and the reference the vector tiers equal bit for bit), Ymm when the
// including file is built for AVX2 (x86/float_avx2, an x86-64-v3 baseline), Neon on AArch64 (gemv_nbits.cpp), Zmm
// in x86/gemv_nbits_f32_avx512.cpp. Internal linkage: each file's copy keeps its own flags.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/cpu/gemv_nbits_f32.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace tern::kernels {
namespace {

// 4-bit: run j of a grouped chunk holds 4 bytes a row, byte t carrying value 4j + t in its low nibble and 16 + 4j + t
// in its high one; V::code<S, Bits>(v) is the code at bit S of each row's int32 lane, as floats. 8-bit: run j (of
// eight) holds value 4j + t in byte t. 2-bit: run j (of two) holds value 16j + s at bits 2s, and each pair of codes
// is looked up in its table of sums (FloatRow::pairs): V::pair_sum<S>(v, table) is table[the 4 bits at S of each
// lane]. Several accumulators a row (kChains), so that the FMA (or add) chains overlap.
template <class V, int M, int Bits>
void grouped_f32_rows(const FloatRow* x, const NBitsWeights& w, int64_t g0, int64_t g1, float* y, int64_t ldy) {
  constexpr int H = static_cast<int>(kNBitsGroupRows / V::kRows);
  // A step: one block's chunks, or — blocks of 16 — one chunk of two blocks, each summed on half the chains (4-bit:
  // a chunk's low nibbles are the first block; 2- and 8-bit: its first half of runs).
  const bool halves = w.block == 16;
  const int64_t k_blocks = nbits_k_blocks(w), per_step = halves ? 1 : w.block / 32, chunks = k_blocks * w.block / 32;
  constexpr int64_t kChunkBytes = nbits_chunk_bytes(Bits);
  // Chains a row: four for 4-bit codes (eight FMAs a run) and 8-bit ones (four), eight for 2-bit ones (eight pairs'
  // adds a run); the first half of them takes the chunk's values 0-15, the second 16-31.
  constexpr int kChains = Bits == 2 ? 8 : 4;
  constexpr float kDefaultZp = static_cast<float>(1 << (Bits - 1));
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* p = w.data + g * chunks * kChunkBytes;
    typename V::F total[M][H];
    for (int m = 0; m < M; ++m)
      for (int h = 0; h < H; ++h) total[m][h] = V::zero();
    for (int64_t step = 0; step < chunks / per_step; ++step) {
      typename V::F acc[M][H][kChains];
      for (int m = 0; m < M; ++m)
        for (int h = 0; h < H; ++h)
          for (int a = 0; a < kChains; ++a) acc[m][h][a] = V::zero();
      for (int64_t c = step * per_step; c < (step + 1) * per_step; ++c, p += kChunkBytes) {
        // Run j of the chunk: for 2- and 8-bit codes a constant (their chain indices follow from it, and must be
        // constants to stay in registers); 4-bit ones need j only modulo 2, and a loop over it keeps the code small
        // (unrolled like the others, the minimal build's static binary grew 16 KB).
        const auto run = [&](auto run_index) {
          const int j = run_index;
          V::prefetch(p + 64 * j);
          typename V::I v[H];
          for (int h = 0; h < H; ++h) v[h] = V::load(p + 64 * j + h * 4 * V::kRows);
          if constexpr (Bits == 4) {
            const auto take = [&](auto lo_shift) {
              constexpr int S = decltype(lo_shift)::value, t = S / 8;
              for (int h = 0; h < H; ++h) {
                const typename V::F lo = V::template code<S, 4>(v[h]), hi = V::template code<S + 4, 4>(v[h]);
                for (int m = 0; m < M; ++m) {
                  const float* xc = x[m].x + 32 * c + 4 * j + t;
                  acc[m][h][j & 1] = V::fma_by(lo, xc[0], acc[m][h][j & 1]);
                  acc[m][h][2 + (j & 1)] = V::fma_by(hi, xc[16], acc[m][h][2 + (j & 1)]);
                }
              }
            };
            take(std::integral_constant<int, 0>{});
            take(std::integral_constant<int, 8>{});
            take(std::integral_constant<int, 16>{});
            take(std::integral_constant<int, 24>{});
          } else if constexpr (Bits == 8) {  // byte t of each lane: value 4j + t
            constexpr int j = decltype(run_index)::value;
            const auto take = [&](auto byte) {
              constexpr int t = decltype(byte)::value, a = 2 * (j / 4) + t % 2;
              for (int h = 0; h < H; ++h) {
                const typename V::F q = V::template code<8 * t, 8>(v[h]);
                for (int m = 0; m < M; ++m) acc[m][h][a] = V::fma_by(q, x[m].x[32 * c + 4 * j + t], acc[m][h][a]);
              }
            };
            take(std::integral_constant<int, 0>{});
            take(std::integral_constant<int, 1>{});
            take(std::integral_constant<int, 2>{});
            take(std::integral_constant<int, 3>{});
          } else {
            // The pair at bits 4s of each lane (values 16j + 2s and 16j + 2s + 1) is an index into its 16 sums.
            constexpr int j = decltype(run_index)::value;
            const auto take = [&](auto index) {
              constexpr int s = decltype(index)::value, a = 4 * j + s % 4;
              for (int h = 0; h < H; ++h)
                for (int m = 0; m < M; ++m)
                  acc[m][h][a] = V::add(acc[m][h][a], V::template pair_sum<4 * s>(v[h], x[m].pairs + 16 * (16 * c + 8 * j + s)));
            };
            [&]<int... S>(std::integer_sequence<int, S...>) { (take(std::integral_constant<int, S>{}), ...); }
            (std::make_integer_sequence<int, 8>{});
          }
        };
        if constexpr (Bits == 4) {
          for (int j = 0; j < 4; ++j) run(j);
        } else {
          [&]<int... J>(std::integer_sequence<int, J...>) { (run(std::integral_constant<int, J>{}), ...); }
          (std::make_integer_sequence<int, Bits>{});
        }
      }
      // y += scale · (Σ q·x − zp · Σ x) for block kb, per row of x, the codes' sums from sum(m).
      const auto block_done = [&](int64_t kb, int h, const auto& sum) {
        const int64_t i = (g * k_blocks + kb) * kNBitsGroupRows + h * V::kRows;
        const typename V::F ws = w.scales_f16 ? V::load_f16(w.scales_f16 + i) : V::load_f(w.scales + i);
        const typename V::F zp = w.zp_float ? V::load_f(w.zp_float + i) : w.zp_packed ? V::load_u8(w.zp_packed + i) : V::set1(kDefaultZp);
        for (int m = 0; m < M; ++m) total[m][h] = V::fma(ws, V::fnma_by(zp, x[m].sum[kb], sum(m)), total[m][h]);
      };
      for (int h = 0; h < H; ++h) {
        // Chains [a, a + n) summed pairwise.
        const auto chains = [&](int a, int n) {
          return [&, a, n](int m) {
            typename V::F s = V::add(acc[m][h][a], acc[m][h][a + 1]);
            if (n == 4) s = V::add(s, V::add(acc[m][h][a + 2], acc[m][h][a + 3]));
            return s;
          };
        };
        if (halves) {
          block_done(2 * step, h, chains(0, kChains / 2));
          block_done(2 * step + 1, h, chains(kChains / 2, kChains / 2));
          continue;
        }
        block_done(step, h, [&](int m) {
          typename V::F s = chains(0, 4)(m);
          if constexpr (kChains == 8) s = V::add(s, chains(4, 4)(m));
          return s;
        });
      }
    }
    const int64_t n0 = g * kNBitsGroupRows;
    for (int m = 0; m < M; ++m) {
      float rows[kNBitsGroupRows];
      for (int h = 0; h < H; ++h) V::store(rows + h * V::kRows, total[m][h]);
      std::memcpy(y + m * ldy + n0, rows, static_cast<size_t>(std::min(kNBitsGroupRows, w.N - n0)) * sizeof(float));
    }
  }
}

// One row a "register": the portable path, with the vector tiers' operations one lane at a time (explicit
// fma, so that no compiler contracts or splits them differently).
struct ScalarLanes {
  using I = uint32_t;
  using F = float;
  static constexpr int64_t kRows = 1;
  static void prefetch(const uint8_t*) {}
  static I load(const uint8_t* p) {
    I v;
    std::memcpy(&v, p, 4);
    return v;
  }
  template <int S, int Bits>
  static F code(I v) {
    return static_cast<float>((v >> S) & ((1u << Bits) - 1));
  }
  template <int S>
  static F pair_sum(I v, const float* table) {
    return table[(v >> S) & 15];
  }
  static F zero() { return 0.0f; }
  static F set1(float v) { return v; }
  static F load_f(const float* p) { return *p; }
  static F load_f16(const f16* p) { return static_cast<float>(*p); }
  static F load_u8(const uint8_t* p) { return static_cast<float>(*p); }
  static F add(F a, F b) { return a + b; }
  static F mul(F a, F b) { return a * b; }
  static F fma(F a, F b, F c) { return std::fma(a, b, c); }
  static F fma_by(F a, float b, F c) { return std::fma(a, b, c); }
  static F fnma_by(F a, float b, F c) { return std::fma(-a, b, c); }
  static void store(float* p, F v) { *p = v; }
};

// Bytes this far ahead of the chunk in use are requested into L2 (as the int8 kernel does: its groups).
constexpr int64_t kF32GroupPrefetchBytes = 3072;

#if defined(__AVX2__) && defined(__FMA__)

// 8 rows a register: each code masked and shifted into its lane, then converted.
struct YmmLanes {
  using I = __m256i;
  using F = __m256;
  static constexpr int64_t kRows = 8;
  static void prefetch(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p + kF32GroupPrefetchBytes), _MM_HINT_T1); }
  static I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  template <int S, int Bits>
  static F code(I v) {
    if constexpr (S == 32 - Bits) return _mm256_cvtepi32_ps(_mm256_srli_epi32(v, S));
    const __m256i shifted = S == 0 ? v : _mm256_srli_epi32(v, S);
    return _mm256_cvtepi32_ps(_mm256_and_si256(shifted, _mm256_set1_epi32((1 << Bits) - 1)));
  }
  // vpermps indexes 8 entries: the table's halves each, the index's bit 3 (moved to the sign) choosing between them.
  template <int S>
  static F pair_sum(I v, const float* table) {
    const __m256i index = S == 0 ? v : _mm256_srli_epi32(v, S);
    const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table), index);
    const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table + 8), index);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(index, 28)));
  }
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load_f(const float* p) { return _mm256_loadu_ps(p); }
  static F load_f16(const f16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F load_u8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fma_by(F a, float b, F c) { return _mm256_fmadd_ps(a, _mm256_set1_ps(b), c); }
  static F fnma_by(F a, float b, F c) { return _mm256_fnmadd_ps(a, _mm256_set1_ps(b), c); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
};
#elif defined(__aarch64__)
// 4 rows a register (AArch64's every tier: NEON is its baseline), a group 4 registers; a code masked, shifted and
// converted, as AVX2 does; a 2-bit pair's table read by one byte lookup (tbl) over the table's four registers.
struct NeonLanes {
  using I = uint32x4_t;
  using F = float32x4_t;
  static constexpr int64_t kRows = 4;
  static void prefetch(const uint8_t* p) { __builtin_prefetch(p + kF32GroupPrefetchBytes); }
  static I load(const uint8_t* p) { return vreinterpretq_u32_u8(vld1q_u8(p)); }
  template <int S>
  static I shifted(I v) {
    if constexpr (S == 0) return v;
    else return vshrq_n_u32(v, S);
  }
  template <int S, int Bits>
  static F code(I v) {
    if constexpr (S == 32 - Bits) return vcvtq_f32_u32(shifted<S>(v));
    else return vcvtq_f32_u32(vandq_u32(shifted<S>(v), vdupq_n_u32((1u << Bits) - 1)));
  }
  template <int S>
  static F pair_sum(I v, const float* table) {
    // Byte b of a lane whose index is i reads the table's byte 4i + b.
    const I index = vandq_u32(shifted<S>(v), vdupq_n_u32(15));
    const uint8x16_t bytes = vreinterpretq_u8_u32(vmlaq_n_u32(vdupq_n_u32(0x03020100u), index, 0x04040404u));
    return vreinterpretq_f32_u8(vqtbl4q_u8(vld1q_u8_x4(reinterpret_cast<const uint8_t*>(table)), bytes));
  }
  static F zero() { return vdupq_n_f32(0.0f); }
  static F set1(float v) { return vdupq_n_f32(v); }
  static F load_f(const float* p) { return vld1q_f32(p); }
  static F load_f16(const f16* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)))); }
  static F load_u8(const uint8_t* p) {
    uint32_t four;
    std::memcpy(&four, p, 4);  // (exactly the 4 rows' bytes: the last group's may end the buffer)
    return vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(four))))));
  }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static F fma_by(F a, float b, F c) { return vfmaq_n_f32(c, a, b); }
  static F fnma_by(F a, float b, F c) { return vfmsq_n_f32(c, a, b); }
  static void store(float* p, F v) { vst1q_f32(p, v); }
};
#endif

// FloatRow::pairs for the values x[0..n): per pair p, sums[16p + i] = fma(i >> 2, x[2p + 1], (i & 3) · x[2p]), V::kRows
// at a time. (Written so: GCC -O3 vectorized the plain loop across pairs: 34-37 us for K = 14336, where this takes 8-9.)
template <class V>
void pair_sums(const float* x, int64_t n, float* sums) {
  alignas(64) static constexpr float kLow[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
  alignas(64) static constexpr float kHigh[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
  for (int64_t p = 0; p < n / 2; ++p)
    for (int64_t i = 0; i < 16; i += V::kRows)
      V::store(sums + 16 * p + i, V::fma(V::load_f(kHigh + i), V::set1(x[2 * p + 1]), V::mul(V::load_f(kLow + i), V::set1(x[2 * p]))));
}

// The rows [g0, g1) groups for M ≤ kFloatRowsAPass activation rows, MR of them a pass over the weights.
template <class V, int MR, int Bits>
void grouped_f32_bits(const FloatRow* x, int64_t M, const NBitsWeights& w, int64_t g0, int64_t g1, float* y, int64_t ldy) {
  static_assert(kFloatRowsAPass == 4 && (MR == 1 || MR == 4), "instantiated for 1 row a pass, or up to 4");
  if constexpr (MR == 1) {
    for (int64_t m = 0; m < M; ++m) grouped_f32_rows<V, 1, Bits>(x + m, w, g0, g1, y + m * ldy, ldy);
  } else {
    switch (M) {
      case 1: return grouped_f32_rows<V, 1, Bits>(x, w, g0, g1, y, ldy);
      case 2: return grouped_f32_rows<V, 2, Bits>(x, w, g0, g1, y, ldy);
      case 3: return grouped_f32_rows<V, 3, Bits>(x, w, g0, g1, y, ldy);
      default: return grouped_f32_rows<V, 4, Bits>(x, w, g0, g1, y, ldy);
    }
  }
}
template <class V, int MR>
void grouped_f32(const FloatRow* x, int64_t M, const NBitsWeights& w, int64_t g0, int64_t g1, float* y, int64_t ldy) {
#ifndef TERN_MINIMAL  // (a minimal build reads 2- and 8-bit weights as stored: nbits_groups_native)
  if (w.bits == 2) return grouped_f32_bits<V, MR, 2>(x, M, w, g0, g1, y, ldy);
  if (w.bits == 8) return grouped_f32_bits<V, MR, 8>(x, M, w, g0, g1, y, ldy);
#endif
  grouped_f32_bits<V, MR, 4>(x, M, w, g0, g1, y, ldy);
}

}  // namespace
}  // namespace tern::kernels
