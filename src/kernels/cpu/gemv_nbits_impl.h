// gemv_nbits.h's kernels at the vector width of the file that includes this: gemv_nbits.cpp (the build's
// baseline) and, in an x86-64-v2 build, x86/float_avx2/gemv_nbits.cpp (tier avx2): the float path's rows and
// the int8 path's activation quantization (the int8 dot products are their tiers' own files). Everything here
// has internal linkage, so each file keeps its own copy built for its flags.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemv_nbits.h"
#include "kernels/cpu/gemv_nbits_f32_impl.h"
#include "kernels/cpu/gemv_nbits_i8.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/parallel.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "kernels/cpu/x86/hsum.h"
#endif

namespace tern::kernels {
namespace {

// Byte j of a block holds elements 2j (low nibble) and 2j + 1 (high nibble). The activations are
// reordered once per call so that, per group of 16 elements, the 8 even ones come first and the 8 odd
// ones next: then 8 bytes widened to 8 lanes give the low nibbles for the first half, the high nibbles
// for the second, with no shuffles in the inner loop. 2-bit weights: byte j holds elements 4j + t at bits 2t,
// and per group of 32 elements (8 bytes) element 4j + t goes to 8t + j — 8 bytes widened to 8 lanes, shifted by
// 2t, give the 8 codes that meet activations 8t .. 8t + 7. 8-bit weights are in order: 8 bytes widened to 8
// lanes meet 8 activations as they are.
constexpr int64_t kGroup = 16, kGroup2 = 32;

int64_t reordered(int64_t k, int64_t bits) {
  if (bits == 2) return k / kGroup2 * kGroup2 + (k % 4) * 8 + k % kGroup2 / 4;
  if (bits == 8) return k;
  return k / kGroup * kGroup + (k % 2) * 8 + k % kGroup / 2;
}

// Below 64k weights a product is done before a second thread would have started.
bool small(const NBitsWeights& w) { return w.N * w.K < (int64_t{1} << 16); }

// Row n's zero-point term Σ_kb zp(kb) · scale(kb) · Σ x over block kb, over the row's blocks at once — kept out of
// the blocks' loop, where a packed zero point cost a scalar unpack a block and row. With it, 8-bit bytes read in
// order and two FMA chains a row: a 4096 x 14336 decode row, 8-bit blocks of 32 9.38 → 6.87 ms, of 16 12.12 → 7.79,
// 4-bit blocks of 16 10.52 → 7.91 (`bench/nbits_decode.py`, old and new library alternated, 3 rounds, medians; Zen 3
// at 15.9 GB/s).
float zero_point_part(const NBitsWeights& w, int64_t n, int64_t k_blocks, const float* xsum) {
  const float* s = w.scales + n * k_blocks;
  int64_t kb = 0;
  float part = 0;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc = _mm256_setzero_ps();
  const uint8_t* zb = w.zp_packed ? w.zp_packed + n * ((k_blocks * w.bits + 7) / 8) : nullptr;
  const float* zf = w.zp_float ? w.zp_float + n * k_blocks : nullptr;
  const __m256 fixed = _mm256_set1_ps(static_cast<float>(int64_t{1} << (w.bits - 1)));
  // 2- and 4-bit zero points: 8 of them are bits·8 bits from byte kb·bits/8 on, low bits first.
  const __m256i shifts = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(w.bits)));
  const __m256i mask = _mm256_set1_epi32((1 << w.bits) - 1);
  for (; kb + 8 <= k_blocks; kb += 8) {
    __m256 z = fixed;
    if (zf) {
      z = _mm256_loadu_ps(zf + kb);
    } else if (zb && w.bits == 8) {
      z = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zb + kb))));
    } else if (zb) {
      uint32_t word = 0;
      std::memcpy(&word, zb + kb * w.bits / 8, static_cast<size_t>(w.bits));  // (8 zero points: bits bytes)
      z = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts), mask));
    }
    acc = _mm256_fmadd_ps(_mm256_mul_ps(z, _mm256_loadu_ps(s + kb)), _mm256_loadu_ps(xsum + kb), acc);
  }
  part = hsum(acc);
