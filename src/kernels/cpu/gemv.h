// Decode-shaped matrix products: a few rows of activations times a row-major matrix that is not a
// constant (constant weights are repacked and go through gemm_packed's GEMV), bound by how fast W
// streams from memory. W is [K, N] row-major (ONNX MatMul's B), every byte read once:
// wide matrices give each thread a column range (four weight rows streamed per pass), narrow ones a
// contiguous band of rows whose partial sums are then added in thread order. Each output is summed in a
// fixed order, so results repeat bit for bit from run to run.
#pragma once
#include <cstdint>

#include "kernels/cpu/context.h"

namespace tern::kernels {

// Rows handled by gemv_f32; callers use GEMM for more.
constexpr int64_t kGemvMaxRows = 4;

// y[m, :] = x[m, :] · W for m < M (1 ≤ M ≤ kGemvMaxRows); x rows `ldx` apart, y rows `ldy` apart.
void gemv_f32(const Context& cx, const float* x, int64_t M, int64_t ldx, const float* W, int64_t K, int64_t N, float* y, int64_t ldy);

}  // namespace tern::kernels
