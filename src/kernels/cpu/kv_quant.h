// A ring's rows (kv_storage.h) to and from float: stored when a token is appended, loaded a block of keys at a
// time by the attention kernels, which convert them in their own scratch and never keep a dequantized copy.
// The loads are `static inline`: each per-ISA file that includes this compiles them at its own width.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/cpu/lanes.h"
#include "kernels/cpu/vector_ops.h"
#include "kernels/kv_storage.h"

namespace tern::kernels {

// Row `x` of n elements (n a multiple of the storage's unit) into `dst`, as storage `s` keeps it. q8_0: the
// scale is max|x| / 127, each element rounded to the nearest step. q4_0, of each block's transform y = H·x: each
// element the nearest of 16 steps (−8 … 7), the scale the one of least squared error among those that put the
// element of largest magnitude at −8 … −5.5 or 7 … 5 steps (llama.cpp's q4_0: −8 alone).
void store_kv_row(KvStorage s, const float* x, int64_t n, void* dst);
// Element d of a row stored as `s`.
float load_kv_element(KvStorage s, const void* row, int64_t d);

static inline void load_kv_row(const float* src, float* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); }
// fp16: eight a step by F16C where this file's width has it (the avx2 tier); otherwise through core's f16_to_f32,
// which asks the CPU. (Element by element, f16's own conversion, the fp16 ring had decoded slower than the fp32 one
// at depth: Gemma-3-270M at 16k tokens 56.10 tok/s against 68.56, bench/README. Inlined here rather than calling
// f16_to_f32 everywhere: `tern bench-op attention --shape 4,1,256,16384 --kv-dtype fp16 --threads 2` 1.06 ms
// against 1.21, Zen 5.)
static inline void load_kv_row(const f16* src, float* dst, int64_t n) {
#if defined(__F16C__)
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
#else
  f16_to_f32(reinterpret_cast<const uint16_t*>(src), dst, n);
#endif
}
static inline void load_kv_row(const KvBlockQ8_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kKvBlock; ++b, dst += kKvBlock) {
    const float scale = static_cast<float>(src[b].scale);
    const int8_t* q = src[b].q;
    for (int64_t j = 0; j < kKvBlock; ++j) dst[j] = static_cast<float>(q[j]) * scale;
  }
}
// x ← H·x, H the 32×32 Walsh–Hadamard matrix (entries ±1, Sylvester's order): five rounds of sums and differences,
// in vectors — rounds across vectors add and subtract whole ones, rounds inside one pair each lane with lane
// j xor half (a swizzle) and y = swizzled ± x. (As scalar loops the q4_0 ring's decode attention took 4.6 ms against
// 3.0: `tern bench-op attention --shape 9,3,64,8192 --kv-dtype q4_0 --threads 2`, Zen 3.)
template <int64_t Half>
struct LaneXor {
  static constexpr uint32_t get(uint32_t i, uint32_t) { return i ^ static_cast<uint32_t>(Half); }
};
template <int64_t Half>
static inline batch walsh_hadamard_lanes(batch x) {
  alignas(64) float sign[kLanes];  // +1 where lane j has bit `Half` clear (x[j] + x[j ^ Half]), −1 where set
  for (int64_t j = 0; j < kLanes; ++j) sign[j] = (j & Half) ? -1.0f : 1.0f;
  const batch swapped = xsimd::swizzle(x, xsimd::make_batch_constant<xsimd::batch<uint32_t, batch::arch_type>, LaneXor<Half>>());
  return xsimd::fma(batch::load_aligned(sign), x, swapped);
}
static inline void walsh_hadamard_32(float* x) {
  static_assert(kKvBlock % kLanes == 0 && kLanes <= 16, "a block is whole vectors");
  constexpr int64_t V = kKvBlock / kLanes;
  batch v[V];
  for (int64_t i = 0; i < V; ++i) {
    v[i] = batch::load_unaligned(x + i * kLanes);
    if constexpr (kLanes > 1) v[i] = walsh_hadamard_lanes<1>(v[i]);
    if constexpr (kLanes > 2) v[i] = walsh_hadamard_lanes<2>(v[i]);
    if constexpr (kLanes > 4) v[i] = walsh_hadamard_lanes<4>(v[i]);
    if constexpr (kLanes > 8) v[i] = walsh_hadamard_lanes<8>(v[i]);
  }
  for (int64_t half = 1; half < V; half *= 2)  // rounds kLanes … 16 wide: whole vectors
    for (int64_t i = 0; i < V; i += 2 * half)
      for (int64_t j = i; j < i + half; ++j) {
        const batch a = v[j], b = v[j + half];
        v[j] = a + b;
        v[j + half] = a - b;
      }
  for (int64_t i = 0; i < V; ++i) v[i].store_unaligned(x + i * kLanes);
}
// A q4_0 row as stored, y / 32 (x = H·(y / 32)): a sum of such rows is transformed once (finish_kv_sum), not each row.
static inline void load_kv_transformed(const KvBlockQ4_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kKvBlock; ++b, dst += kKvBlock) {
    const float scale = static_cast<float>(src[b].scale) / kKvBlock;
    const uint8_t* q = src[b].q;
    for (int64_t j = 0; j < kKvBlock / 2; ++j) {
      dst[j] = static_cast<float>((q[j] & 15) - 8) * scale;
      dst[j + kKvBlock / 2] = static_cast<float>((q[j] >> 4) - 8) * scale;
    }
  }
}
static inline void load_kv_row(const KvBlockQ4_0* src, float* dst, int64_t n) {
  load_kv_transformed(src, dst, n);
  for (int64_t b = 0; b < n / kKvBlock; ++b) walsh_hadamard_32(dst + b * kKvBlock);
}

// Value rows for a weighted sum: as load_kv_row, except q4_0's stay transformed — H is linear, so the kernel
// transforms the sum once (finish_kv_sum) instead of every row: the q4_0 ring's decode attention 3.0 → 2.0 ms
// (`tern bench-op attention --shape 9,3,64,8192 --kv-dtype q4_0 --threads 2`, Zen 3; q8_0 0.66).
template <typename T>
static inline void load_kv_values(const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, KvBlockQ4_0>) load_kv_transformed(src, dst, n);
  else load_kv_row(src, dst, n);
}
// Value row x in the form the kernels sum a storage's rows (load_kv_values): a q4_0 ring's transformed, H·x / 32,
// so that finish_kv_sum turns the sum back; others as they are. (A quantized ring's exact newest values are kept so.)
static inline void to_summed_values(KvStorage s, float* x, int64_t n) {
  if (s != KvStorage::Q4_0) return;
  for (int64_t b = 0; b < n / kKvBlock; ++b) walsh_hadamard_32(x + b * kKvBlock);
  scale_in_place(1.0f / kKvBlock, x, n);
}
template <typename T>
static inline void finish_kv_sum(float* sum, int64_t n) {
  if constexpr (std::is_same_v<T, KvBlockQ4_0>)
    for (int64_t b = 0; b < n / kKvBlock; ++b) walsh_hadamard_32(sum + b * kKvBlock);
}

// Head g's part of a row of heads `head_dim` elements wide.
template <typename T>
const T* kv_head(const T* row, int64_t g, int64_t head_dim) {
  return row + g * (head_dim / kKvUnitElements<T>);
}

}  // namespace tern::kernels