#endif
  const NBitsRowZeroPoints zps(w, n, k_blocks);
  for (; kb < k_blocks; ++kb) part += zps.at(kb) * s[kb] * xsum[kb];
  return part;
}

#if defined(__AVX2__) && defined(__FMA__)

// Output columns [n0, n0 + R) for one activation row: R weight rows share each load of x.
template <int R, int Bits>
void rows(const float* xs, const float* xsum, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t blob = w.block * Bits / 8, groups = w.block / (Bits == 2 ? kGroup2 : kGroup);
  const __m256i low = _mm256_set1_epi32(0xF);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    __m256 block_acc[R], block_acc2[R];  // (two chains a row, so 2R FMAs are in flight)
    const uint8_t* q[R];
    for (int r = 0; r < R; ++r) {
      block_acc[r] = block_acc2[r] = _mm256_setzero_ps();
      q[r] = w.data + ((n0 + r) * k_blocks + kb) * blob;
    }
    const float* xb = xs + kb * w.block;
    for (int64_t g = 0; g < groups; ++g) {
      if constexpr (Bits == 2) {  // 8 bytes, four codes each
        const __m256 x4[4] = {_mm256_loadu_ps(xb + g * kGroup2), _mm256_loadu_ps(xb + g * kGroup2 + 8),
                              _mm256_loadu_ps(xb + g * kGroup2 + 16), _mm256_loadu_ps(xb + g * kGroup2 + 24)};
        const __m256i three = _mm256_set1_epi32(3);
        for (int r = 0; r < R; ++r) {
          const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q[r] + g * 8)));
          block_acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, three)), x4[0], block_acc[r]);
          block_acc2[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 2), three)), x4[1], block_acc2[r]);
          block_acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 4), three)), x4[2], block_acc[r]);
          block_acc2[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 6)), x4[3], block_acc2[r]);
        }
        continue;
      }
      const __m256 x_even = _mm256_loadu_ps(xb + g * kGroup), x_odd = _mm256_loadu_ps(xb + g * kGroup + 8);
      for (int r = 0; r < R; ++r) {
        if constexpr (Bits == 4) {  // 8 bytes: the even elements' low nibbles, the odd ones' high nibbles
          const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q[r] + g * 8)));
          block_acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, low)), x_even, block_acc[r]);
          block_acc2[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), x_odd, block_acc2[r]);
        } else {  // 16 bytes, one element each, in order (x_even, x_odd: elements 0-7 and 8-15)
          const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q[r] + g * 16)));
          const __m256i hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q[r] + g * 16 + 8)));
          block_acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), x_even, block_acc[r]);
          block_acc2[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), x_odd, block_acc2[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const float scale = w.scales[(n0 + r) * k_blocks + kb];
      block_acc[r] = _mm256_add_ps(block_acc[r], block_acc2[r]);
      acc[r] = _mm256_fmadd_ps(block_acc[r], _mm256_set1_ps(scale), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[n0 + r] = hsum(acc[r]) - zero_point_part(w, n0 + r, k_blocks, xsum);
}
#else
// Portable path: the same arithmetic one element at a time.
template <int R, int Bits>
void rows(const float* xs, const float* xsum, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t blob = w.block * Bits / 8;
  for (int r = 0; r < R; ++r) {
    float acc = 0;
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const uint8_t* q = w.data + ((n0 + r) * k_blocks + kb) * blob;
      const float* xb = xs + kb * w.block;
      float block_acc = 0;
      if constexpr (Bits == 2)
        for (int64_t g = 0; g < w.block / kGroup2; ++g)
          for (int j = 0; j < 8; ++j)
            for (int t = 0; t < 4; ++t) block_acc += static_cast<float>((q[g * 8 + j] >> (2 * t)) & 3) * xb[g * kGroup2 + 8 * t + j];
      else
        for (int64_t g = 0; g < w.block / kGroup; ++g)
          for (int i = 0; i < 8; ++i) {
            const float lo = Bits == 4 ? static_cast<float>(q[g * 8 + i] & 0xF) : static_cast<float>(q[g * 16 + i]);
            const float hi = Bits == 4 ? static_cast<float>(q[g * 8 + i] >> 4) : static_cast<float>(q[g * 16 + 8 + i]);
            block_acc += lo * xb[g * kGroup + i] + hi * xb[g * kGroup + 8 + i];
          }
      const float scale = w.scales[(n0 + r) * k_blocks + kb];
      acc += block_acc * scale;
    }
    y[n0 + r] = acc - zero_point_part(w, n0 + r, k_blocks, xsum);
  }
}
#endif

