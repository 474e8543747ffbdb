// Decode-shaped products with 4- or 8-bit block-quantized weights in ONNX Runtime's MatMulNBits layout,
// read as stored — no dequantized copy, so a token streams half a byte (one byte) per weight plus scales:
//   y[m, n] = Σ_k x[m, k] · (q[n, k] − zp[n, k / block]) · scale[n, k / block]
// Activations stay fp32 (like MatMulNBits with accuracy_level 0); each block's products are summed in
// fp32, scaled once, and the zero point enters as zp · scale · Σ x over the block. Threads split the
// output columns; each output is summed in a fixed order, so results repeat bit for bit.
#pragma once
#include <cstdint>

#include "kernels/cpu/nbits.h"

namespace tern::kernels {

// Whether gemv_nbits takes these weights: 4 or 8 bits, blocks a multiple of 16 (any zero-point form).
bool gemv_nbits_supported(const NBitsWeights& w);

// y[m, :] = x[m, :] · dequant(W)ᵀ for m < M (x [M, K] and y [M, N], rows contiguous).
void gemv_nbits(const float* x, int64_t M, const NBitsWeights& w, float* y);

}  // namespace tern::kernels
