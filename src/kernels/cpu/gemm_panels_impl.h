// The fp32 GEMM's tiles and the panel GEMV over gemm_packed.h's panels, at the vector width of the file that
// includes this: gemm_packed.cpp (the build's baseline) and, in an x86-64-v2 build, x86/float_avx2/gemm_packed.cpp
// (tier avx2). Everything here has internal linkage, so each file keeps its own copy built for its flags.
// The panels are 16 columns on x86-64 at any width (the layout every tier reads); the tile's rows follow
// the width (6 rows of 2 registers at AVX2 and NEON, 3 of 4 at SSE4.2), and A is packed for them here.
#pragma once
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/lanes.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_panels.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace tern::kernels {
namespace {

#if defined(__x86_64__)
constexpr int64_t kNR = 16;  // panel width: the layout every x86-64 tier reads (gemm_avx512.h's tiles too)
#else
constexpr int64_t kNR = 2 * kLanes;
#endif
constexpr int64_t kRegs = kNR / kLanes;  // registers a row of the C tile: 2 (AVX2, NEON), 4 (an SSE4.2 baseline)
constexpr int64_t kMR = 12 / kRegs;      // rows of the C tile: 12 accumulators + kRegs B registers + 1 broadcast
constexpr int64_t kKC = 256;             // K block: an A slice (M × KC) stays in L2, a B micro-panel in L1
constexpr int64_t kNC = 16;              // panels per column block: its C block (M × 256 floats) stays in L2

// kLanes elements of a panel as floats.
template <typename T>
batch load_lanes(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return batch::load_aligned(p);
  } else {
#if defined(__AVX2__) && defined(__F16C__)
    static_assert(kLanes == 8, "the fp16/bf16 widening below is written for 8 lanes");
    const __m128i h = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (std::is_same_v<T, f16>) return batch(_mm256_cvtph_ps(h));
    else return batch(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
#elif defined(__aarch64__)
    static_assert(kLanes == 4, "the fp16/bf16 widening below is written for NEON's 4 lanes");
    const uint16x4_t h = vld1_u16(reinterpret_cast<const uint16_t*>(p));
    if constexpr (std::is_same_v<T, f16>) return batch(vcvt_f32_f16(vreinterpret_f16_u16(h)));
    else return batch(vreinterpretq_f32_u32(vshll_n_u16(h, 16)));
#else
    alignas(64) float f[kLanes];
    for (int64_t i = 0; i < kLanes; ++i) f[i] = static_cast<float>(p[i]);
    return batch::load_aligned(f);
#endif
  }
}

// C tile [mr × nr] (+)= A micro-panel [kc][kMR] · B micro-panel [kc][kNR].
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate, int64_t mr, int64_t nr) {
  batch acc[kMR][kRegs];
  for (auto& row : acc)
    for (batch& v : row) v = batch(0.0f);
  for (int64_t k = 0; k < kc; ++k) {
    batch bv[kRegs];
    for (int64_t h = 0; h < kRegs; ++h) bv[h] = batch::load_aligned(b + k * kNR + h * kLanes);
    for (int64_t r = 0; r < kMR; ++r) {
      const batch ar(a[k * kMR + r]);
      for (int64_t h = 0; h < kRegs; ++h) acc[r][h] = xsimd::fma(ar, bv[h], acc[r][h]);
    }
  }
  if (mr == kMR && nr == kNR) {
    for (int64_t r = 0; r < kMR; ++r)
      for (int64_t h = 0; h < kRegs; ++h) {
        float* out = c + r * ldc + h * kLanes;
        (accumulate ? acc[r][h] + batch::load_unaligned(out) : acc[r][h]).store_unaligned(out);
      }
    return;
  }
  alignas(64) float tile[kMR * kNR];  // edge tile: only the rows and columns that exist
  for (int64_t r = 0; r < kMR; ++r)
    for (int64_t h = 0; h < kRegs; ++h) acc[r][h].store_aligned(tile + r * kNR + h * kLanes);
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j) c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0.0f) + tile[r * kNR + j];
}

