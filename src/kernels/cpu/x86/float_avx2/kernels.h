// Tier avx2 of an x86-64-v2 build: the kernels whose baseline runs at SSE4.2 width, compiled again for
// x86-64-v3 — each file in this folder includes its kernel's kernels/cpu/*_impl.h, the source the baseline
// file compiles too, and defines the set width_kernels.inc declares in namespace float_avx2; tier avx2's fill
// (x86/tier_avx2.cpp) puts them in its table. An x86-64-v3 build's baseline is tier avx2 already: it neither
// compiles nor fills these (CMakeLists.txt sets TERN_FLOAT_KERNELS_AVX2 only where it builds this folder).
#pragma once
#include "kernels/cpu/kernel_table.h"

#ifndef TERN_FLOAT_KERNELS_AVX2
#define TERN_FLOAT_KERNELS_AVX2 0
#endif

namespace tern::kernels::float_avx2 {
#include "kernels/cpu/width_kernels.inc"
}  // namespace tern::kernels::float_avx2
