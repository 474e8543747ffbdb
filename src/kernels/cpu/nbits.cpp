#include "kernels/cpu/nbits.h"

#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tern::kernels {

void dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld) {
  const int64_t k_blocks = (w.K + w.block - 1) / w.block;
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
