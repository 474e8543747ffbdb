// FEAT_I8MM: smmla multiplies a 2×8 by an 8×2 block of int8 into a 2×2 of int32 in one instruction, so two
// activation rows (a batch's decode, beams, a short prompt) meet two weight rows with half sdot's
// instructions, each weight byte loaded once for both rows. A lone activation row (one sequence's decode) has
// no second row to pair: it takes sdot, as the neondot tier does. Each block's sum is an exact integer and
// meets its scales in the neondot tier's order, so y has that tier's bits (its test compares them).
#include "kernels/cpu/arm/gemv_nbits_i8_impl.h"

namespace tern::kernels {
namespace {

// A 2×16 operand as smmla's two 2×8 halves: [a 0..7 | b 0..7] and [a 8..15 | b 8..15].
struct Pair {
  int8x16_t first, last;
};
Pair pair(int8x16_t a, int8x16_t b) {
  const int64x2_t a64 = vreinterpretq_s64_s8(a), b64 = vreinterpretq_s64_s8(b);
  return {vreinterpretq_s8_s64(vzip1q_s64(a64, b64)), vreinterpretq_s8_s64(vzip2q_s64(a64, b64))};
}
// acc += [x0·w0, x0·w1, x1·w0, x1·w1] over 16 values.
int32x4_t mmla(int32x4_t acc, const Pair& x, const Pair& w) { return vmmlaq_s32(vmmlaq_s32(acc, x.first, w.first), x.last, w.last); }

// Adds one block's exact sums (`dot[p]` for weight rows n + 2p, n + 2p + 1; `fold[m]`, 4-bit weights' default
// zero point, per activation row) into acc[m][r] with the block's scales, in rows4/rows8's float steps.
template <int P>
void add_block(const Int8Row* x, const NBitsWeights& w, int64_t k_blocks, int64_t n, int64_t kb, const int32x4_t* dot, const int32_t* fold,
               float (*acc)[2 * P]) {
  for (int p = 0; p < P; ++p) {
    int32_t t[4];
    vst1q_s32(t, dot[p]);
    for (int m = 0; m < 2; ++m)
      for (int j = 0; j < 2; ++j) {
        const int r = 2 * p + j;
        acc[m][r] += static_cast<float>(t[2 * m + j] + fold[m]) * (w.scales[(n + r) * k_blocks + kb] * x[m].scale[kb]);
      }
  }
}

// Weight rows [n, n + 2P) for activation rows x[0], x[1]; 4-bit weights in Int8Row's order, as rows4.
template <int P>
void pairs4(const Int8Row* x, const NBitsWeights& w, int64_t k_blocks, int64_t n, float* y, int64_t ldy) {
  const int64_t row_bytes = k_blocks * w.block / 2, chunks_per_block = w.block / 32;
  const bool folded = !w.zp_packed && !w.zp_float;
  const uint8x16_t nibble = vdupq_n_u8(0x0F);
  float acc[2][2 * P] = {};
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    int32x4_t dot[P];
    for (int p = 0; p < P; ++p) dot[p] = vdupq_n_s32(0);
    int32_t fold[2] = {};
    for (int64_t j = 0; j < chunks_per_block; ++j) {
      const int64_t c = kb * chunks_per_block + j, at = 64 * (c / 2) + 16 * (c % 2);  // this chunk's evens; its odds 32 further
      const Pair x_even = pair(vld1q_s8(x[0].q + at), vld1q_s8(x[1].q + at));
      const Pair x_odd = pair(vld1q_s8(x[0].q + at + 32), vld1q_s8(x[1].q + at + 32));
      if (folded)
        for (int m = 0; m < 2; ++m) fold[m] -= 8 * x[m].chunk_sum[c];
      for (int p = 0; p < P; ++p) {
        const uint8_t* p0 = w.data + (n + 2 * p) * row_bytes + 16 * c;
        __builtin_prefetch(p0 + kNBitsPrefetchRows * row_bytes);
        __builtin_prefetch(p0 + (kNBitsPrefetchRows + 1) * row_bytes);
        const uint8x16_t v0 = vld1q_u8(p0), v1 = vld1q_u8(p0 + row_bytes);
        const Pair lo = pair(vreinterpretq_s8_u8(vandq_u8(v0, nibble)), vreinterpretq_s8_u8(vandq_u8(v1, nibble)));
        const Pair hi = pair(vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(v1, 4)));
        dot[p] = mmla(mmla(dot[p], x_even, lo), x_odd, hi);
      }
    }
    add_block<P>(x, w, k_blocks, n, kb, dot, fold, acc);
  }
  for (int m = 0; m < 2; ++m)
    for (int r = 0; r < 2 * P; ++r) y[m * ldy + n + r] = acc[m][r] - (folded ? 0.0f : zero_point_share(x[m], w, n + r, k_blocks, 0.0f));
}

