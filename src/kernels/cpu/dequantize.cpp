#include "kernels/cpu/dequantize.h"

#include <algorithm>

namespace tern::kernels {

void dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld) {
  const int64_t k_blocks = (w.K + w.block - 1) / w.block;
  const int64_t blob = w.block * w.bits / 8;
  const int64_t zp_row = (k_blocks * w.bits + 7) / 8;
  const uint32_t mask = (1u << w.bits) - 1;
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t kb = k0 / w.block; kb * w.block < k1; ++kb) {
      const float scale = w.scales[n * k_blocks + kb];
      float zp = static_cast<float>(1u << (w.bits - 1));
      if (w.zp_float) zp = w.zp_float[n * k_blocks + kb];
      else if (w.zp_packed) {
        const int64_t bit = kb * w.bits;
        zp = static_cast<float>((w.zp_packed[n * zp_row + bit / 8] >> (bit % 8)) & mask);
      }
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

}  // namespace tern::kernels
