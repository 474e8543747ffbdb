// AVX-512: gemv_nbits' per-row kernel for the blocks read in the file's layout that AVX2 leaves compute-bound —
// 2-bit blocks and 4-bit blocks of 16. Sixteen bytes of a row widen to one register's 16 lanes, and a code becomes
// its float with one vpermps from a 16-entry table (the index's bits above the fourth are ignored: a 4-bit code
// needs only its shift, a 2-bit one a table of i & 3), where AVX2 masks and converts eight at a time. One 4096 x
// 14336 decode row, 2 threads, Xeon (tier amx, 38.7 GB/s read), AVX2's rows → these (bench/nbits_decode.py, the
// two libraries alternated, 3 rounds, medians): 2-bit block 32 3.27 → 2.52 ms, 64 2.38 → 1.93, 128 1.95 → 1.51;
// 4-bit block 16 2.77 → 2.48. Still bound by instructions (a shift, a vpermps and an FMA per 16 codes; 9-11 GB/s).
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/gemv_nbits_f32.h"
#include "kernels/cpu/x86/hsum.h"

namespace tern::kernels {
namespace {

// Output rows [n0, n0 + R): R weight rows share each load of x. A step is 16 bytes of a row: one block, two blocks
// side by side (8 bytes each: lanes 0-7 the first block's, 8-15 the second's, each scaled by its own), or a part.
template <int R, int Bits>
void rows(const float* xs, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t blob = w.block * Bits / 8, per_step = Bits == 2 ? 64 : 32;  // (values a step meets)
  const int64_t blocks_a_step = blob >= 16 ? 1 : 16 / blob, steps_a_block = blob >= 16 ? blob / 16 : 1;
  const __m512 codes = Bits == 2 ? _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3)
                                 : _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 acc[R];
  const uint8_t* q[R];
  const float* s[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    q[r] = w.data + (n0 + r) * k_blocks * blob;
    s[r] = w.scales + (n0 + r) * k_blocks;
  }
  for (int64_t kb = 0, step = 0; kb < k_blocks; kb += blocks_a_step) {
    __m512 sum[R], sum2[R];  // (two chains a row)
    for (int r = 0; r < R; ++r) sum[r] = sum2[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < steps_a_block; ++j, ++step) {
      const float* xb = xs + step * per_step;
      if constexpr (Bits == 2) {  // lane l's codes at bits 2t meet the values at 16t + l
        const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16), x2 = _mm512_loadu_ps(xb + 32), x3 = _mm512_loadu_ps(xb + 48);
        for (int r = 0; r < R; ++r) {
          const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q[r] + step * 16)));
          sum[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(v, codes), x0, sum[r]);
          sum2[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 2), codes), x1, sum2[r]);
          sum[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), codes), x2, sum[r]);
          sum2[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 6), codes), x3, sum2[r]);
        }
      } else {  // lane l's low nibble meets the value at l, its high nibble the one at 16 + l
        const __m512 x_even = _mm512_loadu_ps(xb), x_odd = _mm512_loadu_ps(xb + 16);
        for (int r = 0; r < R; ++r) {
          const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q[r] + step * 16)));
          sum[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(v, codes), x_even, sum[r]);
          sum2[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), codes), x_odd, sum2[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512 scale =
          blocks_a_step == 1 ? _mm512_set1_ps(s[r][kb]) : _mm512_insertf32x8(_mm512_set1_ps(s[r][kb]), _mm256_set1_ps(s[r][kb + 1]), 1);
      acc[r] = _mm512_fmadd_ps(_mm512_add_ps(sum[r], sum2[r]), scale, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[n0 + r] = hsum(acc[r]);
}

}  // namespace

bool gemv_nbits_rows_avx512_takes(const NBitsWeights& w) {
  if (w.grouped || w.N <= 0 || w.K <= 0) return false;
  const int64_t k_blocks = nbits_k_blocks(w), blob = w.block * w.bits / 8;
  // Whole steps of 16 bytes a row: two 8-byte blocks a step need an even count of them.
  const bool steps = blob % 16 == 0 || (blob == 8 && k_blocks % 2 == 0);
  return steps && ((w.bits == 2 && w.block >= 32) || (w.bits == 4 && w.block == 16));
}

int64_t nbits_rows_avx512_position(int64_t k, int64_t bits) {
  return bits == 2 ? k / 64 * 64 + (k % 4) * 16 + k % 64 / 4 : k / 32 * 32 + (k % 2) * 16 + k % 32 / 2;
}

void gemv_nbits_rows_avx512(const float* xs, const NBitsWeights& w, int64_t n0, int64_t n1, float* y) {
  const int64_t k_blocks = nbits_k_blocks(w);
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4)
    if (w.bits == 2) rows<4, 2>(xs, w, k_blocks, n, y);
    else rows<4, 4>(xs, w, k_blocks, n, y);
  for (; n < n1; ++n)
    if (w.bits == 2) rows<1, 2>(xs, w, k_blocks, n, y);
    else rows<1, 4>(xs, w, k_blocks, n, y);
}

}  // namespace tern::kernels
