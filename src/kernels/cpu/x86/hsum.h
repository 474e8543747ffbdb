// The sum of a float register's lanes, for the x86 kernel files that reduce one (gemv_nbits_impl.h's AVX2 rows, the
// int8 GEMV's tiers, the AVX-512 rows). In an unnamed namespace: each tier file keeps its own copy, built for its
// flags.
#pragma once
#include <immintrin.h>

namespace tern::kernels {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#if defined(__AVX512F__)
// Through memory: GCC 12 warns on the undefined register AVX-512's extracts pass (_mm512_reduce_add_ps among them),
// its bug 105593.
inline float hsum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return hsum(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
}
#endif

}  // namespace
}  // namespace tern::kernels