// Weight rows [n, n + 2P) for activation rows x[0], x[1]; 8-bit weights read as w − 128, as rows8.
template <int P>
void pairs8(const Int8Row* x, const NBitsWeights& w, int64_t k_blocks, int64_t n, float* y, int64_t ldy) {
  const int64_t blob = w.block, pieces = w.block / 16;  // (16 bytes at a time, as rows8: blocks of 16 too)
  const uint8x16_t flip = vdupq_n_u8(0x80);
  auto weights = [&](const uint8_t* p) { return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p), flip)); };
  float acc[2][2 * P] = {};
  const int32_t no_fold[2] = {};
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    int32x4_t dot[P];
    for (int p = 0; p < P; ++p) dot[p] = vdupq_n_s32(0);
    const int8_t *x0 = x[0].q + kb * w.block, *x1 = x[1].q + kb * w.block;
    for (int64_t c = 0; c < pieces; ++c) {
      const Pair xa = pair(vld1q_s8(x0 + 16 * c), vld1q_s8(x1 + 16 * c));
      const bool ahead = (kb * blob + 16 * c) % 32 == 0;
      for (int p = 0; p < P; ++p) {
        const uint8_t* p0 = w.data + ((n + 2 * p) * k_blocks + kb) * blob + 16 * c;
        const uint8_t* p1 = p0 + k_blocks * blob;
        if (ahead) {
          __builtin_prefetch(p0 + kNBitsPrefetchRows * k_blocks * blob);
          __builtin_prefetch(p1 + kNBitsPrefetchRows * k_blocks * blob);
        }
        dot[p] = mmla(dot[p], xa, pair(weights(p0), weights(p1)));
      }
    }
    add_block<P>(x, w, k_blocks, n, kb, dot, no_fold, acc);
  }
  for (int m = 0; m < 2; ++m)
    for (int r = 0; r < 2 * P; ++r) y[m * ldy + n + r] = acc[m][r] - zero_point_share(x[m], w, n + r, k_blocks, 128.0f);
}

}  // namespace

void gemv_nbits_i8_neoni8mm(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const int64_t k_blocks = (w.K + w.block - 1) / w.block;
  int64_t m = 0;
  for (; m + 2 <= M; m += 2) {
    const Int8Row* xm = x + m;
    float* ym = y + m * ldy;
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) w.bits == 4 ? pairs4<2>(xm, w, k_blocks, n, ym, ldy) : pairs8<2>(xm, w, k_blocks, n, ym, ldy);
    for (; n + 2 <= n1; n += 2) w.bits == 4 ? pairs4<1>(xm, w, k_blocks, n, ym, ldy) : pairs8<1>(xm, w, k_blocks, n, ym, ldy);
    if (n < n1) gemv_rows<DotNeonDot>(xm, 2, w, n, n1, ym, ldy);
  }
  if (m < M) gemv_rows<DotNeonDot>(x + m, M - m, w, n0, n1, y + m * ldy, ldy);
}

}  // namespace tern::kernels