// The GEMM over panels that `micro_panel(j, k0, kc, scratch)` provides (a pointer to [kc][kNR] floats,
// 64-byte aligned: the prepacked panel itself, or one dequantized into `scratch`).
template <typename MicroPanel>
void gemm_panel_tiles(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, float* C, const MicroPanel& micro_panel) {
  const int64_t panels = (N + kNR - 1) / kNR, row_panels = (M + kMR - 1) / kMR;
  // A packed whole, once per call: [row panel][K][kMR], rows past M zero.
  float* ap = cx.workspace().take<float>(Workspace::PanelsA, row_panels * kMR * K);
  pack_row_panels<float, kMR>(
      cx.threads, M, K, [&](int64_t m, int64_t k) { return A[m * K + k]; }, ap);
  // Column panels in chunks (each C element is summed in one order, whoever computes it).
  parallel_chunks(cx.threads, panels, balanced_chunks(cx.threads, panels), [&](int64_t j_begin, int64_t j_end, int) {
    alignas(64) float scratch[kKC * kNR];
    for (int64_t jc = j_begin; jc < j_end; jc += kNC)
      for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0);
        for (int64_t j = jc; j < std::min(j_end, jc + kNC); ++j) {
          const float* b = micro_panel(j, k0, kc, scratch);
          const int64_t nr = std::min(kNR, N - j * kNR);
          // The next panel block in this loop's order (when read in place) into L2 a slice per row panel, as
          // x86/gemm_avx512_tiles.h does: `TERN_ISA=avx2 tern bench-op matmul --shape 128,2048,8192 --threads 2`
          // on that file's Xeon, alternated with the build before: 182 / 187 / 182 → 217 / 217 / 219 GFLOP/s.
          const NextBlock next = next_block(j, k0, jc, kNC, j_end, kKC, K);
          const float* next_at = next.unit >= 0 ? micro_panel(next.unit, next.k0, std::min(kKC, K - next.k0), nullptr) : nullptr;
          const int64_t next_bytes = std::min(kKC, K - next.k0) * kNR * static_cast<int64_t>(sizeof(float));
          for (int64_t i = 0; i < row_panels; ++i) {
            prefetch_slice(next_at, next_bytes, i, row_panels);
            micro_kernel(kc, ap + (i * K + k0) * kMR, b, C + i * kMR * N + j * kNR, N, k0 > 0, std::min(kMR, M - i * kMR), nr);
          }
        }
      }
  });
}

// A panel is one sequential stream, which the hardware prefetchers alone (the L2 streamer stops at each 4 KB
// page) leave short of the memory's rate: the line 6 KB ahead of each step's is requested into L2, once a line.
// Llama-3.2-1B-shaped model, `tern bench --prompt-tokens 16 --new-tokens 24 --threads 2`, Xeon (tier amx), 3
// alternated rounds: fp32 decode 6.38–6.44 → 7.08–7.19 tok/s (3 KB 7.06–7.11, 4 KB 6.74–6.92, 8 KB and more
// 6.42–6.58), --weights bf16 11.30–11.64 → 13.33–13.38 (a prefetch each 32-byte step, twice a line), 13.76–13.82
// once a line (against 13.09–13.25 twice, alternated).
constexpr int64_t kPanelPrefetchBytes = 6144;

