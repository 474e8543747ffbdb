// Decode-shaped products with 4- or 8-bit block-quantized weights in ONNX Runtime's MatMulNBits layout,
// read as stored — no dequantized copy, so a token streams half a byte (one byte) per weight plus scales:
//   y[m, n] = Σ_k x[m, k] · (q[n, k] − zp[n, k / block]) · scale[n, k / block]
// Activations stay fp32 (like MatMulNBits with accuracy_level 0); each block's products are summed in
// fp32, scaled once, and the zero point enters as zp · scale · Σ x over the block. Threads split the
// output columns; each output is summed in a fixed order, so results repeat bit for bit.
#pragma once
#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/nbits.h"

namespace tern::kernels {

// Whether gemv_nbits takes these weights: 4 or 8 bits, blocks a multiple of 16 (any zero-point form); grouped
// (nbits.h), 4 bits in blocks of 32·j.
bool gemv_nbits_supported(const NBitsWeights& w);

// y[m, :] = x[m, :] · dequant(W)ᵀ for m < M (x [M, K] and y [M, N], rows contiguous). Grouped weights run
// gemv_nbits_f32.h's kernel at tier `isa` (any tier the CPU runs; all give the same bits).
void gemv_nbits(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y);

// The same with each row of x first quantized to int8 per weight block (xs = max|x| / 127, round to
// nearest even) and integer dot products (x86/gemv_nbits_i8.h) — MatMulNBits' accuracy_level 4, llama.cpp's
// numerics for its quantized matrices. Not bitwise equal to gemv_nbits: the activations lose bits.
// Takes 8 bits in blocks of 32·j (on x86 also blocks of 16 with K a multiple of 32; on ARM any 16·j), 4 bits in
// blocks of 32·j grouped (nbits.h) on x86 and in blocks of 32 or 64·j as stored on ARM; `isa` picks the dot
// product (any tier the CPU runs).
bool gemv_nbits_i8_supported(const NBitsWeights& w, Isa isa);
void gemv_nbits_i8(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y);

}  // namespace tern::kernels
