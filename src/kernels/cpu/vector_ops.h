// The two vector loops the attention kernels share: a dot product and y += p·x, in SIMD lanes (a plain
// loop's float reduction is serial: the compiler may not reorder it). `static`: a per-ISA file that
// includes this compiles its own copy with its own flags (kernels/cpu/nbits.h says why).
#pragma once
#include <cstdint>
#include <xsimd/xsimd.hpp>

namespace tern::kernels {

static inline float dot(const float* a, const float* b, int64_t n) {
  using batch = xsimd::batch<float>;
  constexpr int64_t L = static_cast<int64_t>(batch::size);
  batch acc(0.0f);
  int64_t i = 0;
  for (; i + L <= n; i += L) acc = xsimd::fma(batch::load_unaligned(a + i), batch::load_unaligned(b + i), acc);
  float s = xsimd::hadd(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += p · x
static inline void axpy(float p, const float* x, float* y, int64_t n) {
  using batch = xsimd::batch<float>;
  constexpr int64_t L = static_cast<int64_t>(batch::size);
  const batch pb(p);
  int64_t i = 0;
  for (; i + L <= n; i += L) xsimd::fma(pb, batch::load_unaligned(x + i), batch::load_unaligned(y + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] += p * x[i];
}

}  // namespace tern::kernels
