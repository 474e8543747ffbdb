// Decode rows of MatMulNBits with fp32 activations over grouped 4-bit weights (nbits.h: 16 output rows a
// group, one int32 lane a row): MatMulNBits' accuracy levels 0-3, what ONNX Runtime's quantizer and `tern
// quantize` write by default. Per 16-row group and block,
//   y[n] += ws[n,kb] · (Σ_k q[n,k] · x[k] − zp[n,kb] · Σ_k x[k])
// the sums in fp32 over one lane a row, so no reduction across lanes; four accumulators a row (low and high
// nibbles, even and odd 64-byte runs) so that four FMA chains overlap. The kernel is written once over a
// register set (gemv_nbits_f32_impl.h): the AVX-512 tier's own file, AVX2 (the float_avx2 twin), and a
// scalar one — each summing in the same order with fused multiply-adds, so every tier gives the same bits.
#pragma once
#include <cstdint>

#include "kernels/cpu/nbits.h"

namespace tern::kernels {

// One activation row for the grouped kernel: values padded with zeros to whole 32-value chunks, and the sum
// of each block's values (what the zero points multiply).
struct FloatRow {
  const float* x = nullptr;    // [k_blocks · block]
  const float* sum = nullptr;  // [k_blocks]
};

// Activation rows a kernel call takes at most (each weight byte is read once for them all).
constexpr int64_t kFloatRowsAPass = 4;

#if defined(__x86_64__)
// y[m, n] (row stride ldy) for the M ≤ kFloatRowsAPass rows x[0..M) and the rows of groups [g0, g1).
void gemv_nbits_f32_avx512(const FloatRow* x, int64_t M, const NBitsWeights& w, int64_t g0, int64_t g1, float* y, int64_t ldy);
#endif

}  // namespace tern::kernels
