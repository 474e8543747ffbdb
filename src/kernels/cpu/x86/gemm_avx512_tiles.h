// The AVX-512 GEMM driver over gemm_packed.h's 16-column panels, shared by the tiers' kernels and included
// only by x86/*.cpp files compiled with AVX-512 flags. Everything here has internal linkage, so each
// including file gets its own copy compiled with its own tier's flags (a shared inline copy could be linked
// from the wrong tier's file).
//
// A tile of C is 8 rows × 32 columns — two panels side by side, 16 zmm accumulators, two B registers, A
// broadcast from memory. A is packed once per call, [row panel][step][8]; each K block
// of the two panels is prepared once (the packed panels themselves, or a widened/dequantized/interleaved copy
// in L1) and serves every row panel of A. Every C element is one FMA chain from zero per K block of kKC,
// added to C block by block — the order of gemm_packed.cpp's AVX2 micro-kernel and of its GEMV, so an fp32
// product has the same bits at every tier and for every row count.
//
// A kernel `Steps` names:
//   A                   the packed element of A (one float, or a bf16 pair in 32 bits)
//   kK                  K elements per step (1, or 2 for pairs)
//   a_element(row, k, K)  the packed A element of `row` at K index k (a multiple of kK)
//   b_block(j, k0, kc, scratch)  panel j's rows [k0, k0 + kc) as steps of 16 lanes (kK values each),
//                       64-byte aligned: a pointer into the panels or into `scratch` (kKC × 16 floats)
//   b_memory(j, k0, kc)  where b_block will read panel j's rows [k0, k0 + kc) from: {address, bytes}, or
//                       {nullptr, 0} when unknown (prefetched into L2 while the block before is multiplied)
//   madd(acc, a, b)     acc + a × b over a step, for 16 lanes of b at `b`
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_panels.h"

namespace tern::kernels {
namespace {

constexpr int64_t kTileP = 16;    // panel columns (gemm_packed.h's kPanel at the avx2 baseline)
constexpr int64_t kTileMR = 8;    // C tile rows: `tern bench-op matmul --shape M,2048,8192 --threads 2`, Sapphire
                                  // Rapids-class Xeon, alternated: M 128 359/360 GFLOP/s against 12 rows' 350/345
                                  // (128 rows fill 16 tiles of 8, 11 of 12 waste 4 rows), M 200 367/365 against
                                  // 359/362; 14 rows: 311 at M 128
constexpr int64_t kTileKC = 256;  // K block: the fp32 order's block (gemm_packed.cpp's kKC); two panels' block (32 KB) in L1/L2
constexpr int64_t kTileNC = 8;    // panel pairs per column block: the C block (M × 256 floats) stays in L2

// Lane 2c takes row k's column c, lane 2c + 1 row k + 1's.
alignas(64) constexpr uint16_t kBf16Pairs[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

// Rows [k0, k0 + kc) of a bf16 panel ([K][16]) as pairs, the layout vdpbf16ps and AMX's TDPBF16PS read:
// out[p][c] = (B[k0 + 2p][c], B[k0 + 2p + 1][c]), the second 0 past kc. Returns the pair rows written.
inline int64_t interleave_bf16_pairs(const uint16_t* panel, int64_t k0, int64_t kc, uint16_t* out) {
  const __m512i idx = _mm512_load_si512(kBf16Pairs);
  int64_t p = 0;
  for (; 2 * p + 1 < kc; ++p)
    _mm512_store_si512(out + p * 2 * kTileP, _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(panel + (k0 + 2 * p) * kTileP)));
  if (2 * p < kc) {  // odd: the last row with a zero row
    const __m512i last = _mm512_maskz_loadu_epi16(0xffff, panel + (k0 + 2 * p) * kTileP);
    _mm512_store_si512(out + p++ * 2 * kTileP, _mm512_permutexvar_epi16(idx, last));
  }
  return p;
}

// Rows [0, mr) × columns [0, nr ≤ 32) of C (row stride ldc) (+)= the 32-column rows of `block` (row stride ldb).
inline void add_block(const float* block, int64_t ldb, float* c, int64_t ldc, bool accumulate, int64_t mr, int64_t nr) {
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t cols = std::min<int64_t>(kTileP, nr - h * kTileP);
      if (cols <= 0) break;
      float* out = c + r * ldc + h * kTileP;
      const __mmask16 m = static_cast<__mmask16>(cols == kTileP ? 0xffff : (1u << cols) - 1);
      const __m512 v = _mm512_load_ps(block + r * ldb + h * kTileP);
      _mm512_mask_storeu_ps(out, m, accumulate ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, out)) : v);
    }
}