// One panel's kNR outputs of rows x[0..M) (M ≤ 4) into y[m, 0..nr). Summed in the GEMM's order — per
// K block of kKC, one FMA chain from zero per output, the blocks added to the output in turn — so a row
// gets the same bits from the GEMV and the GEMM, whatever the row count: a sequence decoding beside a
// prompt chunk (the GEMM) matches itself decoding alone (the GEMV).
template <int M, typename T>
void panel_rows(const float* x, int64_t K, const T* p, float* y, int64_t ldy, int64_t nr) {
  alignas(64) float out[M][kNR];
  for (int64_t k0 = 0; k0 < K; k0 += kKC) {
    const int64_t k1 = std::min(K, k0 + kKC);
    batch acc[M][kRegs];
    for (auto& row : acc)
      for (batch& v : row) v = batch(0.0f);
    constexpr int64_t steps_a_line = std::max<int64_t>(1, 64 / (kNR * static_cast<int64_t>(sizeof(T))));  // (fp16/bf16: 2)
    for (int64_t k = k0; k < k1; ++k) {
      if (k % steps_a_line == 0) __builtin_prefetch(reinterpret_cast<const char*>(p + k * kNR) + kPanelPrefetchBytes, 0, 2);
      batch bv[kRegs];
      for (int64_t h = 0; h < kRegs; ++h) bv[h] = load_lanes(p + k * kNR + h * kLanes);
      for (int m = 0; m < M; ++m) {
        const batch xm(x[m * K + k]);
        for (int64_t h = 0; h < kRegs; ++h) acc[m][h] = xsimd::fma(xm, bv[h], acc[m][h]);
      }
    }
    for (int m = 0; m < M; ++m)
      for (int64_t h = 0; h < kRegs; ++h)
        (k0 > 0 ? acc[m][h] + batch::load_aligned(out[m] + h * kLanes) : acc[m][h]).store_aligned(out[m] + h * kLanes);
  }
  for (int m = 0; m < M; ++m) std::memcpy(y + m * ldy, out[m], static_cast<size_t>(nr) * sizeof(float));
}

// y[m, :] = x[m, :] · B for M ≤ kPanelGemvMaxRows: each panel streamed from memory once, its rows taken
// four at a time while the panel (K × 64 bytes: 128 KB at K 2048) stays in L2. Up to 16 rows this is about
// as fast as the GEMM (bench-op matmul M,2048,8192 on Zen 3, 2 threads, best of runs: M 8 3.2 ms vs 3.3,
// M 16 9.2 vs 8.4); it is taken for its summation order (panel_rows), which keeps decode steps exact.
template <typename T>
void gemv_panels(const Context& cx, const float* x, int64_t M, const PackedMatrix& B, float* y) {
  const int64_t K = B.K, N = B.N, panels = (N + kNR - 1) / kNR;
  const T* data = static_cast<const T*>(B.panels->data());
  parallel_chunks(cx.threads, panels, balanced_chunks(cx.threads, panels, N * K < (int64_t{1} << 15)), [&](int64_t j0, int64_t j1, int) {
    for (int64_t j = j0; j < j1; ++j) {
      const T* p = data + j * K * kNR;
      const int64_t nr = std::min(kNR, N - j * kNR);
      for (int64_t m0 = 0; m0 < M; m0 += 4) {
        const float* xm = x + m0 * K;
        float* ym = y + m0 * N + j * kNR;
        switch (std::min<int64_t>(4, M - m0)) {
          case 1: panel_rows<1, T>(xm, K, p, ym, N, nr); break;
          case 2: panel_rows<2, T>(xm, K, p, ym, N, nr); break;
          case 3: panel_rows<3, T>(xm, K, p, ym, N, nr); break;
          default: panel_rows<4, T>(xm, K, p, ym, N, nr); break;
        }
      }
    }
  });
}

// The two as one build of them provides them to its tier's table (width_kernels.inc): the tiles over a
// PanelBlock's panels, and the panel GEMV for B's element type.
void gemm_tiles_at_width(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context,
                         float* C) {
  gemm_panel_tiles(cx, A, M, K, N, C,
                   [&](int64_t j, int64_t k0, int64_t kc, float* scratch) { return block(context, j, k0, kc, scratch); });
}
void gemv_panels_at_width(const Context& cx, const float* x, int64_t M, const PackedMatrix& B, float* y) {
  switch (B.type) {
    case DType::Float16: return gemv_panels<f16>(cx, x, M, B, y);
    case DType::BFloat16: return gemv_panels<bf16>(cx, x, M, B, y);
    default: return gemv_panels<float>(cx, x, M, B, y);
  }
}

}  // namespace
}  // namespace tern::kernels
