// The vector loops the attention kernels share: a dot product, y += p·x, y *= c and a head's rotation, in
// SIMD lanes (a plain loop's float reduction is serial: the compiler may not reorder it). `static`: a
// per-ISA file that includes this compiles its own copy with its own flags (kernels/cpu/nbits.h says why).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <xsimd/xsimd.hpp>

#include "kernels/cpu/rope.h"

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

// y[0, n) *= c: a softmax's rescaling and normalization of an output row.
static inline void scale_in_place(float c, float* y, int64_t n) {
  using batch = xsimd::batch<float>;
  constexpr int64_t kLanes = static_cast<int64_t>(batch::size);
  const batch cb(c);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) (batch::load_unaligned(y + i) * cb).store_unaligned(y + i);
  for (; i < n; ++i) y[i] *= c;
}

// Head vector x [D] rotated to table row `pos` into y (dims past r.rot_dim copied); y may be x. Half-split
// pairs vectorized; interleaved pairs scalar.
static inline void rotate_head(const float* x, float* y, int64_t D, const RopeTable& r, int64_t pos) {
  using batch = xsimd::batch<float>;
  constexpr int64_t kLanes = static_cast<int64_t>(batch::size);
  const int64_t rot = std::max<int64_t>(r.rot_dim, 0);
  if (y != x) std::memcpy(y + rot, x + rot, static_cast<size_t>(D - rot) * sizeof(float));  // dims past the rotary ones
  if (rot == 0) return;
  const int64_t half = rot / 2;
  const float* c = r.cos + pos * half;
  const float* s = r.sin + pos * half;
  if (r.interleaved) {
    rope_rotate(x, y, c, s, rot, rot, true);
    return;
  }
  int64_t i = 0;
  for (; i + kLanes <= half; i += kLanes) {
    const batch x1 = batch::load_unaligned(x + i), x2 = batch::load_unaligned(x + half + i);
    const batch cb = batch::load_unaligned(c + i), sb = batch::load_unaligned(s + i);
    xsimd::fms(x1, cb, x2 * sb).store_unaligned(y + i);
    xsimd::fma(x1, sb, x2 * cb).store_unaligned(y + half + i);
  }
  for (; i < half; ++i) {
    const float x1 = x[i], x2 = x[half + i];
    y[i] = x1 * c[i] - x2 * s[i];
    y[half + i] = x1 * s[i] + x2 * c[i];
  }
}

}  // namespace tern::kernels
