// Tier avx2 of an x86-64-v2 build: the kernels whose baseline runs at SSE4.2 width, compiled again for
// x86-64-v3 — each file in this folder includes its kernel's kernels/cpu/*_impl.h, the source the baseline
// file compiles too. The baseline's public function calls its twin here when the tier in use is not sse42
// (TERN_ISA=sse42 keeps the baseline's). An x86-64-v3 build's baseline is tier avx2 already: it neither
// compiles nor calls these: CMakeLists.txt sets TERN_FLOAT_KERNELS_AVX2 only where it builds this folder.
#pragma once
#include <cstdint>

#ifndef TERN_FLOAT_KERNELS_AVX2
#define TERN_FLOAT_KERNELS_AVX2 0
#endif

#if TERN_FLOAT_KERNELS_AVX2
#include "kernels/cpu/chunk_attention.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nbits.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/ring_attention.h"
#include "kernels/cpu/swiglu.h"

namespace tern::kernels {

// Whether the twins below are the ones to run at tier `isa`: avx2 or higher.
inline bool float_kernels_avx2(Isa isa) { return isa != Isa::Sse42; }

namespace float_avx2 {
// gemm_packed.cpp's GEMM tiles, panel GEMV and MatMulNBits dequantization (x86/float_avx2/gemm_packed.cpp)
void gemm_f32(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context, float* C);
void gemv_panels(const Context& cx, const float* x, int64_t M, const PackedMatrix& B, float* y);
void dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld);
// The others' public functions, one file each
void gemv_nbits(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y);
void gemv_nbits_i8(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y);
template <typename T>
void ring_attention(const float* q, float* out, const RingAttentionArgs<T>& a);
void chunk_attention(const ChunkAttentionArgs& a);
void swiglu_rows(const Context& cx, const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n,
                 GateActivation act);
void normalize_rows(const Context& cx, const float* x, float* y, const NormArgs& a);
// gemm_integer.cpp's dot products (columns [n0, n1) of c = a · wᵀ; exact int32 sums)
void integer_rows(const int16_t* a, int64_t M, int64_t K, const int8_t* w, int64_t n0, int64_t n1, int32_t* c, int64_t N);
void integer_rows(const int16_t* a, int64_t M, int64_t K, const uint8_t* w, int64_t n0, int64_t n1, int32_t* c, int64_t N);
}  // namespace float_avx2

}  // namespace tern::kernels
#endif
