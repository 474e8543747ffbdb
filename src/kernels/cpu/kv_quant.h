// A ring's rows (kv_storage.h) to and from float: stored when a token is appended, loaded a block of keys at a
// time by the attention kernels, which convert them in their own scratch and never keep a dequantized copy.
// The loads are `static inline`: each per-ISA file that includes this compiles them at its own width.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/kv_storage.h"

namespace tern::kernels {

// Row `x` of n elements (n a multiple of the storage's unit) into `dst`, as storage `s` keeps it. q8_0: the
// scale is max|x| / 127, each element rounded to the nearest step. q4_0, of each block's transform y = H·x: the
// element of largest magnitude becomes −8 steps exactly (scale = it / −8), the others the nearest of 16 steps, 7 at most.
void store_kv_row(KvStorage s, const float* x, int64_t n, void* dst);
// Element d of a row stored as `s`.
float load_kv_element(KvStorage s, const void* row, int64_t d);

static inline void load_kv_row(const float* src, float* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); }
static inline void load_kv_row(const f16* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
static inline void load_kv_row(const KvBlockQ8_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kKvBlock; ++b, dst += kKvBlock) {
    const float scale = static_cast<float>(src[b].scale);
    const int8_t* q = src[b].q;
    for (int64_t j = 0; j < kKvBlock; ++j) dst[j] = static_cast<float>(q[j]) * scale;
  }
}
// x ← H·x, H the 32×32 Walsh–Hadamard matrix (entries ±1, Sylvester's order): five rounds of sums and differences.
static inline void walsh_hadamard_32(float* x) {
  for (int64_t half = 1; half < kKvBlock; half *= 2)
    for (int64_t i = 0; i < kKvBlock; i += 2 * half)
      for (int64_t j = i; j < i + half; ++j) {
        const float a = x[j], b = x[j + half];
        x[j] = a + b;
        x[j + half] = a - b;
      }
}
static inline void load_kv_row(const KvBlockQ4_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kKvBlock; ++b, dst += kKvBlock) {
    const float scale = static_cast<float>(src[b].scale) / kKvBlock;  // (x = H·y / 32)
    const uint8_t* q = src[b].q;
    for (int64_t j = 0; j < kKvBlock / 2; ++j) {
      dst[j] = static_cast<float>((q[j] & 15) - 8) * scale;
      dst[j + kKvBlock / 2] = static_cast<float>((q[j] >> 4) - 8) * scale;
    }
    walsh_hadamard_32(dst);
  }
}

// Head g's part of a row of heads `head_dim` elements wide.
template <typename T>
const T* kv_head(const T* row, int64_t g, int64_t head_dim) {
  return row + g * (head_dim / kKvUnitElements<T>);
}

}  // namespace tern::kernels
