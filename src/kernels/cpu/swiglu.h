// SwiGLU: y = silu(gate) · up = gate · sigmoid(gate) · up, row by row (rows may be halves of one packed
// [gate | up] row: strides are given separately).
#pragma once
#include <cstdint>

namespace tern::kernels {

void swiglu_rows(const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n);

}  // namespace tern::kernels
