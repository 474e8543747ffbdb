// Tier avx2 of an x86-64-v2 build (x86/float_kernels_avx2.cpp): the float kernels the baseline runs at
// SSE4.2 width — gemm_panels_impl.h's GEMM tiles and panel GEMV, nbits_dequant_impl.h's dequantization — the
// same source compiled for x86-64-v3. Callers take them when the tier in use is not sse42. An x86-64-v3
// build's baseline is tier avx2 already: it neither compiles nor calls these.
#pragma once
#include <cstdint>

#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nbits.h"

namespace tern::kernels {

#if defined(__x86_64__) && !defined(__AVX2__)
void gemm_f32_avx2(const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context, float* C);
void gemv_panels_avx2(const float* x, int64_t M, const PackedMatrix& B, float* y);
void dequantize_nbits_block_avx2(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld);
// Whether the float kernels above are the ones to run: tier avx2 or higher in an x86-64-v2 build.
inline bool float_kernels_avx2() { return active_isa() != Isa::Sse42; }
#endif

}  // namespace tern::kernels
