#include "kernels/cpu/swiglu.h"

#include <cmath>

namespace tern::kernels {

void swiglu_rows(const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate + r * in_stride;
    const float* u = up + r * in_stride;
    float* o = y + r * n;
    for (int64_t i = 0; i < n; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

}  // namespace tern::kernels