// Σ x[0..n) in one fixed order at any vector width: eight running sums (lane i takes every eighth value
// from i), then added pairwise — so each tier's driver gives the grouped kernels the same block sums.
float block_sum(const float* x, int64_t n) {
  float lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += x[i + l];
  for (; i < n; ++i) lane[i % 8] += x[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Grouped 4-bit and 2-bit weights (gemv_nbits_f32.h): rows padded to whole chunks, block sums (and 2-bit codes'
// pair sums), the tier's kernel.
void gemv_nbits_grouped(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  using RowsFn = void (*)(const FloatRow*, int64_t, const NBitsWeights&, int64_t, int64_t, float*, int64_t);
  // This width's rows, or the tier's own (AVX-512's; the scalar tier's)
#if defined(__AVX2__) && defined(__FMA__)
  RowsFn rows_fn = grouped_f32<YmmLanes, 1>;
#elif defined(__aarch64__)
  RowsFn rows_fn = grouped_f32<NeonLanes, 1>;
#else
  RowsFn rows_fn = grouped_f32<ScalarLanes, 1>;
#endif
  if (const auto own = kernel_table(cx.isa).nbits_grouped_rows.fn) rows_fn = own;
  const int64_t k_blocks = nbits_k_blocks(w), padded = k_blocks * w.block;
  Workspace& ws = cx.workspace();
  const bool copy = padded != w.K;  // a last partial chunk reads zeros past K
  float* const xs = copy ? ws.take<float>(Workspace::NBitsX, M * padded) : nullptr;
  float* const xsum = ws.take<float>(Workspace::NBitsXSums, M * k_blocks);
  if (copy) std::fill(xs, xs + M * padded, 0.0f);
  for (int64_t m = 0; m < M; ++m) {
    if (copy) std::copy(x + m * w.K, x + (m + 1) * w.K, xs + m * padded);
    for (int64_t kb = 0; kb < k_blocks; ++kb)
      xsum[m * k_blocks + kb] = block_sum(x + m * w.K + kb * w.block, std::min(w.block, w.K - kb * w.block));
  }
  const int64_t groups = nbits_groups(w);
#ifndef TERN_MINIMAL  // (a minimal build reads 2-bit weights as stored: nbits_groups_native)
#if defined(__AVX2__) && defined(__FMA__)
  void (*pair_table)(const float*, int64_t, float*) = pair_sums<YmmLanes>;  // (the same bits at any width)
#elif defined(__aarch64__)
  void (*pair_table)(const float*, int64_t, float*) = pair_sums<NeonLanes>;
#else
  void (*pair_table)(const float*, int64_t, float*) = pair_sums<ScalarLanes>;
#endif
  // 2-bit codes' pair sums: a set of tables for each kernel thread, built by that thread at its first chunk of a
  // pass (tables built by the caller and read by the other core took a 4096 x 512 row 43 us, where it took 33 us
  // without tables and takes 30 so). One table a cache line: unaligned, each lookup read two lines (in a Python
  // process, whose heap gave 16-byte alignment, a 4096 x 14336 row took 1.02-1.03 ms so, 0.89-0.96 ms aligned).
  struct alignas(64) PairTable {
    float sums[16];
  };
  const int64_t per_thread = std::min(kFloatRowsAPass, M) * padded / 2;
  PairTable* tables = nullptr;
  int64_t* built = nullptr;  // per kernel thread: the pass its tables hold, plus one (0: none)
  if (w.bits == 2) {
    tables = ws.take<PairTable>(Workspace::NBitsPairs, cx.threads * per_thread);
    built = ws.take<int64_t>(Workspace::NBitsPasses, cx.threads);
    std::fill(built, built + cx.threads, 0);
  }
#endif
  for (int64_t m0 = 0; m0 < M; m0 += kFloatRowsAPass) {
    const int64_t rows_now = std::min(kFloatRowsAPass, M - m0);
    FloatRow rows[kFloatRowsAPass];
    for (int64_t i = 0; i < rows_now; ++i)
      rows[i] = FloatRow{copy ? xs + (m0 + i) * padded : x + (m0 + i) * w.K, xsum + (m0 + i) * k_blocks};
    float* ym = y + m0 * w.N;
    parallel_chunks(cx.threads, groups, balanced_chunks(cx.threads, groups, small(w)), [&](int64_t g0, int64_t g1, int slot) {
#ifndef TERN_MINIMAL
      if (w.bits == 2) {
        FloatRow mine[kFloatRowsAPass];
        for (int64_t i = 0; i < rows_now; ++i) {
          float* sums = tables[slot * per_thread + i * padded / 2].sums;
          if (built[slot] != m0 + 1) pair_table(rows[i].x, padded, sums);
          mine[i] = rows[i];
          mine[i].pairs = sums;
        }
        built[slot] = m0 + 1;
        return rows_fn(mine, rows_now, w, g0, g1, ym, w.N);
      }
#endif
      rows_fn(rows, rows_now, w, g0, g1, ym, w.N);
    });
  }
}

void gemv_nbits_at_width(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  if (w.grouped) return gemv_nbits_grouped(cx, x, M, w, y);
  const KernelTable& t = kernel_table(cx.isa);
  const bool zmm = t.nbits_wide_rows.fn && t.nbits_wide_rows_take(w);  // (AVX-512's rows and their activations' order)
  auto position = [&](int64_t k) { return zmm ? t.nbits_wide_position(k, w.bits) : reordered(k, w.bits); };
  const int64_t k_blocks = (w.K + w.block - 1) / w.block, padded = k_blocks * w.block;
  // Reordered activations (zero past K: a last partial block's padding contributes nothing) and their
  // block sums, in the run's workspace.
  float* const xs = cx.workspace().take<float>(Workspace::NBitsX, M * padded);
  float* const xsum = cx.workspace().take<float>(Workspace::NBitsXSums, M * k_blocks);
  std::fill(xs, xs + M * padded, 0.0f);
  std::fill(xsum, xsum + M * k_blocks, 0.0f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < w.K; ++k) {
      xs[m * padded + position(k)] = x[m * w.K + k];
      xsum[m * k_blocks + k / w.block] += x[m * w.K + k];
    }
  const int64_t quads = w.N / 4;
  for (int64_t m = 0; m < M; ++m) {
    const float* xm = xs + m * padded;
    const float* sm = xsum + m * k_blocks;
    float* ym = y + m * w.N;
    if (zmm) {  // (the codes' part there, the zero points' here)
      const int64_t units = (w.N + 3) / 4;
      parallel_chunks(cx.threads, units, balanced_chunks(cx.threads, units, small(w)), [&](int64_t p0, int64_t p1, int) {
        const int64_t n1 = std::min(w.N, 4 * p1);
        t.nbits_wide_rows.fn(xm, w, 4 * p0, n1, ym);
        for (int64_t n = 4 * p0; n < n1; ++n) ym[n] -= zero_point_part(w, n, k_blocks, sm);
      });
      continue;
    }
    parallel_chunks(cx.threads, quads, balanced_chunks(cx.threads, quads, small(w)), [&](int64_t p0, int64_t p1, int) {
      for (int64_t p = p0; p < p1; ++p)
        if (w.bits == 4) rows<4, 4>(xm, sm, w, k_blocks, 4 * p, ym);
        else if (w.bits == 2) rows<4, 2>(xm, sm, w, k_blocks, 4 * p, ym);
        else rows<4, 8>(xm, sm, w, k_blocks, 4 * p, ym);
    });
    for (int64_t n = 4 * quads; n < w.N; ++n)
      if (w.bits == 4) rows<1, 4>(xm, sm, w, k_blocks, n, ym);
      else if (w.bits == 2) rows<1, 2>(xm, sm, w, k_blocks, n, ym);
      else rows<1, 8>(xm, sm, w, k_blocks, n, ym);
  }
}

// One block of activations to int8: scale amax/127, values nearbyint(x · 127/amax) (round to nearest
// even). `total` is Σ q, `sum` scale · Σ q (what the zero points multiply) and chunk_sum[c] Σ q over each 32 values.
// For 8-bit weights q is in order; for 4-bit ones each 32-value chunk c of the row (the block's first is
// `chunk0`) goes to the 64-value group c / 2 at half c % 2 as Int8Row lays it out: its 16 even values at
// 16·half, its 16 odd ones at 32 + 16·half — q points at the row.
void quantize_block(const float* x, int64_t len, bool four_bit, int64_t chunk0, int8_t* q, int32_t* chunk_sum, float& scale, float& sum,
                    int32_t& total) {
  float amax = 0;
  int64_t i = 0;
#if defined(__AVX2__)
  // The vector path gives the scalar one's bits: max is exact and cvtps2dq rounds as nearbyint does.
  // SmolLM2's 576-wide rows: ~3 µs of scalar work per MatMulNBits call before, 211 calls a token.
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 vmax = _mm256_setzero_ps();
  for (; i + 8 <= len; i += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  for (float v : lanes) amax = std::max(amax, v);
#endif
  for (; i < len; ++i) amax = std::max(amax, std::fabs(x[i]));
  scale = amax / 127.0f;
  const float inv = amax > 0 ? 127.0f / amax : 0.0f;
  auto at = [&](int64_t k) {  // where value k of the block goes
    if (!four_bit) return k;
    const int64_t c = chunk0 + k / 32, j = k % 32;
    return (c / 2) * 64 + (j % 2) * 32 + (c % 2) * 16 + j / 2;
  };
  total = 0;
  i = 0;
#if defined(__AVX2__)
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);                                // undoes packs' lane interleave
  const __m256i evens_odds = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,  //
                                              0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (; i + 32 <= len; i += 32) {
    __m256i v[4], vsum = _mm256_setzero_si256();
    for (int r = 0; r < 4; ++r) {
      v[r] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * r), vinv));
      vsum = _mm256_add_epi32(vsum, v[r]);
    }
    alignas(32) int32_t sums[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums), vsum);
    int32_t chunk = 0;
    for (int32_t t : sums) chunk += t;
    chunk_sum[i / 32] = chunk;
    total += chunk;
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    b = _mm256_permutevar8x32_epi32(b, in_order);
    if (four_bit) {  // per 16-byte lane: evens, odds; then quads [lane0 evens, lane1 evens, lane0 odds, lane1 odds]
      b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b, evens_odds), _MM_SHUFFLE(3, 1, 2, 0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + at(i)), _mm256_castsi256_si128(b));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + at(i + 1)), _mm256_extracti128_si256(b, 1));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), b);
    }
  }
