// ONNX Runtime's MatMulNBits weight layout: weights [N, K] stored row by row in blocks of `block`
// values, `bits` per value (packed low bits first), one scale and one zero point per (row, block).
// Dequantization writes W transposed, [K, N] row-major, ready for C = A·W; quantization makes the
// layout from such a W (for --weights int8/int4 and `tern quantize`).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace tern::kernels {

struct NBitsWeights {
  int64_t N = 0, K = 0, bits = 4, block = 32;
  const uint8_t* data = nullptr;       // [N, k_blocks, block·bits/8]
  const float* scales = nullptr;       // [N·k_blocks]
  const uint8_t* zp_packed = nullptr;  // [N, ceil(k_blocks·bits/8)] or null
  const float* zp_float = nullptr;     // [N·k_blocks] or null; default zero point 2^(bits−1)
};

// The zero point of row n's block kb: the float one given (a GGUF Q4_1 block's −min/scale), the packed
// one, or the default 2^(bits−1). `static`: the per-ISA kernel files (x86/*_<tier>.cpp) compile their own
// copy with their own flags, and internal linkage keeps each copy in its file (an inline function would
// let the linker pick an AVX-512 copy for every caller).
static inline float nbits_zero_point(const NBitsWeights& w, int64_t n, int64_t kb, int64_t k_blocks) {
  if (w.zp_float) return w.zp_float[n * k_blocks + kb];
  if (!w.zp_packed) return static_cast<float>(int64_t{1} << (w.bits - 1));
  const int64_t bit = kb * w.bits, row = (k_blocks * w.bits + 7) / 8;
  return static_cast<float>((w.zp_packed[n * row + bit / 8] >> (bit % 8)) & ((1 << w.bits) - 1));
}

void dequantize_nbits_transposed(const NBitsWeights& w, float* out_kn);

// Block-quantized weights that own their bytes (tensors, so the memory cap counts them).
struct QuantizedWeights {
  int64_t N = 0, K = 0, bits = 4, block = 32;
  Tensor data, zero_points;  // uint8 [N·k_blocks·block·bits/8]; uint8 [N·ceil(k_blocks·bits/8)]
  Tensor scales;             // float32 [N·k_blocks]
  NBitsWeights view() const { return {N, K, bits, block, data.data<uint8_t>(), scales.data<float>(), zero_points.data<uint8_t>(), nullptr}; }
  int64_t bytes() const { return static_cast<int64_t>(data.nbytes() + zero_points.nbytes() + scales.nbytes()); }
};

// Quantizes W [K, N] row-major (an ONNX MatMul weight) per column block: asymmetric, the range of each
// block stretched to include 0, q = round(w / scale) + zp clamped to [0, 2^bits − 1] — the scheme of
// ONNX Runtime's MatMulNBits quantizer. bits 4 or 8; block a power of two ≥ 16.
QuantizedWeights quantize_nbits(const float* W, int64_t K, int64_t N, int64_t bits, int64_t block);
// The part rows [n0, n1) × columns [k0, k1) of W, transposed: out[(k − k0)·ld + (n − n0)].
void dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld);

}  // namespace tern::kernels
