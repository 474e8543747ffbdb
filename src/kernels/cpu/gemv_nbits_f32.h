// Decode rows of MatMulNBits with fp32 activations over grouped 4-bit and 2-bit weights (nbits.h: 16 output rows
// a group, one int32 lane a row): MatMulNBits' accuracy levels 0-3, what ONNX Runtime's quantizer and `tern
// quantize` write by default. Per 16-row group and block,
//   y[n] += ws[n,kb] · (Σ_k q[n,k] · x[k] − zp[n,kb] · Σ_k x[k])
// the sums in fp32 over one lane a row, so no reduction across lanes; four accumulators a row for 4-bit codes (low
// and high nibbles, even and odd 64-byte runs: a 4-bit block of 16 is a chunk's low or high half), eight for 2-bit
// ones (a pair of codes each), so that the chains overlap. The kernel is written once over a
// register set (gemv_nbits_f32_impl.h): the AVX-512 tier's own file, AVX2 (the float_avx2 twin), NEON on AArch64,
// and a scalar one — each summing in the same order with fused multiply-adds, so every tier gives the same bits.
#pragma once
#include <cstdint>

#include "kernels/cpu/nbits.h"

namespace tern::kernels {

// One activation row for the grouped kernel: values padded with zeros to whole 32-value chunks, the sum of each
// block's values (what the zero points multiply), and for 2-bit weights each value pair's table of sums,
// pairs[16p + (c0 + 4·c1)] = fma(c1, x[2p + 1], c0 · x[2p]) (pair_sums): two codes become one lookup and one add.
struct FloatRow {
  const float* x = nullptr;      // [k_blocks · block]
  const float* sum = nullptr;    // [k_blocks]
  const float* pairs = nullptr;  // 2-bit: [k_blocks · block / 2, 16]
};

// Activation rows a kernel call takes at most (each weight byte is read once for them all).
constexpr int64_t kFloatRowsAPass = 4;

#if defined(__x86_64__)
// y[m, n] (row stride ldy) for the M ≤ kFloatRowsAPass rows x[0..M) and the rows of groups [g0, g1).
void gemv_nbits_f32_avx512(const FloatRow* x, int64_t M, const NBitsWeights& w, int64_t g0, int64_t g1, float* y, int64_t ldy);

// Weights in the file's layout that AVX2's per-row kernel (gemv_nbits_impl.h) leaves compute-bound: 2-bit blocks
// of 32 or more and 4-bit blocks of 16, each row's bytes in whole 16-byte steps (1.12-1.30x AVX2's rows: the
// measurement is in x86/gemv_nbits_rows_avx512.cpp).
bool gemv_nbits_rows_avx512_takes(const NBitsWeights& w);
// Where value k of a row goes in the activations this kernel reads (per 16-byte step of 2-bit codes the values at
// bits 2t of byte l at 16t + l; of 4-bit ones, low nibbles first).
int64_t nbits_rows_avx512_position(int64_t k, int64_t bits);
// y[n] = Σ_kb scale[n, kb] · Σ_k q[n, k] · xs[position(k)] for n in [n0, n1): the codes' part, without the zero
// points' (the caller takes zp · scale · Σ x per block off, as for AVX2).
void gemv_nbits_rows_avx512(const float* xs, const NBitsWeights& w, int64_t n0, int64_t n1, float* y);
#endif

}  // namespace tern::kernels
