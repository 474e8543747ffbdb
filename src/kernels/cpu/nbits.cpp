#include "kernels/cpu/nbits.h"

#include "kernels/cpu/parallel.h"

#include <algorithm>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <cmath>
#include <cstring>

namespace tern::kernels {

#if defined(__AVX2__) && defined(__FMA__)
namespace {
// 4-bit weights of rows [n0, n0 + 8) × 32 values from k (a 32-value chunk inside one block) to
// out[(k' − k)·ld + r], vectorized: each row's 16 bytes widen to 32 nibbles in k order, an 8×16 byte
// transpose (three rounds of unpacks) turns rows into columns, and each k's 8 values are one
// u8 → float conversion, (q − zp)·scale as the scalar loop computes it (the same bits). The scalar loop took ~3 ns a
// weight: 57% of the 1B-shape model's int4 prefill went to gemm_nbits' dequantization.
void dequantize_rows8_chunk4(const NBitsWeights& w, int64_t n0, int64_t k, int64_t k_blocks, float* out, int64_t ld) {
  const int64_t kb = k / w.block, blob = w.block / 2;
  alignas(32) float scale[8], zero[8];
  __m128i lo_k[8], hi_k[8];  // per row: values k..k+15, k+16..k+31 as bytes
  for (int r = 0; r < 8; ++r) {
    const int64_t n = n0 + r;
    scale[r] = w.scales[n * k_blocks + kb];
    zero[r] = nbits_zero_point(w, n, kb, k_blocks);
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.data + (n * k_blocks + kb) * blob + (k % w.block) / 2));
    const __m128i lo = _mm_and_si128(bytes, _mm_set1_epi8(0x0F)), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F));
    lo_k[r] = _mm_unpacklo_epi8(lo, hi);
    hi_k[r] = _mm_unpackhi_epi8(lo, hi);
  }
  const __m256 vs = _mm256_load_ps(scale), vz = _mm256_load_ps(zero);
  for (int half = 0; half < 2; ++half) {
    const __m128i* v = half ? hi_k : lo_k;
    __m128i t[8], u[8];
    for (int p = 0; p < 4; ++p) {  // rows 2p, 2p+1 interleaved: [k0: r r', k1: r r', …]
      t[2 * p] = _mm_unpacklo_epi8(v[2 * p], v[2 * p + 1]);
      t[2 * p + 1] = _mm_unpackhi_epi8(v[2 * p], v[2 * p + 1]);
    }
    for (int q = 0; q < 2; ++q)  // four rows per k: u[4q + i] holds k = 4i' .. for rows 4q..4q+3
      for (int i = 0; i < 2; ++i) {
        u[4 * q + 2 * i] = _mm_unpacklo_epi16(t[4 * q + i], t[4 * q + 2 + i]);
        u[4 * q + 2 * i + 1] = _mm_unpackhi_epi16(t[4 * q + i], t[4 * q + 2 + i]);
      }
    for (int i = 0; i < 4; ++i) {  // eight rows per k, two k per register
      const __m128i pair[2] = {_mm_unpacklo_epi32(u[i], u[4 + i]), _mm_unpackhi_epi32(u[i], u[4 + i])};
      for (int j = 0; j < 2; ++j)
        for (int e = 0; e < 2; ++e) {
          const int64_t kk = 16 * half + 4 * i + 2 * j + e;
          const __m128i bytes8 = e ? _mm_srli_si128(pair[j], 8) : pair[j];
          const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes8));
          _mm256_storeu_ps(out + kk * ld, _mm256_mul_ps(_mm256_sub_ps(q, vz), vs));
        }
    }
  }
}
}  // namespace
#endif

void dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld) {
  const int64_t k_blocks = (w.K + w.block - 1) / w.block;
#if defined(__AVX2__) && defined(__FMA__)
  if (w.bits == 4 && w.block % 32 == 0 && (n1 - n0) % 8 == 0 && k0 % 32 == 0 && (k1 - k0) % 32 == 0) {
    for (int64_t n = n0; n < n1; n += 8)
      for (int64_t k = k0; k < k1; k += 32) dequantize_rows8_chunk4(w, n, k, k_blocks, out + (k - k0) * ld + (n - n0), ld);
    return;
  }
#endif
  const int64_t blob = w.block * w.bits / 8;
  const uint32_t mask = (1u << w.bits) - 1;
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t kb = k0 / w.block; kb * w.block < k1; ++kb) {
      const float scale = w.scales[n * k_blocks + kb];
      const float zp = nbits_zero_point(w, n, kb, k_blocks);
      const uint8_t* src = w.data + (n * k_blocks + kb) * blob;
      const int64_t begin = std::max(k0, kb * w.block), end = std::min({k1, (kb + 1) * w.block, w.K});
      for (int64_t k = begin; k < end; ++k) {
        const int64_t bit = (k - kb * w.block) * w.bits;
        const uint32_t q = (src[bit / 8] >> (bit % 8)) & mask;
        out[(k - k0) * ld + (n - n0)] = (static_cast<float>(q) - zp) * scale;
      }
    }
}

void dequantize_nbits_transposed(const NBitsWeights& w, float* out) { dequantize_nbits_block(w, 0, w.N, 0, w.K, out, w.N); }

QuantizedWeights quantize_nbits(const float* W, int64_t K, int64_t N, int64_t bits, int64_t block) {
  QuantizedWeights q;
  q.N = N;
  q.K = K;
  q.bits = bits;
  q.block = block;
  const int64_t k_blocks = (K + block - 1) / block, blob = block * bits / 8, zp_row = (k_blocks * bits + 7) / 8;
  const int levels = (1 << bits) - 1;
  q.data = Tensor(DType::UInt8, {N * k_blocks * blob});
  q.zero_points = Tensor(DType::UInt8, {N * zp_row});
  q.scales = Tensor(DType::Float32, {N * k_blocks});
  std::memset(q.data.raw(), 0, q.data.nbytes());
  std::memset(q.zero_points.raw(), 0, q.zero_points.nbytes());
  uint8_t *data = q.data.data<uint8_t>(), *zero_points = q.zero_points.data<uint8_t>();
  float* scales = q.scales.data<float>();
  parallel_chunks(N, balanced_chunks(N), [&](int64_t n0, int64_t n1, int) {
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const int64_t k0 = kb * block, k1 = std::min(K, k0 + block);
      float lo = 0, hi = 0;
      for (int64_t k = k0; k < k1; ++k) {
        lo = std::min(lo, W[k * N + n]);
        hi = std::max(hi, W[k * N + n]);
      }
      const float scale = std::max((hi - lo) / static_cast<float>(levels), 1e-8f);
      const int zp = std::clamp(static_cast<int>(std::nearbyint(-lo / scale)), 0, levels);
      scales[n * k_blocks + kb] = scale;
      zero_points[n * zp_row + kb * bits / 8] |= static_cast<uint8_t>(zp << (kb * bits % 8));
      uint8_t* dst = data + (n * k_blocks + kb) * blob;
      for (int64_t k = k0; k < k1; ++k) {
        const int v = std::clamp(static_cast<int>(std::nearbyint(W[k * N + n] / scale)) + zp, 0, levels);
        const int64_t bit = (k - k0) * bits;
        dst[bit / 8] |= static_cast<uint8_t>(v << (bit % 8));
      }
      for (int64_t k = k1; k < k0 + block; ++k) {  // a last partial block: padding decodes to 0
        const int64_t bit = (k - k0) * bits;
        dst[bit / 8] |= static_cast<uint8_t>(zp << (bit % 8));
      }
    }
  });
  return q;
}

}  // namespace tern::kernels
