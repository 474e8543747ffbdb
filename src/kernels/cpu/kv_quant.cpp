#include "kernels/cpu/kv_quant.h"

#include <algorithm>
#include <cmath>

namespace tern::kernels {
namespace {

// round(v) clamped to [lo, hi]; a NaN (a model's own) becomes 0 rather than an undefined conversion.
int step_of(float v, float lo, float hi) { return v == v ? static_cast<int>(std::clamp(std::nearbyint(v), lo, hi)) : 0; }

void quantize_q8_0(const float* x, KvBlockQ8_0& b) {
  float amax = 0;
  for (int64_t j = 0; j < kKvBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float scale = amax / 127, inv = scale > 0 ? 1 / scale : 0;
  b.scale = f16(scale);
  for (int64_t j = 0; j < kKvBlock; ++j) b.q[j] = static_cast<int8_t>(step_of(x[j] * inv, -127, 127));
}

void quantize_q4_0(const float* block, KvBlockQ4_0& b) {
  float x[kKvBlock];
  std::copy_n(block, kKvBlock, x);
  walsh_hadamard_32(x);
  float extreme = 0;  // the element of largest magnitude, with its sign
  for (int64_t j = 0; j < kKvBlock; ++j)
    if (std::fabs(x[j]) > std::fabs(extreme)) extreme = x[j];
  // The scale of least squared error among a few that put the extreme at a step from −8 to −5.5 or 7 to 5 (its
  // rounding clips it, but the other 31 values get finer steps). llama.cpp's q4_0 takes −8 alone. `tern eval MODEL
  // --text /tmp/kjv48k.txt --context 2048 --second-half --kv-dtype q4_0` (bench/README's text; fp32 ring 11.8317 and
  // 27.372): Gemma-3-270M 13.079 → 12.886 (+10.5% → +8.9%), SmolLM2-135M 28.215 → 27.979 (+3.0% → +2.2%); 32 such
  // scales, −8 … 5 by quarter steps: 12.876 / 27.968.
  float scale = extreme / -8, best = INFINITY;
  for (float at : {-8.0f, -7.5f, -7.0f, -6.5f, -6.0f, -5.5f, 7.0f, 6.5f, 6.0f, 5.5f, 5.0f}) {
    const float d = static_cast<float>(f16(extreme / at)), inv = d != 0 ? 1 / d : 0;
    float err = 0;
    for (int64_t j = 0; j < kKvBlock; ++j) {
      const float e = x[j] - d * static_cast<float>(step_of(x[j] * inv, -8, 7));
      err += e * e;
    }
    if (err < best) best = err, scale = d;
  }
  const float inv = scale != 0 ? 1 / scale : 0;
  b.scale = f16(scale);
  auto step = [&](float v) { return static_cast<uint8_t>(step_of(v * inv, -8, 7) + 8); };
  for (int64_t j = 0; j < kKvBlock / 2; ++j) b.q[j] = static_cast<uint8_t>(step(x[j]) | step(x[j + kKvBlock / 2]) << 4);
}

}  // namespace

void store_kv_row(KvStorage s, const float* x, int64_t n, void* dst) {
  switch (s) {
    case KvStorage::F32: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float)); break;
    case KvStorage::F16: f32_to_f16(x, static_cast<uint16_t*>(dst), n); break;  // (F16C where the CPU has it)
    case KvStorage::Q8_0:
      for (int64_t b = 0; b < n / kKvBlock; ++b) quantize_q8_0(x + b * kKvBlock, static_cast<KvBlockQ8_0*>(dst)[b]);
      break;
    case KvStorage::Q4_0:
      for (int64_t b = 0; b < n / kKvBlock; ++b) quantize_q4_0(x + b * kKvBlock, static_cast<KvBlockQ4_0*>(dst)[b]);
      break;
  }
}

float load_kv_element(KvStorage s, const void* row, int64_t d) {
  switch (s) {
    case KvStorage::F16: return static_cast<const f16*>(row)[d];
    case KvStorage::Q8_0: {
      const KvBlockQ8_0& b = static_cast<const KvBlockQ8_0*>(row)[d / kKvBlock];
      return static_cast<float>(b.q[d % kKvBlock]) * static_cast<float>(b.scale);
    }
    case KvStorage::Q4_0: {  // (the whole block: each element depends on all 32 stored)
      float x[kKvBlock];
      load_kv_row(static_cast<const KvBlockQ4_0*>(row) + d / kKvBlock, x, kKvBlock);
      return x[d % kKvBlock];
    }
    default: return static_cast<const float*>(row)[d];
  }
}

}  // namespace tern::kernels
