// swiglu.h's kernel at the vector width of the file that includes this: swiglu.cpp (the build's baseline)
// and, in an x86-64-v2 build, x86/float_avx2/swiglu.cpp (tier avx2). Everything here has internal linkage,
// so each file keeps its own copy built for its flags.
#pragma once
#include <cmath>
#include <xsimd/xsimd.hpp>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/swiglu.h"

namespace tern::kernels {
namespace {

void swiglu_rows_at_width(const Context& cx, const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n,
                          GateActivation act) {
  using batch = xsimd::batch<float>;
  // ½x(1 + tanh u) = x·sigmoid(2u): GELU's tanh form with SiLU's one exp (tanh itself costs two).
  constexpr float k2 = 2.0f * 0.7978845608028654f, k3 = 2.0f * 0.7978845608028654f * 0.044715f;
  const bool gelu = act == GateActivation::GeluTanh;
  constexpr int64_t L = static_cast<int64_t>(batch::size);
  // Prefill rows go to threads; a decode row is too short to be worth a parallel region.
  parallel_chunks(cx.threads, rows, balanced_chunks(cx.threads, rows, rows * n < (int64_t{1} << 16)), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* g = gate + r * in_stride;
      const float* u = up + r * in_stride;
      float* o = y + r * n;
      int64_t i = 0;
      for (; gelu && i + L <= n; i += L) {
        const batch gb = batch::load_unaligned(g + i), z = gb * (batch(k2) + batch(k3) * gb * gb);
        (gb / (batch(1.0f) + xsimd::exp(-z)) * batch::load_unaligned(u + i)).store_unaligned(o + i);
      }
      for (; !gelu && i + L <= n; i += L) {
        const batch gb = batch::load_unaligned(g + i);
        (gb / (batch(1.0f) + xsimd::exp(-gb)) * batch::load_unaligned(u + i)).store_unaligned(o + i);
      }
      for (; i < n; ++i) o[i] = g[i] / (1.0f + std::exp(-(gelu ? g[i] * (k2 + k3 * g[i] * g[i]) : g[i]))) * u[i];
    }
  });
}

}  // namespace
}  // namespace tern::kernels
