// gemm_integer's dot products on vpdpbusd, written once over the register set `V` and included only by
// x86/gemm_integer_avxvnni.cpp (256-bit VEX) and x86/gemm_integer_avx512vnni.cpp (512-bit EVEX). Internal
// linkage: each file's copy is built for its own tier's flags.
//
// dots[m, n] = Σ_k a[m, k] · s[n, k]: `a` the activations' uint8 codes, s weight row n's bytes as int8 (uint8
// weights flipped to b − 128 as they are loaded: one xor). A tile is up to four activation rows by four weight
// rows, sixteen accumulators: each weight load serves every activation row of the tile and each activation load
// every weight row; the weight rows (4 · K bytes) stay in L1 while the activation rows stream past them.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemm_integer.h"

namespace tern::kernels {
namespace {

// The four registers' lane sums, in order.
inline __m128i sum4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));  // [Σa Σb Σc Σd] per half
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

// Σ a[t] · s[t] over K's tail [k, K) past the whole registers, weight bytes as int8 (flipped for uint8 weights).
template <bool kFlip>
int32_t tail_dot(const uint8_t* a, const uint8_t* row, int64_t k, int64_t K) {
  int32_t s = 0;
  for (int64_t t = k; t < K; ++t) s += a[t] * static_cast<int8_t>(kFlip ? row[t] ^ 0x80 : row[t]);
  return s;
}

// MR activation rows by R weight rows (R 4 or 1) from weight row n. Each step asks for the next tile's lines at the
// same k into L2 (in the tile's first activation rows: the others find them in L1): the 4 rows of a tile are 4 streams a page or less long,
// which the hardware prefetchers alone leave short of the memory's rate. transformers.js's q8 file of Llama-3.2-1B's shape, `tern bench
// --prompt-tokens 16
// --new-tokens 64 --threads 2`, Xeon (tier amx), 3 rounds alternated: 18.2–19.2 → 21.2–21.9 tok/s; into L1: about the
// same in bench-op; 8 KB ahead in the same rows 19.3–19.9; the rows one at a time, 4 KB ahead, 20.6–21.0; none of it
// as NTA: 8.3.
template <class V, bool kFlip, int MR, int R>
void dot_tile(const uint8_t* a, int64_t K, const uint8_t* w, int64_t n, bool prefetch, int32_t* dots, int64_t N) {
  using I = typename V::I;
  I acc[MR][R];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < R; ++r) acc[m][r] = V::zero();
  const I flip = V::set1_8(static_cast<char>(0x80));
  int64_t k = 0;
  for (; k + V::kBytes <= K; k += V::kBytes) {
    I b[R];
    for (int r = 0; r < R; ++r) {
      if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(w + (n + r + R) * K + k), _MM_HINT_T1);  // (past the end: a hint)
      b[r] = V::load(w + (n + r) * K + k);
      if (kFlip) b[r] = V::bit_xor(b[r], flip);
    }
    for (int m = 0; m < MR; ++m) {
      const I x = V::load(a + m * K + k);
      for (int r = 0; r < R; ++r) acc[m][r] = V::dot(acc[m][r], x, b[r]);
    }
  }
  for (int m = 0; m < MR; ++m) {
    __m256i h[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int r = 0; r < R; ++r) h[r] = V::half(acc[m][r]);
    alignas(16) int32_t sums[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(sums), sum4(h[0], h[1], h[2], h[3]));
    for (int r = 0; r < R; ++r) dots[m * N + n + r] = sums[r] + tail_dot<kFlip>(a + m * K, w + (n + r) * K, k, K);
  }
}

// Weight rows n (R of them) against every activation row, four at a time.
template <class V, bool kFlip, int R>
void dot_rows(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, int64_t n, int32_t* dots, int64_t N) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) dot_tile<V, kFlip, 4, R>(a + m * K, K, w, n, m == 0, dots + m * N, N);
  switch (M - m) {
    case 3: dot_tile<V, kFlip, 3, R>(a + m * K, K, w, n, m == 0, dots + m * N, N); break;
    case 2: dot_tile<V, kFlip, 2, R>(a + m * K, K, w, n, m == 0, dots + m * N, N); break;
    case 1: dot_tile<V, kFlip, 1, R>(a + m * K, K, w, n, m == 0, dots + m * N, N); break;
    default: break;
  }
}

// Fewer than four activation rows (decode, a short speculative check): the weight rows one after another, so each
// thread's weights are one run of memory, the hardware prefetchers' easiest stream, with two chains of accumulators
// (one chain is bound by vpdpbusd's latency, not the loads). On Zen 5 (2 vCPUs, tier avx512bf16), a loop over the
// 113 products of Llama-3.2-1B's q8 decode step, 15 steps a variant, alternated: the 4-row tiles with their prefetch
// 47.3 GB/s, one row at a time 66.8, with a prefetch 2 KB ahead into L1 62.4, 4 KB into L2 65.1 — so none. (On a
// Xeon the 4-row tiles' prefetch had been worth 17%: its four streams 2 KB apart, not one.)
template <class V, bool kFlip, int MR>
void stream_rows(const uint8_t* a, int64_t K, const uint8_t* w, int64_t n0, int64_t n1, int32_t* dots, int64_t N) {
  using I = typename V::I;
  const I flip = V::set1_8(static_cast<char>(0x80));
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w + n * K;
    I acc[2][MR];
    for (int m = 0; m < MR; ++m) acc[0][m] = acc[1][m] = V::zero();
    int64_t k = 0;
    for (; k + 2 * V::kBytes <= K; k += 2 * V::kBytes)
      for (int u = 0; u < 2; ++u) {
        const int64_t at = k + u * V::kBytes;
        I b = V::load(row + at);
        if (kFlip) b = V::bit_xor(b, flip);
        for (int m = 0; m < MR; ++m) acc[u][m] = V::dot(acc[u][m], V::load(a + m * K + at), b);
      }
    for (; k + V::kBytes <= K; k += V::kBytes) {
      I b = V::load(row + k);
      if (kFlip) b = V::bit_xor(b, flip);
      for (int m = 0; m < MR; ++m) acc[0][m] = V::dot(acc[0][m], V::load(a + m * K + k), b);
    }
    for (int m = 0; m < MR; ++m) {
      const __m256i h = _mm256_add_epi32(V::half(acc[0][m]), V::half(acc[1][m]));
      dots[m * N + n] = _mm_cvtsi128_si32(sum4(h, h, h, h)) + tail_dot<kFlip>(a + m * K, row, k, K);
    }
  }
}

template <class V, bool kFlip>
void dots_at_width(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, int64_t n0, int64_t n1, int32_t* dots, int64_t N) {
  switch (M) {
    case 1: return stream_rows<V, kFlip, 1>(a, K, w, n0, n1, dots, N);
    case 2: return stream_rows<V, kFlip, 2>(a, K, w, n0, n1, dots, N);
    case 3: return stream_rows<V, kFlip, 3>(a, K, w, n0, n1, dots, N);
    default: break;
  }
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) dot_rows<V, kFlip, 4>(a, M, K, w, n, dots, N);
  for (; n < n1; ++n) dot_rows<V, kFlip, 1>(a, M, K, w, n, dots, N);
}

template <class V>
void integer_dots(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, bool flip, int64_t n0, int64_t n1, int32_t* dots, int64_t N) {
  if (flip) dots_at_width<V, true>(a, M, K, w, n0, n1, dots, N);
  else dots_at_width<V, false>(a, M, K, w, n0, n1, dots, N);
}

}  // namespace
}  // namespace tern::kernels
