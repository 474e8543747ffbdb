// bitsandbytes' 4-bit formats as ONNX Runtime's MatMulBnb4 stores them (transformers.js's model_bnb4.onnx, written by
// onnxruntime.quantization's MatMulBnb4Quantizer): the weight Wᵀ [N, K] read as one flat run of N·K values, cut into
// blocks of `block` values that share one float scale (the block's largest magnitude, "absmax"); each value a 4-bit
// code, two a byte with the first in the high nibble, standing for a point of NF4's normal-quantile table or FP4's
// table, times the block's absmax.
#pragma once
#include <cstdint>

namespace tern::kernels {

enum class Bnb4Type { FP4 = 0, NF4 = 1 };  // MatMulBnb4's quant_type

// out[i] = table[code i] · absmax[i / block] for i < numel: the values ONNX Runtime dequantizes to.
void dequantize_bnb4(const uint8_t* codes, const float* absmax, int64_t numel, int64_t block, Bnb4Type type, float* out);

}  // namespace tern::kernels
