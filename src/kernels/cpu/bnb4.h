// bitsandbytes' 4-bit formats as ONNX Runtime's MatMulBnb4 stores them (transformers.js's model_bnb4.onnx, written by
// onnxruntime.quantization's MatMulBnb4Quantizer): the weight Wᵀ [N, K] read as one flat run of N·K values, cut into
// blocks of `block` values that share one float scale (the block's largest magnitude, "absmax"); each value a 4-bit
// code, two a byte with the first in the high nibble, standing for a point of NF4's normal-quantile table or FP4's
// table, times the block's absmax.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/cpu/context.h"

namespace tern::kernels {

enum class Bnb4Type { FP4 = 0, NF4 = 1 };  // MatMulBnb4's quant_type

struct Bnb4Weights {
  const uint8_t* codes = nullptr;  // (N·K + 1) / 2 bytes
  const float* absmax = nullptr;   // one per block (4-byte aligned)
  int64_t K = 0, N = 0, block = 0;
  Bnb4Type type = Bnb4Type::NF4;
};

// out[i] = table[code i] · absmax[i / block] for i < numel: the values ONNX Runtime dequantizes to.
void dequantize_bnb4(const Context& cx, const uint8_t* codes, const float* absmax, int64_t numel, int64_t block, Bnb4Type type, float* out);

// y [M, N] = x [M, K] · Wᵀ, W read from its codes as it is used — each block's 16 points times its absmax (ONNX
// Runtime's dequantized values exactly), looked up per code — so a decode token streams half a byte a weight instead
// of the 4 of a float32 copy. Rows of many tokens (a prefill) run a GEMM that dequantizes W a block at a time as
// it reads it (gemm_panel_source).
void matmul_bnb4(const Context& cx, const float* x, int64_t M, const Bnb4Weights& w, float* y);
// The kernel matmul_bnb4 takes for M rows, named for profiles.
std::string matmul_bnb4_kernel(int64_t M, const Bnb4Weights& w, Isa isa);

#if defined(__x86_64__)
// x86/gemv_bnb4_avx2.cpp: rows [n0, n1) of y for up to 8 rows of x, K a multiple of the block, the block of 16.
void gemv_bnb4_avx2(const float* x, int64_t M, const Bnb4Weights& w, const float* table, int64_t n0, int64_t n1, float* y);
#endif

}  // namespace tern::kernels
