#include "kernels/cpu/gemv_nbits.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace tern::kernels {
namespace {

// Byte j of a block holds elements 2j (low nibble) and 2j + 1 (high nibble). The activations are
// reordered once per call so that, per group of 16 elements, the 8 even ones come first and the 8 odd
// ones next: then 8 bytes widened to 8 lanes give the low nibbles for the first half, the high nibbles
// for the second, with no shuffles in the inner loop.
constexpr int64_t kGroup = 16;

// The block's zero point: given as floats (a GGUF Q4_1 block's −min/scale), packed, or the default.
float zero_point(const NBitsWeights& w, int64_t n, int64_t kb, int64_t k_blocks) {
  if (w.zp_float) return w.zp_float[n * k_blocks + kb];
  if (!w.zp_packed) return static_cast<float>(int64_t{1} << (w.bits - 1));
  if (w.bits == 8) return w.zp_packed[n * k_blocks + kb];
  const int64_t row = (k_blocks + 1) / 2;
  return (w.zp_packed[n * row + kb / 2] >> (4 * (kb % 2))) & 0xF;
}

#if defined(__AVX2__) && defined(__FMA__)
float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Output columns [n0, n0 + R) for one activation row: R weight rows share each load of x.
template <int R, int Bits>
void rows(const float* xs, const float* xsum, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t blob = w.block * Bits / 8, groups = w.block / kGroup;
  const __m256i low = _mm256_set1_epi32(0xF);
  __m256 acc[R];
  float zp_part[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    zp_part[r] = 0;
  }
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    __m256 block_acc[R];
    const uint8_t* q[R];
    for (int r = 0; r < R; ++r) {
      block_acc[r] = _mm256_setzero_ps();
      q[r] = w.data + ((n0 + r) * k_blocks + kb) * blob;
    }
    const float* xb = xs + kb * w.block;
    for (int64_t g = 0; g < groups; ++g) {
      const __m256 x_even = _mm256_loadu_ps(xb + g * kGroup), x_odd = _mm256_loadu_ps(xb + g * kGroup + 8);
      for (int r = 0; r < R; ++r) {
        if constexpr (Bits == 4) {  // 8 bytes: the even elements' low nibbles, the odd ones' high nibbles
          const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q[r] + g * 8)));
          block_acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, low)), x_even, block_acc[r]);
          block_acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), x_odd, block_acc[r]);
        } else {  // 16 bytes, one element each, in the same even/odd order
          const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q[r] + g * 16));
          const __m128i even = _mm_and_si128(bytes, _mm_set1_epi16(0xFF)), odd = _mm_srli_epi16(bytes, 8);
          block_acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(even)), x_even, block_acc[r]);
          block_acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(odd)), x_odd, block_acc[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const float scale = w.scales[(n0 + r) * k_blocks + kb];
      acc[r] = _mm256_fmadd_ps(block_acc[r], _mm256_set1_ps(scale), acc[r]);
      zp_part[r] += zero_point(w, n0 + r, kb, k_blocks) * scale * xsum[kb];
    }
  }
  for (int r = 0; r < R; ++r) y[n0 + r] = hsum(acc[r]) - zp_part[r];
}
#else
// Portable path: the same arithmetic one element at a time.
template <int R, int Bits>
void rows(const float* xs, const float* xsum, const NBitsWeights& w, int64_t k_blocks, int64_t n0, float* y) {
  const int64_t blob = w.block * Bits / 8;
  for (int r = 0; r < R; ++r) {
    float acc = 0, zp_part = 0;
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const uint8_t* q = w.data + ((n0 + r) * k_blocks + kb) * blob;
      const float* xb = xs + kb * w.block;
      float block_acc = 0;
      for (int64_t g = 0; g < w.block / kGroup; ++g)
        for (int i = 0; i < 8; ++i) {
          const float lo = Bits == 4 ? static_cast<float>(q[g * 8 + i] & 0xF) : static_cast<float>(q[g * 16 + 2 * i]);
          const float hi = Bits == 4 ? static_cast<float>(q[g * 8 + i] >> 4) : static_cast<float>(q[g * 16 + 2 * i + 1]);
          block_acc += lo * xb[g * kGroup + i] + hi * xb[g * kGroup + 8 + i];
        }
      const float scale = w.scales[(n0 + r) * k_blocks + kb];
      acc += block_acc * scale;
      zp_part += zero_point(w, n0 + r, kb, k_blocks) * scale * xsum[kb];
    }
    y[n0 + r] = acc - zp_part;
  }
}
#endif

}  // namespace

bool gemv_nbits_supported(const NBitsWeights& w) {
  return (w.bits == 4 || w.bits == 8) && w.block % kGroup == 0 && w.N > 0 && w.K > 0;
}

void gemv_nbits(const float* x, int64_t M, const NBitsWeights& w, float* y) {
  const int64_t k_blocks = (w.K + w.block - 1) / w.block, padded = k_blocks * w.block;
  // Reordered activations (zero past K: a last partial block's padding contributes nothing) and their
  // block sums; kept per thread, so after the first call nothing is allocated.
  thread_local std::vector<float> xs, xsum;
  xs.assign(static_cast<size_t>(M * padded), 0.0f);
  xsum.assign(static_cast<size_t>(M * k_blocks), 0.0f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < w.K; ++k) {
      const int64_t g = k / kGroup, i = k % kGroup;
      xs[static_cast<size_t>(m * padded + g * kGroup + (i % 2) * 8 + i / 2)] = x[m * w.K + k];
      xsum[static_cast<size_t>(m * k_blocks + k / w.block)] += x[m * w.K + k];
    }
  const int64_t quads = w.N / 4;
  const int threads = w.N * w.K < (int64_t{1} << 16) ? 1 : omp_get_max_threads();
  for (int64_t m = 0; m < M; ++m) {
    const float* xm = xs.data() + m * padded;
    const float* sm = xsum.data() + m * k_blocks;
    float* ym = y + m * w.N;
    if (w.bits == 4) {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t p = 0; p < quads; ++p) rows<4, 4>(xm, sm, w, k_blocks, 4 * p, ym);
      for (int64_t n = 4 * quads; n < w.N; ++n) rows<1, 4>(xm, sm, w, k_blocks, n, ym);
    } else {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t p = 0; p < quads; ++p) rows<4, 8>(xm, sm, w, k_blocks, 4 * p, ym);
      for (int64_t n = 4 * quads; n < w.N; ++n) rows<1, 8>(xm, sm, w, k_blocks, n, ym);
    }
  }
}

}  // namespace tern::kernels
