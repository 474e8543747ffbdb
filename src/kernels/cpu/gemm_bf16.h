// The prefill GEMM for bf16 weight panels on CPUs with AVX512_BF16 (x86/gemm_bf16_avx512bf16.cpp, built
// with that tier's flags; matmul_packed picks it at tier avx512bf16): the activations are rounded to bf16 as
// well and each vdpbf16ps multiplies 32 bf16 pairs — twice the products of an fp32 FMA per instruction. Its
// results are the bf16 product's, not the fp32-activation GEMV's: a decode row and a prefill row of one
// sequence differ in the last bits, so batch invariance across the GEMV/GEMM switch (kPanelGemvMaxRows)
// holds for bf16 weights only at the other tiers (TERN_ISA=avx512vnni keeps the fp32-activation GEMM).
#pragma once
#include <cstdint>

namespace tern::kernels {

#if defined(__x86_64__)
// C[M, N] = bf16(A[M, K]) · B for B as gemm_packed.h's bf16 panels ([ceil(N/16)][K][16] bf16 bits).
void gemm_bf16_avx512bf16(const float* A, int64_t M, int64_t K, int64_t N, const uint16_t* panels, float* C);
#endif

}  // namespace tern::kernels
