// ARMv8.2 DotProd: gemm_integer's dot products on sdot, four s8·s8 products into each int32 lane. The codes are
// taken as u − 128 and uint8 weights as b − 128 as they are loaded (one eor each); gemm_integer.cpp adds the offsets'
// share back from the rows' and columns' sums. Used at tiers neondot and neoni8mm. A tile is up to four activation
// rows by four weight rows (16 accumulators, 21 of the 32 registers with the loads).
#include <arm_neon.h>

#include "kernels/cpu/gemm_integer.h"

namespace tern::kernels {
namespace {

template <bool kFlip, int MR, int R>
void dot_tile(const uint8_t* a, int64_t K, const uint8_t* w, int64_t n, int32_t* dots, int64_t N) {
  int32x4_t acc[MR][R];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < R; ++r) acc[m][r] = vdupq_n_s32(0);
  const uint8x16_t flip = vdupq_n_u8(0x80);
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    int8x16_t b[R];
    for (int r = 0; r < R; ++r) {
      const uint8x16_t v = vld1q_u8(w + (n + r) * K + k);
      b[r] = vreinterpretq_s8_u8(kFlip ? veorq_u8(v, flip) : v);
    }
    for (int m = 0; m < MR; ++m) {
      const int8x16_t x = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(a + m * K + k), flip));
      for (int r = 0; r < R; ++r) acc[m][r] = vdotq_s32(acc[m][r], x, b[r]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < R; ++r) {
      int32_t s = vaddvq_s32(acc[m][r]);
      const uint8_t* row = w + (n + r) * K;
      for (int64_t t = k; t < K; ++t)  // K's tail
        s += static_cast<int8_t>(a[m * K + t] ^ 0x80) * static_cast<int8_t>(kFlip ? row[t] ^ 0x80 : row[t]);
      dots[m * N + n + r] = s;
    }
}

template <bool kFlip, int R>
void dot_rows(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, int64_t n, int32_t* dots, int64_t N) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) dot_tile<kFlip, 4, R>(a + m * K, K, w, n, dots + m * N, N);
  switch (M - m) {
    case 3: dot_tile<kFlip, 3, R>(a + m * K, K, w, n, dots + m * N, N); break;
    case 2: dot_tile<kFlip, 2, R>(a + m * K, K, w, n, dots + m * N, N); break;
    case 1: dot_tile<kFlip, 1, R>(a + m * K, K, w, n, dots + m * N, N); break;
    default: break;
  }
}

template <bool kFlip>
void dots_flipped(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, int64_t n0, int64_t n1, int32_t* dots, int64_t N) {
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) dot_rows<kFlip, 4>(a, M, K, w, n, dots, N);
  for (; n < n1; ++n) dot_rows<kFlip, 1>(a, M, K, w, n, dots, N);
}

}  // namespace

void integer_dots_neondot(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, bool flip, int64_t n0, int64_t n1, int32_t* dots,
                          int64_t N) {
  if (flip) dots_flipped<true>(a, M, K, w, n0, n1, dots, N);
  else dots_flipped<false>(a, M, K, w, n0, n1, dots, N);
}

}  // namespace tern::kernels
