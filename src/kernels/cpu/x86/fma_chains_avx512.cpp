// peak.h's FMA chains on 512-bit registers.
#include <immintrin.h>

#include "kernels/cpu/peak.h"

namespace tern::kernels {

FmaChains fma_chains_avx512(int64_t iterations, float seed) {
  constexpr int kChains = 12;  // two FMA pipes × 4-cycle latency, with room
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c) * 1e-3f + seed);
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], mul, add);
  __m512 s = _mm512_setzero_ps();
  for (int c = 0; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float sum = 0;
  for (float v : lanes) sum += v;
  return {sum, 2.0 * 16 * kChains * static_cast<double>(iterations)};
}

}  // namespace tern::kernels
