// Integer matrix products for ONNX's 8-bit quantized operators (MatMulInteger, and ONNX Runtime's
// DynamicQuantizeMatMul / MatMulIntegerToFloat): exact int32 sums of (a − a_zp)·(b − b_zp) over uint8 or
// int8 operands, as ONNX defines them and ONNX Runtime computes them, so a dynamically quantized export
// (onnxruntime.quantization's IntegerOps: what transformers.js writes as model_quantized.onnx) gives ORT's
// numbers. Sums are int32 as in both: exact while K · 255 · 255 < 2^31 (K < 33,000).
#pragma once
#include <cstdint>

namespace tern::kernels {

// DynamicQuantizeLinear's parameters for x: its range stretched to include 0, scale = (max − min) / 255 (1
// when the range is empty, as ONNX Runtime does, where the formula divides by zero), zero point = round(−min /
// scale) clamped to [0, 255], rounding half to even.
struct U8Quantization {
  float scale = 1;
  uint8_t zero_point = 0;
};
U8Quantization dynamic_u8_quantization(const float* x, int64_t n);
// q[i] = clamp(round(x[i] / scale) + zero_point, 0, 255), round half to even: x divided, not multiplied by
// the reciprocal (the bits ONNX Runtime's quantization gives).
void quantize_u8(const float* x, int64_t n, U8Quantization p, uint8_t* q);

// c[m, n] = Σ_k a[m, k] · (b[k, n] − b_zp[n]) for m < M: `a` the activations with their zero point already
// subtracted (int16 [M, K], each in [−255, 255]), b uint8 or int8 [K, N] row-major as MatMul's B, read as stored;
// `b_zeros` one value (per tensor) or N (per column), null for 0. Threads split the columns; integer sums, so
// the result does not depend on the split.
void gemm_integer(const int16_t* a, int64_t M, const void* b, bool b_signed, int64_t K, int64_t N, const int32_t* b_zeros,
                  int64_t b_zero_count, int32_t* c);

}  // namespace tern::kernels
