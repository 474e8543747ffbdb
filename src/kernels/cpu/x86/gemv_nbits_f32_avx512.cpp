// AVX-512: gemv_nbits_f32.h's kernel a whole 16-row group per register. A code becomes its float with one
// vpermps from the table 0..15 (the index's bits above the fourth are ignored, so a code needs only the shift),
// where AVX2 masks and converts; a pair of 2-bit codes is one vpermps from its table of sums, where AVX2 takes two
// and a blend.
#include <immintrin.h>

#include "kernels/cpu/gemv_nbits_f32_impl.h"

namespace tern::kernels {
namespace {

struct ZmmLanes {
  using I = __m512i;
  using F = __m512;
  static constexpr int64_t kRows = 16;
  static void prefetch(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p + kF32GroupPrefetchBytes), _MM_HINT_T1); }
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  template <int S, int Bits>
  static F code(I v) {
    const __m512i shifted = S == 0 ? v : _mm512_srli_epi32(v, S);
    if constexpr (Bits == 8)  // (a byte: masked and converted, past the table's 16 entries)
      return _mm512_cvtepi32_ps(S == 24 ? shifted : _mm512_and_si512(shifted, _mm512_set1_epi32(0xFF)));
    else return _mm512_permutexvar_ps(shifted, _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  }
  template <int S>
  static F pair_sum(I v, const float* table) {
    return _mm512_permutexvar_ps(S == 0 ? v : _mm512_srli_epi32(v, S), _mm512_loadu_ps(table));
  }
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load_f(const float* p) { return _mm512_loadu_ps(p); }
  static F load_f16(const f16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F load_u8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fma_by(F a, float b, F c) { return _mm512_fmadd_ps(a, _mm512_set1_ps(b), c); }
  static F fnma_by(F a, float b, F c) { return _mm512_fnmadd_ps(a, _mm512_set1_ps(b), c); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

void gemv_nbits_f32_avx512(const FloatRow* x, int64_t M, const NBitsWeights& w, int64_t g0, int64_t g1, float* y, int64_t ldy) {
  grouped_f32<ZmmLanes, 4>(x, M, w, g0, g1, y, ldy);
}

}  // namespace tern::kernels
