// The prefill GEMMs of the AVX-512 tiers over gemm_packed.h's 16-column panels (x86/gemm_*_<tier>.cpp, each
// built with its tier's flags on x86/gemm_avx512_tiles.h's 8 × 32 tiles; matmul_packed and matmul_nbits pick
// them by the run's tier, Context::isa):
//   gemm_f32_avx512       at tier avx512 and above: fp32 products in the AVX2 GEMM's summation order, so
//                         every tier gives the same bits (and a row the GEMV's). It also runs fp16/bf16
//                         panels widened into L1 and MatMulNBits blocks dequantized there. Measured with
//                         `tern bench-op matmul --shape 128,2048,8192 --threads 2`, 3 alternated runs,
//                         medians: Sapphire Rapids-class Xeon 336 GFLOP/s vs the AVX2 GEMM's 197 (1.70x,
//                         12-row tiles then; 8 rows since). (On Zen 4, which splits 512-bit FMAs in two, a
//                         prototype gained 2-3%.)
//   gemm_bf16_avx512bf16  at tier avx512bf16, for bf16 panels: the activations are rounded to bf16 as well
//                         and each vdpbf16ps multiplies 32 bf16 pairs — twice the products of an fp32 FMA
//                         per instruction (Zen 4: 2.5x ONNX Runtime's fp32 prefill; on the Xeon above it runs
//                         at 207 GFLOP/s, below the widened fp32 GEMM's 330 — vdpbf16ps issues at half the
//                         FMA's rate there). Its results are the bf16 product's, not the fp32-activation GEMV's:
//                         a decode row and a prefill row of one sequence differ in the last bits, so batch
//                         invariance across the GEMV/GEMM switch (kPanelGemvMaxRows) holds for bf16 weights
//                         only at the other tiers (TERN_ISA=avx512vnni keeps the fp32-activation GEMM).
#pragma once
#include <cstdint>

#include "kernels/cpu/gemm_packed.h"

namespace tern::kernels {

#if defined(__x86_64__)
// C[M, N] = A[M, K] · B for B's panels as `block` gives them.
void gemm_f32_avx512(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context, float* C);
// C[M, N] = bf16(A[M, K]) · B for B as bf16 panels ([ceil(N/16)][K][16] bf16 bits).
void gemm_bf16_avx512bf16(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, const uint16_t* panels, float* C);
// The same on AMX tiles (tier amx).
void gemm_bf16_amx(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, const uint16_t* panels, float* C);
// C[M, N] = bf16(A) · bf16(B) on AMX tiles for B's panels as `block` gives them in fp32 (MatMulNBits blocks
// dequantized, then rounded): the prefill of 4/8-bit weights whose activations may lose precision
// (accuracy_level 4 quantizes decode's to int8; bf16 keeps more bits than that).
void gemm_rounded_bf16_amx(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context,
                           float* C);
#endif

}  // namespace tern::kernels
