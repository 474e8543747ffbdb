// The int8-activation decode kernel, written once over the ISA's u8·s8 dot product (`Dot`) and included
// only by the x86/gemv_nbits_i8_<tier>.cpp files. Everything here has internal linkage: each file's copy
// is compiled with its own tier's flags and must not be merged with another's by the linker.
//
// Layout (ONNX Runtime's MatMulNBits, as stored): a 4-bit 32-value chunk is 16 bytes, byte j holding
// values 2j (low nibble) and 2j + 1 (high nibble); a row's chunks follow one another. The activations come
// reordered per two chunks (Int8Row). 8-bit chunks are 32 bytes in order, and the activations too.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/gemv_nbits_i8.h"

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
// default and float zero points run 8 blocks per step; packed ones are read one by one. Every tier computes
// it with the same operations — the scalar steps as explicit fma, not left to each file's contraction — so
// that the tiers agree bit for bit (tests/test_kernels.cpp).
float zero_point_share(const Int8Row& x, const NBitsWeights& w, int64_t n, int64_t k_blocks) {
  const float* ws = w.scales + n * k_blocks;
  const float* zf = w.zp_float ? w.zp_float + n * k_blocks : nullptr;
  // Packed zero points (row n's k_blocks values of w.bits, 4 or 8): 8 blocks' from 4 or 8 bytes. Vectorized,
  // the 1B shape's int4 decode (tern quantize: asymmetric blocks of 32) ran 1.2x faster than one by one.
  const uint8_t* zp8 = w.zp_packed ? w.zp_packed + n * ((k_blocks * w.bits + 7) / 8) : nullptr;
  const float fixed = static_cast<float>(int64_t{1} << (w.bits - 1));  // the default zero point
  auto zero_points = [&](int64_t kb) {  // blocks kb … kb + 7
    if (zf) return _mm256_loadu_ps(zf + kb);
    if (!zp8) return _mm256_set1_ps(fixed);
    if (w.bits == 8) return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zp8 + kb))));
    int32_t four;  // 4-bit: eight nibbles, block kb in the low one
    std::memcpy(&four, zp8 + kb / 2, 4);
    const __m256i v = _mm256_srlv_epi32(_mm256_set1_epi32(four), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0xF)));
  };
  __m256 acc = _mm256_setzero_ps();
  int64_t kb = 0;
  for (; kb + 8 <= k_blocks; kb += 8)  // (gemv_nbits_i8 takes 4- and 8-bit weights)
    acc = _mm256_fmadd_ps(_mm256_mul_ps(zero_points(kb), _mm256_loadu_ps(ws + kb)), _mm256_loadu_ps(x.sum + kb), acc);
  float share = hsum(acc);
  for (; kb < k_blocks; ++kb) share = std::fma(nbits_zero_point(w, n, kb, k_blocks) * ws[kb], x.sum[kb], share);
  return share;
}

// The bytes 8 weight rows ahead (two row groups) are requested while these are multiplied: the hardware
// prefetcher alone left the 49152×576 Q8_0 lm_head of SmolLM2 at 11.8 GB/s with 2 threads (Zen 3, 28.3 GB/s
// measured); with this, 22–30 GB/s (4 rows ahead: 23.5; 16: 22.6–25.2 — noisy VM, 8 chosen).
// Reading past the last row is harmless: a prefetch never faults.
constexpr int64_t kPrefetchRows = 8;

