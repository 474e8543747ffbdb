#include "kernels/cpu/dequantize.h"

namespace tern::kernels {

void dequantize_nbits_transposed(const NBitsWeights& w, float* out) {
  const int64_t k_blocks = (w.K + w.block - 1) / w.block;
  const int64_t blob = w.block * w.bits / 8;
  const int64_t zp_row = (k_blocks * w.bits + 7) / 8;
  const uint32_t mask = (1u << w.bits) - 1;
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const float scale = w.scales[n * k_blocks + kb];
      float zp = static_cast<float>(1u << (w.bits - 1));
      if (w.zp_float) zp = w.zp_float[n * k_blocks + kb];
      else if (w.zp_packed) {
        const int64_t bit = kb * w.bits;
        zp = static_cast<float>((w.zp_packed[n * zp_row + bit / 8] >> (bit % 8)) & mask);
      }
      const uint8_t* src = w.data + (n * k_blocks + kb) * blob;
      for (int64_t i = 0; i < w.block; ++i) {
        const int64_t k = kb * w.block + i;
        if (k >= w.K) break;
        const int64_t bit = i * w.bits;
        const uint32_t q = (src[bit / 8] >> (bit % 8)) & mask;
        out[k * w.N + n] = (static_cast<float>(q) - zp) * scale;
      }
    }
}

}  // namespace tern::kernels