// Rows [0, 8) of A (row stride K) as gemm's packed row panel [K][8], eight columns at a time through an
// 8 × 8 transpose in registers. The generic element-by-element packing took 0.6 ms of a 128 × 8192 × 2048
// GEMM's ~12 ms (its time at N = 32, `tern bench-op`-shaped harness, 2 threads): this one a third less.
inline void pack_f32_row_panel(const float* A, int64_t K, float* out) {
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(A + i * K + k);
    for (int i = 0; i < 8; i += 2) {  // row pairs interleaved: t[i] columns 0,1|4,5, t[i + 1] columns 2,3|6,7
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int h = 0; h < 8; h += 4) {  // rows h..h + 3 of columns c|c + 4 in u[h + c]
      u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
      u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
      u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
      u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
      _mm256_storeu_ps(out + (k + c) * 8, _mm256_permute2f128_ps(u[c], u[c + 4], 0x20));
      _mm256_storeu_ps(out + (k + c + 4) * 8, _mm256_permute2f128_ps(u[c], u[c + 4], 0x31));
    }
  }
  for (; k < K; ++k)
    for (int i = 0; i < 8; ++i) out[k * 8 + i] = A[i * K + k];
}

struct Span {
  const void* at = nullptr;
  int64_t bytes = 0;
};

// Lines of the next B block a tile requests into L2 while it runs: `lines` lines from each of at[0] and at[1]
// (either may be null).
struct NextLines {
  const char* at[2] = {nullptr, nullptr};
  int64_t lines = 0;
};

