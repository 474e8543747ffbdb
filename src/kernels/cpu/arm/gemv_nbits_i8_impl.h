// The int8-activation decode kernel for AArch64, written once over the tier's s8·s8 dot product (`Dot`) and
// included only by the arm/gemv_nbits_i8_<tier>.cpp files (internal linkage: each file's copy is compiled
// with its own tier's flags). The weights' layout and the activations' order are x86's (gemv_nbits_i8.h).
//
// Each block's integer sum is exact and reduced to one int32 before it meets its scales, so the float
// steps — and the bits of y — are the same at every AArch64 tier; they differ from x86's, whose float
// accumulators are 8 lanes wide, in the last bits only.
#pragma once
#include <arm_neon.h>

#include "kernels/cpu/gemv_nbits_i8.h"

namespace tern::kernels {
namespace {

// Σ_kb (zp[n,kb] − offset) · ws[n,kb] · xs·Σxq[kb]: the zero points' share of row n, after the products.
float zero_point_share(const Int8Row& x, const NBitsWeights& w, int64_t n, int64_t k_blocks, float offset) {
  const float* ws = w.scales + n * k_blocks;
  float share = 0;
  for (int64_t kb = 0; kb < k_blocks; ++kb) share += (nbits_zero_point(w, n, kb, k_blocks) - offset) * ws[kb] * x.sum[kb];
  return share;
}

#if defined(__ARM_FEATURE_DOTPROD)
// ARMv8.2 DotProd (the neondot tier and those above it): sdot adds four s8·s8 products into each int32 lane.
struct DotNeonDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
};
#endif

// 8-bit weights, read as w − 128 (signed, so an s8·s8 product takes them); the zero point shifts by 128. A block
// is read 16 bytes at a time, so blocks of 16 (GGUF's Q6_K and Q3_K sub-blocks, imported as 8-bit) are taken too.
template <class Dot, int R>
void rows8(const Int8Row& x, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t blob = w.block, pieces = w.block / 16;
  const uint8x16_t flip = vdupq_n_u8(0x80);
  float acc[R] = {};
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    int32x4_t dot[R];
    for (int r = 0; r < R; ++r) dot[r] = vdupq_n_s32(0);
    const int8_t* xq = x.q + kb * w.block;
    for (int64_t c = 0; c < pieces; ++c) {
      const int8x16_t x0 = vld1q_s8(xq + 16 * c);
      const bool ahead = (kb * blob + 16 * c) % 32 == 0;  // (a request every 32 bytes)
      for (int r = 0; r < R; ++r) {
        const uint8_t* p = w.data + ((n0 + r) * k_blocks + kb) * blob + 16 * c;
        if (ahead) __builtin_prefetch(p + kNBitsPrefetchRows * k_blocks * blob);
        dot[r] = Dot::dot(dot[r], vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p), flip)), x0);
      }
    }
    const float xs = x.scale[kb];
    for (int r = 0; r < R; ++r) acc[r] += static_cast<float>(vaddvq_s32(dot[r])) * (w.scales[(n0 + r) * k_blocks + kb] * xs);
  }
  for (int r = 0; r < R; ++r) y[n0 + r] = acc[r] - zero_point_share(x, w, n0 + r, k_blocks, 128.0f);
}

// 4-bit weights, a chunk (32 values, 16 bytes) at a time: its low nibbles meet the chunk's even activations,
// its high nibbles the odd ones (Int8Row's order per two chunks: [A evens | B evens | A odds | B odds]).
// Without zero points the default one (8) is taken off in the integers: −8·Σxq of the chunk, exact.
template <class Dot, int R>
void rows4(const Int8Row& x, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t row_bytes = k_blocks * w.block / 2, chunks_per_block = w.block / 32;
  const bool folded = !w.zp_packed && !w.zp_float;
  const uint8x16_t nibble = vdupq_n_u8(0x0F);
  float acc[R] = {};
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    int32_t total[R] = {};
    for (int64_t j = 0; j < chunks_per_block; ++j) {
      const int64_t c = kb * chunks_per_block + j;
      const int8_t* xc = x.q + 64 * (c / 2) + 16 * (c % 2);  // this chunk's evens; its odds 32 further
      const int8x16_t x_even = vld1q_s8(xc), x_odd = vld1q_s8(xc + 32);
      const int32_t fold = folded ? -8 * x.chunk_sum[c] : 0;
      for (int r = 0; r < R; ++r) {
        const uint8_t* p = w.data + (n0 + r) * row_bytes + 16 * c;
        __builtin_prefetch(p + kNBitsPrefetchRows * row_bytes);
        const uint8x16_t v = vld1q_u8(p);
        const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(v, nibble)), hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        total[r] += vaddvq_s32(Dot::dot(Dot::dot(vdupq_n_s32(0), lo, x_even), hi, x_odd)) + fold;
      }
    }
    const float xs = x.scale[kb];
    for (int r = 0; r < R; ++r) acc[r] += static_cast<float>(total[r]) * (w.scales[(n0 + r) * k_blocks + kb] * xs);
  }
  for (int r = 0; r < R; ++r) y[n0 + r] = acc[r] - (folded ? 0.0f : zero_point_share(x, w, n0 + r, k_blocks, 0.0f));
}

// Rows [n0, n1) for each of the M activation rows (y is [M, ldy]).
template <class Dot>
void gemv_rows(const Int8Row* rows, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* out, int64_t ldy) {
  const int64_t k_blocks = (w.K + w.block - 1) / w.block;
  for (int64_t m = 0; m < M; ++m) {
    const Int8Row& x = rows[m];
    float* y = out + m * ldy;
    int64_t n = n0;
    if (w.bits == 4) {
      for (; n + 4 <= n1; n += 4) rows4<Dot, 4>(x, w, k_blocks, n, y);
      for (; n < n1; ++n) rows4<Dot, 1>(x, w, k_blocks, n, y);
    } else {
      for (; n + 4 <= n1; n += 4) rows8<Dot, 4>(x, w, k_blocks, n, y);
      for (; n < n1; ++n) rows8<Dot, 1>(x, w, k_blocks, n, y);
    }
  }
}

}  // namespace
}  // namespace tern::kernels
