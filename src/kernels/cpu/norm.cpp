#include "kernels/cpu/norm.h"

#include <cmath>

namespace tern::kernels {

void normalize_rows(const float* x, float* y, const NormArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* px = x + r * a.n;
    float* py = y + r * a.n;
    double mean = 0;
    if (!a.rms) {
      for (int64_t i = 0; i < a.n; ++i) mean += px[i];
      mean /= static_cast<double>(a.n);
    }
    double var = 0;
    for (int64_t i = 0; i < a.n; ++i) {
      double d = px[i] - mean;
      var += d * d;
    }
    var /= static_cast<double>(a.n);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + a.eps));
    const float m = static_cast<float>(mean);
    const float* s = a.scale ? a.scale + r * a.scale_stride : nullptr;
    const float* b = a.bias ? a.bias + r * a.bias_stride : nullptr;
    for (int64_t i = 0; i < a.n; ++i) {
      float v = (px[i] - m) * inv;
      if (s) v *= s[i];
      if (b) v += b[i];
      py[i] = v;
    }
    if (a.mean_out) a.mean_out[r] = m;
    if (a.inv_std_out) a.inv_std_out[r] = inv;
  }
}

}  // namespace tern::kernels
