#include "kernels/cpu/rope.h"

namespace tern::kernels {

void rope_rotate(const float* x, float* y, const float* cos, const float* sin, int64_t rot_dim, int64_t head_size, bool interleaved) {
  const int64_t half = rot_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
    const float x1 = x[a], x2 = x[b];
    y[a] = x1 * cos[i] - x2 * sin[i];
    y[b] = x1 * sin[i] + x2 * cos[i];
  }
  for (int64_t i = rot_dim; i < head_size; ++i) y[i] = x[i];
}

}  // namespace tern::kernels
