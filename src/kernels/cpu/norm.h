// Row normalizations in float32: LayerNorm (x - mean) / sqrt(var + eps) and RMSNorm x / sqrt(mean(x²) + eps),
// followed by y = norm * scale (+ bias). Scale/bias rows advance by their row stride (0: shared).
#pragma once
#include <cstdint>

#include "kernels/cpu/context.h"

namespace tern::kernels {

struct NormArgs {
  int64_t rows = 0, n = 0;
  float eps = 1e-5f;
  bool rms = false;              // RMSNorm: no mean subtraction
  const float* scale = nullptr;  // may be null (scale 1)
  int64_t scale_stride = 0;
  const float* bias = nullptr;  // may be null
  int64_t bias_stride = 0;
  float* mean_out = nullptr;     // per row, optional
  float* inv_std_out = nullptr;  // per row, optional
  const float* skip = nullptr;   // [rows, n], optional: x + skip is normalized, the sum written to `sum`
  float* sum = nullptr;          //   (may be y or x)
};

// y may be x (each row is read whole before it is written).
void normalize_rows(const Context& cx, const float* x, float* y, const NormArgs& a);

}  // namespace tern::kernels