#endif
  for (; i < len; ++i) {
    const int v = static_cast<int>(std::nearbyint(x[i] * inv));
    total += v;
    chunk_sum[i / 32] += v;  // (zeroed by the caller: blocks of 16 share a chunk)
    q[at(i)] = static_cast<int8_t>(v);
  }
  sum = scale * static_cast<float>(total);
}

void gemv_nbits_i8_at_width(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  const auto rows_fn = kernel_table(cx.isa).nbits_i8_rows.fn;  // (there: gemv_nbits_i8_supported)
  const int64_t k_blocks = (w.K + w.block - 1) / w.block, padded = (k_blocks * w.block + 63) / 64 * 64;
  // Quantized rows, in the run's workspace. Values past K are 0.
  Workspace& ws = cx.workspace();
  int8_t* const q = ws.take<int8_t>(Workspace::Int8Codes, M * padded);
  float* const scale = ws.take<float>(Workspace::Int8Scales, M * k_blocks);
  float* const sum = ws.take<float>(Workspace::Int8Sums, M * k_blocks);
  int32_t* const block_sum = ws.take<int32_t>(Workspace::Int8BlockSums, M * k_blocks);
  int32_t* const chunk_sum = ws.take<int32_t>(Workspace::Int8ChunkSums, M * padded / 32);
  std::fill(q, q + M * padded, int8_t{0});
  std::fill(chunk_sum, chunk_sum + M * padded / 32, 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const int64_t len = std::min(w.block, w.K - kb * w.block), at = m * k_blocks + kb, k0 = kb * w.block;
      const bool four_bit = w.bits == 4 && !w.grouped;  // (reordered for the file's layout)
      quantize_block(x + m * w.K + k0, len, four_bit, k0 / 32, q + m * padded + (four_bit ? 0 : k0), chunk_sum + m * padded / 32 + k0 / 32,
                     scale[at], sum[at], block_sum[at]);
    }
  int32_t* lane_sum = nullptr;
#if defined(__x86_64__)
  if (w.bits == 8 && !w.grouped) {  // (Int8Row::lane_sum; per block, or per pair of blocks of 16)
    lane_sum = ws.take<int32_t>(Workspace::Int8LaneSums, M * k_blocks * 8);
    std::fill(lane_sum, lane_sum + M * k_blocks * 8, 0);
    const int64_t span = std::max<int64_t>(w.block, 32), steps = k_blocks * w.block / span;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t s = 0; s < steps; ++s) {
        int32_t* lanes = lane_sum + (m * k_blocks + s) * 8;
        const int8_t* qs = q + m * padded + s * span;
        for (int64_t i = 0; i < span; i += 4) lanes[i % 32 / 4] += qs[i] + qs[i + 1] + qs[i + 2] + qs[i + 3];
      }
  }
