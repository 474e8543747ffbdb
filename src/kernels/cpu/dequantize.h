// Block dequantization of ONNX Runtime's MatMulNBits weight layout: weights [N, K] stored row by row
// in blocks of `block` values, `bits` per value (packed low bits first), one scale and one zero point
// per (row, block). Writes W transposed, [K, N] row-major, ready for C = A·W.
#pragma once
#include <cstdint>

namespace tern::kernels {

struct NBitsWeights {
  int64_t N = 0, K = 0, bits = 4, block = 32;
  const uint8_t* data = nullptr;       // [N, k_blocks, block·bits/8]
  const float* scales = nullptr;       // [N·k_blocks]
  const uint8_t* zp_packed = nullptr;  // [N, ceil(k_blocks·bits/8)] or null
  const float* zp_float = nullptr;     // [N·k_blocks] or null; default zero point 2^(bits−1)
};

void dequantize_nbits_transposed(const NBitsWeights& w, float* out_kn);
// The part rows [n0, n1) × columns [k0, k1) of W, transposed: out[(k − k0)·ld + (n − n0)].
void dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld);

}  // namespace tern::kernels
