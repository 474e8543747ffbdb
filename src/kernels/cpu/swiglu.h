// Gated linear units: y = act(gate) · up, row by row (rows may be halves of one packed [gate | up] row:
// strides are given separately). act is SiLU (SwiGLU: Llama, Qwen, SmolLM) or GELU's tanh form (GeGLU: Gemma).
#pragma once
#include <cstdint>

#include "kernels/cpu/context.h"

namespace tern::kernels {

enum class GateActivation {
  Silu,      // gate · sigmoid(gate)
  GeluTanh,  // ½·gate·(1 + tanh(√(2/π)·(gate + 0.044715·gate³))), computed as gate · sigmoid(2·√(2/π)·(…))
};

void swiglu_rows(const Context& cx, const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n,
                 GateActivation act = GateActivation::Silu);

}  // namespace tern::kernels
