// gemm_bf16.h on AVX512_BF16: a 12 × 32 tile of C (24 zmm accumulators) per step, two panels of B side by
// side, A broadcast one (k, k+1) bf16 pair at a time. B's panels hold rows of 16 bf16; vdpbf16ps wants each
// column's (k, k+1) pair in one 32-bit lane, so each K block of a panel is interleaved once into L1 (one
// vpermw per row pair) and then serves every row panel of A.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/parallel.h"

namespace tern::kernels {
namespace {

constexpr int64_t kP = 16;    // panel columns (gemm_packed.h's kPanel at the avx2 baseline)
constexpr int64_t kMR = 12;   // C tile rows: 24 accumulators + 2 B registers + 1 broadcast of 32 zmm
constexpr int64_t kKC = 256;  // K block, even: its interleaved B pair of panels (16 KB) stays in L1
constexpr int64_t kNC = 8;    // panel pairs per column block: the C block (M × 256 floats) stays in L2

// Lane 2c takes row k's column c, lane 2c + 1 row k + 1's.
alignas(64) constexpr uint16_t kPairs[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                            8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

// Rows [k0, k0 + kc) of a panel ([K][16] bf16) as pairs: out[p][c] = (B[k0 + 2p][c], B[k0 + 2p + 1][c]),
// the second 0 past K.
void interleave(const uint16_t* panel, int64_t k0, int64_t kc, uint16_t* out) {
  const __m512i idx = _mm512_load_si512(kPairs);
  int64_t p = 0;
  for (; 2 * p + 1 < kc; ++p)
    _mm512_store_si512(out + p * 32, _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(panel + (k0 + 2 * p) * kP)));
  if (2 * p < kc) {  // odd K: the last row with a zero row
    const __m512i last = _mm512_maskz_loadu_epi16(0xffff, panel + (k0 + 2 * p) * kP);
    _mm512_store_si512(out + p * 32, _mm512_permutexvar_epi16(idx, last));
  }
}

// C rows [0, mr) × columns [0, nr ≤ 32) (+)= A's pairs [kp][kMR] · B's pairs [kp][16] of two panels.
void tile(int64_t kp, const uint32_t* a, const uint16_t* b0, const uint16_t* b1, float* c, int64_t ldc, bool accumulate,
          int64_t mr, int64_t nr) {
  __m512 acc[kMR][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh x0 = (__m512bh)_mm512_load_si512(b0 + p * 32), x1 = (__m512bh)_mm512_load_si512(b1 + p * 32);
    for (int64_t r = 0; r < kMR; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[p * kMR + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, x0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, x1);
    }
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t cols = std::min<int64_t>(kP, nr - h * kP);
      if (cols <= 0) break;
      float* out = c + r * ldc + h * kP;
      const __mmask16 m = static_cast<__mmask16>(cols == kP ? 0xffff : (1u << cols) - 1);
      const __m512 v = accumulate ? _mm512_add_ps(acc[r][h], _mm512_maskz_loadu_ps(m, out)) : acc[r][h];
      _mm512_mask_storeu_ps(out, m, v);
    }
}

}  // namespace

void gemm_bf16_avx512bf16(const float* A, int64_t M, int64_t K, int64_t N, const uint16_t* panels, float* C) {
  const int64_t pairs = (K + 1) / 2, row_panels = (M + kMR - 1) / kMR, n_panels = (N + kP - 1) / kP;
  const int64_t tiles = (n_panels + 1) / 2;
  // A as bf16 pairs, once per call: [row panel][pair][kMR], element k in the low half; rows past M zero.
  thread_local std::vector<uint32_t> a_packed;
  a_packed.resize(static_cast<size_t>(row_panels * pairs * kMR));
  uint32_t* ap = a_packed.data();
  parallel_chunks(row_panels, balanced_chunks(row_panels), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t p = 0; p < pairs; ++p)
        for (int64_t r = 0; r < kMR; ++r) {
          const int64_t m = i * kMR + r, k = 2 * p;
          uint32_t v = 0;
          if (m < M) {
            const uint32_t lo = bf16(A[m * K + k]).bits, hi = k + 1 < K ? bf16(A[m * K + k + 1]).bits : 0u;
            v = lo | hi << 16;
          }
          ap[(i * pairs + p) * kMR + r] = v;
        }
  });
  // Column tiles (two panels) in chunks: every C element is summed in one order, whoever computes it.
  parallel_chunks(tiles, balanced_chunks(tiles), [&](int64_t t_begin, int64_t t_end, int) {
    alignas(64) uint16_t b[2][kKC / 2 * 32];
    for (int64_t tc = t_begin; tc < t_end; tc += kNC)
      for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0), kp = (kc + 1) / 2;
        for (int64_t t = tc; t < std::min(t_end, tc + kNC); ++t) {
          const int64_t j = 2 * t;
          interleave(panels + j * K * kP, k0, kc, b[0]);
          if (j + 1 < n_panels) interleave(panels + (j + 1) * K * kP, k0, kc, b[1]);
          else std::memset(b[1], 0, sizeof b[1]);
          const int64_t nr = std::min<int64_t>(2 * kP, N - j * kP);
          for (int64_t i = 0; i < row_panels; ++i)
            tile(kp, ap + (i * pairs + k0 / 2) * kMR, b[0], b[1], C + i * kMR * N + j * kP, N, k0 > 0,
                 std::min(kMR, M - i * kMR), nr);
        }
      }
  });
}

}  // namespace tern::kernels
