#include "kernels/cpu/softmax.h"

#include <cmath>
#include <limits>

namespace tern::kernels {

void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, SoftmaxKind kind) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const float* px = x + o * n * inner + in;
      float* py = y + o * n * inner + in;
      float mx = -std::numeric_limits<float>::infinity();
      int64_t arg = 0;
      for (int64_t i = 0; i < n; ++i)
        if (px[i * inner] > mx) {
          mx = px[i * inner];
          arg = i;
        }
      if (kind == SoftmaxKind::Hardmax) {
        for (int64_t i = 0; i < n; ++i) py[i * inner] = i == arg ? 1.0f : 0.0f;
        continue;
      }
      if (std::isinf(mx) && mx < 0) mx = 0;  // a row of -inf: stay finite until the division
      // One float exp per element, kept in y, summed in double: a decode step's [9, ~150] attention rows
      // took 14 µs per call with two exps each in double (tern profile, SmolLM2-135M --window 0).
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(px[i * inner] - mx);
        sum += e;
        if (kind == SoftmaxKind::Softmax) py[i * inner] = e;
      }
      if (kind == SoftmaxKind::LogSoftmax) {
        float lse = static_cast<float>(std::log(sum));
        for (int64_t i = 0; i < n; ++i) py[i * inner] = px[i * inner] - mx - lse;
      } else {
        float inv = static_cast<float>(1.0 / sum);
        for (int64_t i = 0; i < n; ++i) py[i * inner] *= inv;
      }
    }
}

}  // namespace tern::kernels
