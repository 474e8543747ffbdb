// Integer matrix products for ONNX's 8-bit quantized operators (MatMulInteger, and ONNX Runtime's
// DynamicQuantizeMatMul / MatMulIntegerToFloat): exact int32 sums of (a − a_zp)·(b − b_zp) over uint8 or
// int8 operands, as ONNX defines them and ONNX Runtime computes them, so a dynamically quantized export
// (onnxruntime.quantization's IntegerOps: what transformers.js writes as model_quantized.onnx) gives ORT's
// numbers. Sums are int32 as in both: exact while K · 255 · 255 < 2^31 (K < 33,000).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/context.h"

namespace tern::kernels {

// DynamicQuantizeLinear's parameters for x: its range stretched to include 0, scale = (max − min) / 255 (1
// when the range is empty, as ONNX Runtime does, where the formula divides by zero), zero point = round(−min /
// scale) clamped to [0, 255], rounding half to even.
struct U8Quantization {
  float scale = 1;
  uint8_t zero_point = 0;
};
// (The range and the codes at the tier's width: the same at every tier, by test.)
U8Quantization dynamic_u8_quantization(const Context& cx, const float* x, int64_t n);
// q[i] = clamp(round(x[i] / scale) + zero_point, 0, 255), round half to even: x divided, not multiplied by
// the reciprocal (the bits ONNX Runtime's quantization gives).
void quantize_u8(const Context& cx, const float* x, int64_t n, U8Quantization p, uint8_t* q);

// A's rows: uint8 codes [M, K] whose values are code − zero point, one zero point for every row or one per row.
// (An int8 A comes as A + 128 with its zero points + 128: the same differences.)
struct IntegerRows {
  const uint8_t* codes = nullptr;
  int64_t M = 0;
  std::vector<int32_t> zero_points;  // 1 or M values
};

// B [K, N] (uint8 or int8, row-major as MatMul's B) laid out as N rows of K — the order a dot product streams
// it — as its own bytes: one byte a weight, packed once at load for a constant B; with its zero points.
struct IntegerMatrix {
  int64_t K = 0, N = 0;
  bool is_signed = false;
  Tensor rows;                 // uint8 or int8 [N, K]
  std::vector<int32_t> zeros;  // one value (per tensor), N (per column), or none (0)
  std::vector<int32_t> sums;   // Σ_k b[k, n] of each column as stored: what the VNNI tiers' correction takes
  int64_t bytes() const { return static_cast<int64_t>(rows.nbytes()); }
};
// The matrix over `rows` (B's bytes already laid out as N rows of K), its column sums computed; without data
// (a session's planning pass) none.
IntegerMatrix integer_matrix(Tensor rows, bool is_signed, std::vector<int32_t> zeros);
// B laid out as N rows of K, then integer_matrix's.
IntegerMatrix pack_integer_matrix(const void* B, bool is_signed, int64_t K, int64_t N, std::vector<int32_t> zeros);

// c[m, n] = Σ_k (a[m, k] − a_zp[m]) · (b[k, n] − b_zp[n]) for m < a.M, exact in int32. By tier:
//   avxvnni, avx512vnni and up: vpdpbusd on the codes as they are and the weight bytes as int8 (uint8 weights
//     flipped by 128 as they are loaded), four u8·s8 products an int32 lane with no int16 step, then the zero
//     points' and the flip's share from the rows' and columns' sums (x86/gemm_integer_<tier>.cpp);
//   amx, for prefill rows: the same sums on AMX-INT8 tiles (x86/gemm_integer_amx.cpp);
//   neondot, neoni8mm: the same on sdot, the codes flipped too (arm/gemm_integer_neondot.cpp);
//   below: the codes centered on their zero points (int16, in [−255, 255]) times the weight bytes widened to int16,
//     one multiply-add pair each (vpmaddwd: |a · b| ≤ 255 · 255 and a pair's sum fit int32), then the weights'
//     zero points' share.
// The same integers at every tier. Threads split the columns; four activation rows share each weight row's load.
void gemm_integer(const Context& cx, const IntegerRows& a, const IntegerMatrix& w, int32_t* c);
// The same sums scaled to float as ONNX Runtime scales them: y[m, n] = float(c[m, n]) · (a_scale · b_scale[n]) +
// bias[n] (`b_scales` one value or N; bias null: none). Each chunk of columns is scaled as soon as it is summed, in
// y's own memory (no int32 buffer).
void gemm_integer_to_float(const Context& cx, const IntegerRows& a, const IntegerMatrix& w, float a_scale, const float* b_scales,
                           int64_t b_scale_count, const float* bias, float* y);

// The tiers' dot products over columns [n0, n1): dots[m, n] = Σ_k (a[m, k] − o) · s[n, k], `a` uint8 [M, K], s weight row
// n's bytes as int8 (`flip`: uint8 weights, each taken as b − 128), o the tier's offset on the codes: 0 for u8·s8
// products, which take the codes as they are, kIntegerDotsCodeOffset_neondot for sdot's s8·s8 (u − 128).
constexpr int64_t kIntegerAmxMinRows = 16;  // (below: tier amx's decode rows take its VNNI dot products)
#if defined(__x86_64__)
void integer_dots_avxvnni(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, bool flip, int64_t n0, int64_t n1, int32_t* dots,
                          int64_t N);
void integer_dots_avx512vnni(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, bool flip, int64_t n0, int64_t n1, int32_t* dots,
                             int64_t N);
// Prefill rows (at least kIntegerAmxMinRows) at tier amx: AMX-INT8 tiles, on the codes laid out by integer_amx_layout
// (quads of K for 16 rows at a time, once per product) and uint8 weights as they are (not flipped).
// The layout's size for M rows of K codes, and the layout written whole into `out` (zeros past M and K).
int64_t integer_amx_layout_bytes(int64_t M, int64_t K);
void integer_amx_layout(const uint8_t* codes, int64_t M, int64_t K, uint8_t* out);
void integer_dots_amx(const uint8_t* layout, int64_t M, int64_t K, const uint8_t* w, bool unsigned_weights, int64_t n0, int64_t n1,
                      int32_t* dots, int64_t N);
#elif defined(__aarch64__)
constexpr int32_t kIntegerDotsCodeOffset_neondot = 128;
void integer_dots_neondot(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, bool flip, int64_t n0, int64_t n1, int32_t* dots,
                          int64_t N);
#endif

}  // namespace tern::kernels
