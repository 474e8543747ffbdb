// AVX512_VNNI: the EVEX vpdpbusd — on 256-bit registers (AVX512VL) for 8-bit weights, on 512-bit ones for
// grouped 4-bit weights, a whole 16-row group per register.
#include "kernels/cpu/x86/gemv_nbits_i8_impl.h"

namespace tern::kernels {
namespace {

struct DotAvx512Vnni {
  static constexpr int32_t kW8Offset = 0;
  static constexpr bool kTwoChains = true;  // groups: vpdpbusd is a 5-cycle chain;
  static __m256i u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m256i u8s8_2(__m256i acc, __m256i u0, __m256i s0, __m256i u1, __m256i s1) { return u8s8(u8s8(acc, u0, s0), u1, s1); }
  static __m256i w8(__m256i acc, __m256i w, __m256i s) { return u8s8(acc, w, s); }
};

// groups's register set at 512 bits: the same operations lane for lane as Ymm's, 16 rows a register.
struct Zmm {
  using I = __m512i;
  using F = __m512;
  static constexpr int64_t kRows = 16;
  static constexpr bool kTwoChains = DotAvx512Vnni::kTwoChains;
  static constexpr int32_t kW8Offset = 0;
  static I zero_i() { return _mm512_setzero_si512(); }
  static I set1_i(int32_t v) { return _mm512_set1_epi32(v); }
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static I load_u8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static I times(I v, int32_t s) { return _mm512_mullo_epi32(v, _mm512_set1_epi32(s)); }
  static I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  static void nibbles(I v, I& lo, I& hi) {
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    lo = _mm512_and_si512(v, nibble);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
  }
  static I dots(I d, I lo_nibbles, int32_t lo, I hi_nibbles, int32_t hi) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(d, lo_nibbles, _mm512_set1_epi32(lo)), hi_nibbles, _mm512_set1_epi32(hi));
  }
  static I w8(I d, I q, int32_t four) { return _mm512_dpbusd_epi32(d, q, _mm512_set1_epi32(four)); }
  static F zero_f() { return _mm512_setzero_ps(); }
  static F set1_f(float v) { return _mm512_set1_ps(v); }
  static F load_f(const float* p) { return _mm512_loadu_ps(p); }
  static F load_h(const f16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F to_float(I v) { return _mm512_cvtepi32_ps(v); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static void store_f(float* p, F v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

void gemv_nbits_i8_avx512vnni(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  gemv_rows<DotAvx512Vnni, Zmm>(x, M, w, n0, n1, y, ldy);
}

}  // namespace tern::kernels
