// The arithmetic `tern bench --machine` takes the fp32 peak from (runtime/machine.cpp times it): independent
// FMA chains on registers, of the widest vectors the active ISA tier's GEMM uses — 512-bit from tier avx512
// up, 256-bit at avx2, 128-bit at sse42 and NEON (the tier's kernel table, fma_chains) — so a roofline compares
// a kernel with what its own tier can do.
#pragma once
#include <cstdint>

namespace tern::kernels {

struct FmaChains {
  float sum = 0;     // of the chains' results, to keep the work from being optimized away
  double flops = 0;  // done (a multiply-add counts 2)
};
FmaChains run_fma_chains(int64_t iterations, float seed);

#if defined(__x86_64__)
FmaChains fma_chains_avx512(int64_t iterations, float seed);  // x86/fma_chains_avx512.cpp
#endif

}  // namespace tern::kernels
