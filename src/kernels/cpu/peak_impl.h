// peak.cpp's FMA chains, written once over the width of the file that includes this (the baseline's, and tier
// avx2's twin in x86/float_avx2/: at the baseline's SSE width an AVX2 machine's probe counted half its FLOPs).
#pragma once
#include <xsimd/xsimd.hpp>

#include "kernels/cpu/peak.h"

namespace tern::kernels {
namespace {

FmaChains fma_chains_at_width(int64_t iterations, float seed) {
  using batch = xsimd::batch<float>;
  constexpr int kChains = 10;  // enough independent FMAs to cover their latency on two pipes
  batch acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = batch(static_cast<float>(c) * 1e-3f + seed);
  const batch mul(0.999999f), add(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = xsimd::fma(acc[c], mul, add);
  batch s(0.0f);
  for (int c = 0; c < kChains; ++c) s += acc[c];
  return {xsimd::hadd(s), 2.0 * static_cast<double>(batch::size) * kChains * static_cast<double>(iterations)};
}

}  // namespace
}  // namespace tern::kernels