#endif
  // Threads split the output columns in runs of 4 (the kernel's row group), or 16-row groups of grouped
  // weights; each output is summed in one fixed order, so results repeat bit for bit whatever the thread count.
  const int64_t unit = w.grouped ? kNBitsGroupRows : 4, groups = (w.N + unit - 1) / unit;
  // The rows of x from m0 on, as many as a pass takes, over the columns of groups [g0, g1).
  auto pass = [&](int64_t m0, int64_t g0, int64_t g1) {
    const int64_t rows_now = std::min(kInt8RowsAPass, M - m0);
    Int8Row rows[kInt8RowsAPass];
    for (int64_t i = 0; i < rows_now; ++i) {
      const int64_t m = m0 + i;
      rows[i] = Int8Row{q + m * padded,           scale + m * k_blocks,
                        sum + m * k_blocks,       chunk_sum + m * padded / 32,
                        block_sum + m * k_blocks, lane_sum ? lane_sum + m * k_blocks * 8 : nullptr};
    }
    float* ym = y + m0 * w.N;
    if (w.grouped) rows_fn(rows, rows_now, w, g0, g1, ym, w.N);
    else rows_fn(rows, rows_now, w, unit * g0, std::min(w.N, unit * g1), ym, w.N);
  };
  if (M <= kInt8RowsAPass) {
    parallel_chunks(cx.threads, groups, balanced_chunks(cx.threads, groups, small(w)),
                    [&](int64_t g0, int64_t g1, int) { pass(0, g0, g1); });
    return;
  }
  // More rows than a pass (tern eval's prefill computed as decode rows, NBitsActivations::Int8EveryRow): a chunk of
  // columns takes every pass while its weights are in L2 (256 KB a chunk), where a pass at a time streamed the
  // whole matrix again for every four rows. Each output is computed as before, bit for bit.
  const int64_t bytes = w.N * k_blocks * w.block * w.bits / 8, chunk_bytes = 256 << 10;
  const int64_t chunks = std::min(groups, std::max(balanced_chunks(cx.threads, groups), bytes / chunk_bytes));
  parallel_chunks(cx.threads, groups, chunks, [&](int64_t g0, int64_t g1, int) {
    for (int64_t m0 = 0; m0 < M; m0 += kInt8RowsAPass) pass(m0, g0, g1);
  });
}

}  // namespace
}  // namespace tern::kernels
