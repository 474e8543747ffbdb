// MatMulBnb4's decode rows at tier avx2 (kernels/cpu/bnb4.h): each block's 16 points times its absmax in two
// registers, a code's value picked by two vpermps and a blend on its bit 3. A byte's two codes (the first in the high
// nibble) are put in element order by one byte unpack, so x is read as it lies.
#include <immintrin.h>

#include "kernels/cpu/bnb4.h"
#include "kernels/cpu/x86/hsum.h"

namespace tern::kernels {

void gemv_bnb4_avx2(const float* x, int64_t M, const Bnb4Weights& w, const float* table, int64_t n0, int64_t n1, float* y) {
  const int64_t K = w.K;
  const __m256 low_points = _mm256_loadu_ps(table), high_points = _mm256_loadu_ps(table + 8);
  constexpr int64_t kMaxRows = 8;  // (bnb4.cpp's kGemvRows)
  for (int64_t n = n0; n < n1; ++n) {
    __m256 acc[kMaxRows][2];  // (two chains: each FMA waits on none of the group's other)
    for (int64_t m = 0; m < M; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
    const uint8_t* codes = w.codes + n * K / 2;
    const float* absmax = w.absmax + n * K / w.block;
    for (int64_t b = 0; b < K / w.block; ++b) {
      const __m256 s = _mm256_set1_ps(absmax[b]);
      const __m256 lo = _mm256_mul_ps(low_points, s), hi = _mm256_mul_ps(high_points, s);
      for (int64_t g = b * w.block; g < (b + 1) * w.block; g += 16) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + g / 2)), nibble = _mm_set1_epi8(15);
        const __m128i in_order = _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), nibble), _mm_and_si128(bytes, nibble));
        const __m256i first = _mm256_cvtepu8_epi32(in_order), second = _mm256_cvtepu8_epi32(_mm_srli_si128(in_order, 8));
        // (vblendvps reads each lane's sign bit: the code's bit 3 shifted there picks the high 8 points)
        const __m256 w0 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, first), _mm256_permutevar8x32_ps(hi, first),
                                           _mm256_castsi256_ps(_mm256_slli_epi32(first, 28)));
        const __m256 w1 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, second), _mm256_permutevar8x32_ps(hi, second),
                                           _mm256_castsi256_ps(_mm256_slli_epi32(second, 28)));
        for (int64_t m = 0; m < M; ++m) {
          const float* xg = x + m * K + g;
          acc[m][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xg), acc[m][0]);
          acc[m][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xg + 8), acc[m][1]);
        }
      }
    }
    for (int64_t m = 0; m < M; ++m) y[m * w.N + n] = hsum(_mm256_add_ps(acc[m][0], acc[m][1]));
  }
}

}  // namespace tern::kernels
