// Integer matrix products for ONNX's 8-bit quantized operators (MatMulInteger, and ONNX Runtime's
// DynamicQuantizeMatMul / MatMulIntegerToFloat): exact int32 sums of (a − a_zp)·(b − b_zp) over uint8 or
// int8 operands, as ONNX defines them and ONNX Runtime computes them, so a dynamically quantized export
// (onnxruntime.quantization's IntegerOps: what transformers.js writes as model_quantized.onnx) gives ORT's
// numbers. Sums are int32 as in both: exact while K · 255 · 255 < 2^31 (K < 33,000).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

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
// The same codes centered on the zero point, a[i] = q[i] − zero_point: what gemm_integer multiplies.
void quantize_centered(const float* x, int64_t n, U8Quantization p, int16_t* a);

// B [K, N] (uint8 or int8, row-major as MatMul's B) laid out as N rows of K — the order a dot product streams
// it — as its own bytes: one byte a weight, packed once at load for a constant B; with its zero points.
struct IntegerMatrix {
  int64_t K = 0, N = 0;
  bool is_signed = false;
  Tensor rows;                 // uint8 or int8 [N, K]
  std::vector<int32_t> zeros;  // one value (per tensor), N (per column), or none (0)
  int64_t bytes() const { return static_cast<int64_t>(rows.nbytes()); }
};
IntegerMatrix pack_integer_matrix(const void* B, bool is_signed, int64_t K, int64_t N, std::vector<int32_t> zeros);

// c[m, n] = Σ_k a[m, k] · (b[k, n] − b_zp[n]) for m < M: `a` the activations with their zero point already
// subtracted (int16 [M, K], each in [−255, 255]). Each product is one int16 multiply-add pair (vpmaddwd: |a · b| ≤
// 255 · 255 and a pair's sum fit int32), so the sums are exact at every tier; threads split the columns, four
// activation rows share each weight row's load.
void gemm_integer(const int16_t* a, int64_t M, const IntegerMatrix& w, int32_t* c);
// The same sums scaled to float as ONNX Runtime scales them: y[m, n] = float(c[m, n]) · (a_scale · b_scale[n]) +
// bias[n] (`b_scales` one value or N; bias null: none). Each chunk of columns is scaled as soon as it is summed, in
// y's own memory (no int32 buffer).
void gemm_integer_to_float(const int16_t* a, int64_t M, const IntegerMatrix& w, float a_scale, const float* b_scales, int64_t b_scale_count,
                           const float* bias, float* y);

}  // namespace tern::kernels
