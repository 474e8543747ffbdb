// AVX512_VNNI: the EVEX vpdpbusd, on 256-bit registers (AVX512VL) except in the four-chunk steps of 4-bit
// blocks of 32 (quad_steps), which take 512 bits — 128 weights a row per step.
#include "kernels/cpu/x86/gemv_nbits_i8_impl.h"

namespace tern::kernels {
namespace {

struct DotAvx512Vnni {
  static constexpr bool kZmm = true;
  static constexpr int32_t kW8Offset = 0;
  static __m256i u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m256i u8s8_2(__m256i acc, __m256i u0, __m256i s0, __m256i u1, __m256i s1) { return u8s8(u8s8(acc, u0, s0), u1, s1); }
  static __m256i w8(__m256i acc, __m256i w, __m256i s) { return u8s8(acc, w, s); }
};

// rows4's steps over chunks c … c + 3 with 512-bit registers: the low half of each is rows4's two-chunk step
// over c, c + 1 (acc), the high half over c + 2, c + 3 (acc_b), the same integer and float operations lane
// for lane as the 256-bit tiers, so the results are theirs bit for bit. acc and acc_b are zero on entry.
template <class Dot, int R>
int64_t quad_steps(const Int8Row& x, const NBitsWeights& w, const uint8_t* const* q, const float* const* ws, int64_t row_bytes,
                   int64_t chunks, bool folded, __m256* acc, __m256* acc_b) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);  // chunk c + i's scale to lanes 4i …
  __m512 a[R];
  for (int r = 0; r < R; ++r) a[r] = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + 4 <= chunks; c += 4) {
    const __m512i x01 = _mm512_loadu_si512(x.q + 32 * c), x23 = _mm512_loadu_si512(x.q + 32 * c + 64);  // [lo | hi] of a pair
    const __m512i x_lo = _mm512_shuffle_i64x2(x01, x23, 0x44), x_hi = _mm512_shuffle_i64x2(x01, x23, 0xEE);
    const int32_t* cs = x.chunk_sum + c;
    const __m512i from = folded ? _mm512_setr_epi32(-8 * cs[0], 0, 0, 0, -8 * cs[1], 0, 0, 0, -8 * cs[2], 0, 0, 0, -8 * cs[3], 0, 0, 0)
                                : _mm512_setzero_si512();
    const __m512 xs = _mm512_permutexvar_ps(spread, _mm512_broadcast_f32x4(_mm_loadu_ps(x.scale + c)));
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = q[r] + 16 * c;
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchRows * row_bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchRows * row_bytes + 32), _MM_HINT_T0);
      const __m512i v = _mm512_loadu_si512(p);
      __m512i dot = _mm512_dpbusd_epi32(from, _mm512_and_si512(v, nibble), x_lo);
      dot = _mm512_dpbusd_epi32(dot, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble), x_hi);
      const __m512 s = _mm512_permutexvar_ps(spread, _mm512_broadcast_f32x4(_mm_loadu_ps(ws[r] + c)));
      a[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(s, xs), a[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_castps512_ps256(a[r]);
    acc_b[r] = _mm512_extractf32x8_ps(a[r], 1);
  }
  return c;
}

}  // namespace

void gemv_nbits_i8_avx512vnni(const Int8Row& x, const NBitsWeights& w, int64_t n0, int64_t n1, float* y) {
  gemv_rows<DotAvx512Vnni>(x, w, n0, n1, y);
}

}  // namespace tern::kernels
