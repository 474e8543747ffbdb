#include "kernels/cpu/peak.h"

#include <xsimd/xsimd.hpp>

#include "kernels/cpu/isa.h"

namespace tern::kernels {

FmaChains run_fma_chains(int64_t iterations, float seed) {
#if defined(__x86_64__)
  if (isa_at_least(default_isa(), Isa::Avx512)) return run_fma_chains_avx512(iterations, seed);
#endif
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

}  // namespace tern::kernels