// 8-bit weights: R output rows share each activation load. Dot::w8(acc, w, s) adds Σ (w − kW8Offset)·s over
// each group of four bytes to acc's int32 lanes, so each lane's sum starts at kW8Offset · (its Σs, Int8Row's
// lane_sum): every lane then holds Σ w·s exactly — the same integers, then the same float steps, on every
// tier. (Adding kW8Offset·Σxq back per block in float instead left the AVX2 tier's last bits apart from
// VNNI's. Summing lane_sum here, per row group, cost the AVX2 tier 7% on a 1×2048×8192 int8 product; read
// precomputed, 0.6% in medians, Zen 4-class AVX-512 machine, TERN_ISA=avx2, 2 threads.)
template <class Dot, int R>
void rows8(const Int8Row& x, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t blob = w.block, chunks = w.block / 32;
  __m256 acc[R];
  const uint8_t* q[R];
  const float* ws[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    q[r] = w.data + (n0 + r) * k_blocks * blob;
    ws[r] = w.scales + (n0 + r) * k_blocks;
  }
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    const __m256i from = Dot::kW8Offset == 0 ? _mm256_setzero_si256()
                         : _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.lane_sum + 8 * kb)),
                                              _mm256_set1_epi32(Dot::kW8Offset));
    __m256i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = from;
    const int8_t* xq = x.q + kb * w.block;
    for (int64_t c = 0; c < chunks; ++c) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * c));
      for (int r = 0; r < R; ++r) {
        const uint8_t* p = q[r] + kb * blob;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchRows * k_blocks * blob + 32 * c), _MM_HINT_T0);
        dot[r] = Dot::w8(dot[r], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * c)), xv);
      }
    }
    const float xs = x.scale[kb];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), _mm256_set1_ps(ws[r][kb] * xs), acc[r]);
  }
  for (int r = 0; r < R; ++r) y[n0 + r] = hsum(acc[r]) - zero_point_share(x, w, n0 + r, k_blocks);
}

// For a tier with 512-bit registers (Dot::kZmm): rows4's four-chunk steps of blocks of 32 from chunk 0, as
// many as fit, chunks c, c + 1 into acc and c + 2, c + 3 into acc_b (both zero before); returns the first
// chunk not taken.
// Defined in that tier's file (it needs the tier's flags).
template <class Dot, int R>
int64_t quad_steps(const Int8Row& x, const NBitsWeights& w, const uint8_t* const* q, const float* const* ws, int64_t row_bytes,
                   int64_t chunks, bool folded, __m256* acc, __m256* acc_b);