// C rows [0, mr) × columns [0, nr ≤ 32) (+)= the steps of A [steps][kTileMR] · two panels' steps, requesting
// `next` into L2 a line of each panel every 16 steps. (Issued together before the tile, the 32 requests a row
// panel makes stalled the tile that crossed into a new 4 KB page of the next block: rdtsc around each tile of
// a 128 × 2048 × 8192 GEMM, one thread, TSC cycles: row panels 4 / 8 / 12 at 2,215 / 3,077 / 2,265 against
// ~1,800 for the others; spread, all ~1,800.)
template <typename Steps>
void avx512_tile(const Steps& s, int64_t steps, const typename Steps::A* a, const float* b0, const float* b1, float* c, int64_t ldc,
                 bool accumulate, int64_t mr, int64_t nr, const NextLines& next) {
  constexpr int64_t kStepsALine = 16;
  __m512 acc[kTileMR][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  int64_t p = 0;
  const auto run_to = [&](int64_t end) {
    for (; p < end; ++p) {
      const __m512 x0 = _mm512_load_ps(b0 + p * kTileP), x1 = _mm512_load_ps(b1 + p * kTileP);
      for (int64_t r = 0; r < kTileMR; ++r) {
        acc[r][0] = s.madd(acc[r][0], a[p * kTileMR + r], x0);
        acc[r][1] = s.madd(acc[r][1], a[p * kTileMR + r], x1);
      }
    }
  };
  for (int64_t line = 0; line < next.lines; ++line) {
    for (const char* at : next.at)
      if (at) _mm_prefetch(at + 64 * line, _MM_HINT_T1);
    run_to(std::min(steps, p + kStepsALine));
  }
  run_to(steps);
  alignas(64) float block[kTileMR][2 * kTileP];
  for (int64_t r = 0; r < mr; ++r) {
    _mm512_store_ps(block[r], acc[r][0]);
    _mm512_store_ps(block[r] + kTileP, acc[r][1]);
  }
  add_block(block[0], 2 * kTileP, c, ldc, accumulate, mr, nr);
}

// C[M, N] = A[M, K] · B for the panels `s` provides.
template <typename Steps>
void avx512_gemm(const Context& cx, const Steps& s, const float* A, int64_t M, int64_t K, int64_t N, float* C) {
  using AElem = typename Steps::A;
  constexpr int64_t kK = Steps::kK;
  const int64_t steps = (K + kK - 1) / kK, row_panels = (M + kTileMR - 1) / kTileMR;
  const int64_t n_panels = (N + kTileP - 1) / kTileP, tiles = (n_panels + 1) / 2;
  AElem* ap = cx.workspace().take<AElem>(Workspace::TilesA, row_panels * steps * kTileMR);
  if constexpr (std::is_same_v<AElem, float> && kK == 1) {  // fp32 rows as they are: whole panels transposed in registers
    const int64_t full = M / kTileMR;
    parallel_chunks(cx.threads, full, balanced_chunks(cx.threads, full), [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i) pack_f32_row_panel(A + i * kTileMR * K, K, ap + i * K * kTileMR);
    });
    if (full < row_panels)
      pack_row_panels<AElem, kTileMR>(
          cx.threads, M - full * kTileMR, steps, [&](int64_t m, int64_t p) { return A[(full * kTileMR + m) * K + p]; },
          ap + full * K * kTileMR);
  } else {
    pack_row_panels<AElem, kTileMR>(
        cx.threads, M, steps, [&](int64_t m, int64_t p) { return s.a_element(A + m * K, p * kK, K); }, ap);
  }
  // Column tiles in chunks: every C element is summed in one order, whoever computes it.
  parallel_chunks(cx.threads, tiles, balanced_chunks(cx.threads, tiles), [&](int64_t t_begin, int64_t t_end, int) {
    alignas(64) float scratch[2][kTileKC * kTileP];
    for (int64_t tc = t_begin; tc < t_end; tc += kTileNC)
      for (int64_t k0 = 0; k0 < K; k0 += kTileKC) {
        const int64_t kc = std::min(kTileKC, K - k0), kp = (kc + kK - 1) / kK;
        for (int64_t t = tc; t < std::min(t_end, tc + kTileNC); ++t) {
          const int64_t j = 2 * t;
          const float* b0 = s.b_block(j, k0, kc, scratch[0]);
          const float* b1 = scratch[1];
          if (j + 1 < n_panels) b1 = s.b_block(j + 1, k0, kc, scratch[1]);
          else std::memset(scratch[1], 0, sizeof scratch[1]);
          const int64_t nr = std::min<int64_t>(2 * kTileP, N - j * kTileP);
          // The next block in this loop's order goes to L2 a slice per row panel while this one is multiplied:
          // B comes from L3 or memory, and the first row panel of each block had waited for it. `tern bench-op
          // matmul --shape 128,2048,8192 --threads 1|2` (Xeon, tier amx), alternated: 149 / 154 → 167 / 174
          // GFLOP/s on one thread, 295 / 304 → 340 / 347 on two (into L1 instead: 166 / 166, 333 / 335).
          // The last row panel also takes the next block's first 8 lines of each panel into L1, where the first
          // row panel starts on them: its tile 2,926 → 2,094 TSC cycles (measured as above; 32 lines: 2,819).
          const NextBlock next = next_block(t, k0, tc, kTileNC, t_end, kTileKC, K);
          const int64_t next_kc = std::min(kTileKC, K - next.k0);
          const Span next0 = next.unit >= 0 ? s.b_memory(2 * next.unit, next.k0, next_kc) : Span{};
          const Span next1 = next.unit >= 0 && 2 * next.unit + 1 < n_panels ? s.b_memory(2 * next.unit + 1, next.k0, next_kc) : Span{};
          const int64_t next_lines = (std::max(next0.bytes, next1.bytes) + 63) / 64;
          for (int64_t i = 0; i < row_panels; ++i) {
            const int64_t l0 = next_lines * i / row_panels, l1 = next_lines * (i + 1) / row_panels;
            const auto slice = [&](const Span& span) { return span.at ? static_cast<const char*>(span.at) + 64 * l0 : nullptr; };
            if (i + 1 == row_panels)
              for (const Span& span : {next0, next1})
                for (int64_t l = 0; span.at && l < std::min<int64_t>(8, next_lines); ++l)
                  _mm_prefetch(static_cast<const char*>(span.at) + 64 * l, _MM_HINT_T0);
            avx512_tile(s, kp, ap + (i * steps + k0 / kK) * kTileMR, b0, b1, C + i * kTileMR * N + j * kTileP, N, k0 > 0,
                        std::min(kTileMR, M - i * kTileMR), nr, NextLines{{slice(next0), slice(next1)}, l1 - l0});
          }
        }
      }
  });
}

}  // namespace
}  // namespace tern::kernels
