// Products with a constant weight matrix repacked once, at load, into the layout the kernels stream:
// column panels of kPanel columns, each panel K rows of kPanel contiguous floats ([N/kPanel][K][kPanel],
// the last panel zero-padded). Prefill (many rows) runs a register-blocked GEMM — 6 rows × kPanel
// columns of C in registers (3 rows at an x86-64-v2 build's SSE width; 8 rows × two panels with AVX-512,
// gemm_avx512.h), A packed per call, each
// panel read once per call in cache-sized K blocks —
// and decode (up to kPanelGemvMaxRows rows) a GEMV that streams each panel front to back, summing each
// output in the GEMM's order (per K block, then block by block) so a row's bits never depend on how many
// rows share the product — continuous batching's batch invariance. The same driver takes 4-bit
// MatMulNBits weights, dequantizing one K block of one panel at a time into L1, so prefill needs no
// dequantized copy of the matrix either. Threads split the panels; every output is summed in a fixed
// order, so results repeat bit for bit from run to run. Panels may hold fp16 or bf16 (--weights): the
// GEMV widens them as it streams them (half the bytes per token), the GEMM one K block of a panel at a
// time into L1.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/context.h"
#include "kernels/cpu/nbits.h"

namespace tern::kernels {

struct PackedMatrix {
  int64_t K = 0, N = 0;
  DType type = DType::Float32;     // of the elements: Float32, Float16 or BFloat16
  std::shared_ptr<Buffer> panels;  // [ceil(N / kPanel)][K][kPanel] elements
  int64_t bytes() const { return static_cast<int64_t>(panels->bytes()); }
};

extern const int64_t kPanel;  // columns per panel: 16 on x86-64 (the layout every tier reads), two NEON registers on AArch64

// Packs row-major B [K, N] (ONNX MatMul's weight, float32 or float16) as `type`; `transposed`: B is
// [N, K] and the product reads Bᵀ (FusedMatMul transB — a tied LM head reading the embedding table).
PackedMatrix pack_matrix(const Context& cx, const Tensor& B, DType type, bool transposed = false);
// The same for B given as its column blocks, [K, N_i] each side by side (a fused concatenation's parts, every
// one but the last a multiple of kPanel wide): each block's panels land where B's own would, with no copy of B.
PackedMatrix pack_matrix(const Context& cx, const std::vector<const Tensor*>& columns, DType type);

// B back as [N, K] row-major (each output column's weights contiguous, the layout GPU GEMVs stream):
// float16 for fp16 panels, float32 otherwise.
Tensor unpack_transposed(const PackedMatrix& B);

// Rows up to which matmul_packed streams the panels (GEMV, rows in groups of four per panel) rather than
// running the GEMM: the decode steps of a continuous batch of up to 16 sequences.
constexpr int64_t kPanelGemvMaxRows = 16;
// C[M, N] = A[M, K] · B, rows contiguous; any M ≥ 1 (the GEMV up to kPanelGemvMaxRows rows, else the GEMM).
void matmul_packed(const Context& cx, const float* A, int64_t M, const PackedMatrix& B, float* C);
// The kernel matmul_packed runs for M rows ("gemv_panels fp16", "gemm_panels fp32"…), for profiles.
std::string matmul_packed_kernel(int64_t M, const PackedMatrix& B, Isa isa);

// How matmul_nbits treats the activations: as fp32, or with precision to spare (MatMulNBits
// accuracy_level 4): decode rows quantized to int8 per block (gemv_nbits_i8), prefill rows (more than
// kGemvMaxRows) rounded to bf16 with the weights on AMX tiles at tier amx (gemm_rounded_bf16_amx), else the
// fp32 GEMM as for Float32. Int8EveryRow: every row as a decode row, through gemv_nbits_i8 four rows a pass —
// the arithmetic tokens are generated with, in a prefill too (tern eval scores it); 2x slower than the
// GEMM's prefill on Gemma-3-270M's perplexity windows (32 s against 16 s, 3 windows of 1,024, tier amx).
enum class NBitsActivations { Float32, Int8, Int8EveryRow };
// Panel j's rows [k0, k0 + kc) of B as [kc][kPanel] floats (columns past N zero), 64-byte aligned: a pointer into
// packed panels, or into `scratch` ([256][kPanel] floats) where they are widened or dequantized first. With `scratch`
// null it only answers where the block lies if it is read in place, and null if it would be made in scratch.
using PanelBlock = const float* (*)(const void* context, int64_t j, int64_t k0, int64_t kc, float* scratch);
// C[M, N] = A[M, K] · B for a B the caller makes a block at a time as the GEMM reads it (MatMulBnb4's codes,
// dequantized into L1 a block at a time).
void gemm_panel_source(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context, float* C);
// C[M, N] = A[M, K] · dequant(W)ᵀ for MatMulNBits weights (any bits/zero points dequantize_nbits takes).
void gemm_nbits(const Context& cx, const float* A, int64_t M, const NBitsWeights& W, float* C,
                NBitsActivations act = NBitsActivations::Float32);
// The same for any M: gemv_nbits(_i8) on the blocks as stored for a few rows when it takes them, else gemm_nbits.
void matmul_nbits(const Context& cx, const float* A, int64_t M, const NBitsWeights& W, float* C,
                  NBitsActivations act = NBitsActivations::Float32);
// "gemv_nbits int4", "gemm_nbits int8", "gemv_nbits_i8 int4 avx2"…
std::string matmul_nbits_kernel(int64_t M, const NBitsWeights& W, NBitsActivations act, Isa isa);

}  // namespace tern::kernels
