// AVX2: vpmaddubsw multiplies u8·s8 into int16 pairs, vpmaddwd sums them into int32. A 4-bit weight
// (≤ 15) times |x| ≤ 127 cannot saturate the int16 pair sum; an 8-bit one (≤ 255) could, so 8-bit
// weights are read as signed (w − 128, whose magnitude times 127, twice, still fits) and each block's sums
// start at 128·Σxq to match (gemv_nbits_i8_impl.h: rows8).
#include "kernels/cpu/x86/gemv_nbits_i8_impl.h"

namespace tern::kernels {
namespace {

struct DotAvx2 {
  static constexpr int32_t kW8Offset = 128;
  static constexpr bool kTwoChains = false;  // its 4-bit step ends in a 1-cycle add: no latency chain;
  static __m256i u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static __m256i u8s8_2(__m256i acc, __m256i u0, __m256i s0, __m256i u1, __m256i s1) {  // two 4-bit products:
    // |Σ| ≤ 2 · 2 · 15 · 127 still fits the int16 pairs, so one vpmaddwd serves both
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static __m256i w8(__m256i acc, __m256i w, __m256i s) {
    const __m256i ws = _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));  // w − 128 as int8
    return u8s8(acc, _mm256_abs_epi8(ws), _mm256_sign_epi8(s, ws));                     // |w'| · (s · sign w')
  }
};

}  // namespace

void gemv_nbits_i8_avx2(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  gemv_rows<DotAvx2>(x, M, w, n0, n1, y, ldy);
}

}  // namespace tern::kernels