// 4-bit weights, 64 values (32 bytes: two 32-value chunks A, B) a step: the low nibbles of both chunks line
// up with the activations' [A evens | B evens], the high ones with [A odds | B odds] (see Int8Row), so one
// 256-bit load feeds two dot products and no shuffle. Lanes 0–3 of the int32 sums are chunk A's, 4–7
// chunk B's. Without zero points the default one (8) is folded into the integers: each step's sums start
// at −8·Σxq of its chunks, exact, and no pass over the blocks is left for afterwards. Per row-block this
// is half the instructions of one-chunk steps: 1B-shape Q4_0 decode 1.095x (16 pairs, Zen 3, 2 threads).
// Blocks of 32 take a scale per chunk; blocks of 64·j one per block, summing j steps in int32 first.
template <class Dot, int R>
void rows4(const Int8Row& x, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t row_bytes = k_blocks * w.block / 2, chunks = k_blocks * w.block / 32;
  const bool folded = !w.zp_packed && !w.zp_float;
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256 acc[R];
  const uint8_t* q[R];
  const float* ws[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    q[r] = w.data + (n0 + r) * row_bytes;
    ws[r] = w.scales + (n0 + r) * k_blocks;
  }
  // The int32 start of the step over chunks c, c + 1 (B absent at an odd end): −8·Σxq each, or 0.
  auto start = [&](int64_t c, bool b) {
    if (!folded) return _mm256_setzero_si256();
    return _mm256_setr_epi32(-8 * x.chunk_sum[c], 0, 0, 0, b ? -8 * x.chunk_sum[c + 1] : 0, 0, 0, 0);
  };
  // Adds the products of 64 weights v (nibbles) with the step's activations to dot.
  auto products = [&](__m256i dot, __m256i v, __m256i x_lo, __m256i x_hi) {
    return Dot::u8s8_2(dot, _mm256_and_si256(v, nibble), x_lo, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble), x_hi);
  };
  auto load32 = [&](const uint8_t* p) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchRows * row_bytes), _MM_HINT_T0);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  };
  auto x_at = [&](int64_t c, int half) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + 32 * c + 32 * half)); };
  if (w.block == 32) {
    // One scale per chunk: lanes 0–3 take block c's, 4–7 block c + 1's (an odd end's B lanes are 0, its
    // scale is A's again so nothing past the row is read). Four chunks a step, chunks c, c + 1 into acc
    // and c + 2, c + 3 into acc_b, summed at the end: a tier with 512-bit registers (Dot::kZmm) does both
    // in one register, lane for lane the same float operations, so every tier gets the same bits.
    auto pair_scale = [](const float* s, int64_t c, int64_t cb) { return _mm256_setr_m128(_mm_set1_ps(s[c]), _mm_set1_ps(s[cb])); };
    auto pair_step = [&](int64_t c, __m256* into) {  // chunks c, c + 1 of every row
      const __m256i x_lo = x_at(c, 0), x_hi = x_at(c, 1), from = start(c, true);
      const __m256 xs = pair_scale(x.scale, c, c + 1);
      for (int r = 0; r < R; ++r) {
        const __m256i dot = products(from, load32(q[r] + 16 * c), x_lo, x_hi);
        into[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(pair_scale(ws[r], c, c + 1), xs), into[r]);
      }
    };
    __m256 acc_b[R];
    for (int r = 0; r < R; ++r) acc_b[r] = _mm256_setzero_ps();
    int64_t c = 0;
    if constexpr (Dot::kZmm) {
      c = quad_steps<Dot, R>(x, w, q, ws, row_bytes, chunks, folded, acc, acc_b);
    } else {
      for (; c + 4 <= chunks; c += 4) {
        pair_step(c, acc);
        pair_step(c + 2, acc_b);
      }
    }
    for (; c + 2 <= chunks; c += 2) pair_step(c, acc);
    if (c < chunks) {
      const __m256i x_lo = x_at(c, 0), x_hi = x_at(c, 1), from = start(c, false);
      const __m256 xs = pair_scale(x.scale, c, c);
      for (int r = 0; r < R; ++r) {
        const __m256i v = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q[r] + 16 * c)));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(products(from, v, x_lo, x_hi)), _mm256_mul_ps(pair_scale(ws[r], c, c), xs), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) acc[r] = _mm256_add_ps(acc[r], acc_b[r]);
  } else {  // block % 64 == 0
    const int64_t steps = w.block / 64;
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      __m256i dot[R];
      for (int r = 0; r < R; ++r) dot[r] = _mm256_setzero_si256();
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t c = kb * w.block / 32 + 2 * t;
        const __m256i x_lo = x_at(c, 0), x_hi = x_at(c, 1), from = start(c, true);
        for (int r = 0; r < R; ++r) dot[r] = products(_mm256_add_epi32(dot[r], from), load32(q[r] + 16 * c), x_lo, x_hi);
      }
      const __m256 xs = _mm256_set1_ps(x.scale[kb]);
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), _mm256_mul_ps(_mm256_set1_ps(ws[r][kb]), xs), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[n0 + r] = hsum(acc[r]) - (folded ? 0.0f : zero_point_share(x, w, n0 + r, k_blocks));
}

template <class Dot>
void gemv_rows(const Int8Row& x, const NBitsWeights& w, int64_t n0, int64_t n1, float* y) {
  const int64_t k_blocks = (w.K + w.block - 1) / w.block;
  int64_t n = n0;
  if (w.bits == 4) {
    for (; n + 4 <= n1; n += 4) rows4<Dot, 4>(x, w, k_blocks, n, y);
    for (; n < n1; ++n) rows4<Dot, 1>(x, w, k_blocks, n, y);
  } else {
    for (; n + 4 <= n1; n += 4) rows8<Dot, 4>(x, w, k_blocks, n, y);
    for (; n < n1; ++n) rows8<Dot, 1>(x, w, k_blocks, n, y);
  }
}

}  // namespace
}  // namespace tern::kernels
