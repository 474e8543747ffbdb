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

// y = y ⊙ s + o: a q4_0 ring's stored key back to the key (KvRingBuffer::calibrate_keys).
static inline void scale_add(const float* s, const float* o, float* y, int64_t n) {
  using batch = xsimd::batch<float>;
  constexpr int64_t L = static_cast<int64_t>(batch::size);
  int64_t i = 0;
  for (; i + L <= n; i += L)
    xsimd::fma(batch::load_unaligned(y + i), batch::load_unaligned(s + i), batch::load_unaligned(o + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = y[i] * s[i] + o[i];
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

// Lane i of a batch takes lane i ^ 1: the partner of each interleaved RoPE pair.
struct RopePairPartner {
  static constexpr uint32_t get(uint32_t i, uint32_t) { return i ^ 1u; }
};
// Lane i of a batch takes lane i / 2 of the first or the second half of another: a table row's cos or sin for each
// of the pairs' two values (xsimd 8.1's zip_lo/zip_hi interleave within 128-bit lanes, so not those).
template <uint32_t Half>
struct RopePairTable {
  static constexpr uint32_t get(uint32_t i, uint32_t size) { return Half * size / 2 + i / 2; }
};
// Whether lane i is the second of its pair (a batch_bool_constant generator).
struct RopePairSecond {
  static constexpr bool get(uint32_t i, uint32_t) { return (i & 1u) != 0; }
};

// Head vector x [D] rotated to table row `pos` into y (dims past r.rot_dim copied); y may be x. Half-split and
// interleaved pairs both vectorized: GGUF imports rotate interleaved pairs (llama.cpp's layout), which a scalar loop
// left at 11% of SmolLM2-135M Q4_1's decode at 600 tokens of context (perf, Zen 5, 2 threads: every held key is
// rotated as read).
static inline void rotate_head(const float* x, float* y, int64_t D, const RopeTable& r, int64_t pos) {
  using batch = xsimd::batch<float>;
  constexpr int64_t kLanes = static_cast<int64_t>(batch::size);
  const int64_t rot = std::max<int64_t>(r.rot_dim, 0);
  if (y != x) std::memcpy(y + rot, x + rot, static_cast<size_t>(D - rot) * sizeof(float));  // dims past the rotary ones
  if (rot == 0) return;
  const int64_t half = rot / 2;
  const float* c = r.cos + pos * half;
  const float* s = r.sin + pos * half;
  if (r.interleaved) {  // pairs (2i, 2i + 1): each lane with its partner's value, the pair's cos and sin doubled
    using ubatch = xsimd::batch<uint32_t>;
    constexpr auto partner = xsimd::make_batch_constant<ubatch, RopePairPartner>();
    constexpr auto first_half = xsimd::make_batch_constant<ubatch, RopePairTable<0>>();
    constexpr auto second_half = xsimd::make_batch_constant<ubatch, RopePairTable<1>>();
    constexpr auto second = xsimd::make_batch_bool_constant<batch, RopePairSecond>();
    int64_t j = 0;  // values [j, j + 2·kLanes): pairs [j/2, j/2 + kLanes)
    for (; j + 2 * kLanes <= rot; j += 2 * kLanes) {
      const batch cb = batch::load_unaligned(c + j / 2), sb = batch::load_unaligned(s + j / 2);
      const batch cs[2] = {xsimd::swizzle(cb, first_half), xsimd::swizzle(cb, second_half)};
      const batch ss[2] = {xsimd::swizzle(sb, first_half), xsimd::swizzle(sb, second_half)};
      for (int h = 0; h < 2; ++h) {
        const batch v = batch::load_unaligned(x + j + h * kLanes), w = xsimd::swizzle(v, partner);
        // first: v·cos − w·sin; second: w·sin + v·cos — each as the half-split loop below rounds them
        xsimd::select(second, xsimd::fma(w, ss[h], v * cs[h]), xsimd::fms(v, cs[h], w * ss[h])).store_unaligned(y + j + h * kLanes);
      }
    }
    if (j < rot) rope_rotate(x + j, y + j, c + j / 2, s + j / 2, rot - j, rot - j, true);
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
