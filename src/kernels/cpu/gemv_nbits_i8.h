// Decode rows of MatMulNBits with the activations quantized to int8 per weight block — what ONNX Runtime
// does for accuracy_level 4 and llama.cpp for every quantized matrix (its Q8 activations). Integer dot
// products replace the float unpacking of gemv_nbits: per block of row n,
//   y[n] += ws[n,kb] · xs[kb] · (Σ_k q[n,k] · xq[k] − zp[n,kb] · Σ_k xq[k])
// with the products summed exactly in int32. One entry point per ISA tier (x86/gemv_nbits_i8_<tier>.cpp,
// arm/gemv_nbits_i8_<tier>.cpp, each compiled with its tier's flags); gemv_nbits.cpp quantizes the
// activations and picks the tier.
#pragma once
#include <cstdint>

#include "kernels/cpu/nbits.h"

namespace tern::kernels {

// One activation row, quantized per weight block (symmetric: xq = round(x / xs), xs = max|x| / 127).
// For 4-bit weights in the file's layout (the ARM kernels) the values come reordered per 64 (two 32-value
// chunks A, B) as [A evens | B evens | A odds | B odds], 16 each, to meet the nibbles of 32 weight bytes
// (rows4 in arm/gemv_nbits_i8_impl.h); otherwise in order. Padded with zeros to a multiple of 64.
struct Int8Row {
  const int8_t* q = nullptr;           // [k_blocks · block, rounded up to 64]
  const float* scale = nullptr;        // [k_blocks] xs
  const float* sum = nullptr;          // [k_blocks] xs · Σ xq: the zero points' share
  const int32_t* chunk_sum = nullptr;  // [chunks, rounded up to 2] Σ xq per 32 values: the default zero point's
  const int32_t* block_sum = nullptr;  // [k_blocks] Σ xq per weight block: the zero points' (x86's grouped weights)
  const int32_t* lane_sum = nullptr;   // 8-bit weights, x86: [k_blocks · 8] Σ xq of each int32 lane (bytes 4l..4l+3
                                       // of every 32) over a block (a pair of blocks of 16): what offset weights
                                       // take off each lane
};

// Activation rows a kernel call takes at most (grouped weights are read once for them all).
constexpr int64_t kInt8RowsAPass = 4;

// y[m, n] (row stride ldy) for the M ≤ kInt8RowsAPass activation rows x[0..M) and n in [n0, n1) (grouped weights: the
// rows of groups [n0, n1), read once for all M). Weights of 4 or 8 bits, block a multiple of 32 (8-bit blocks of 16
// too: on x86 with K a multiple of 32, on ARM any); on x86, 4-bit weights grouped (nbits.h), on ARM as stored.
#if defined(__x86_64__)
void gemv_nbits_i8_avx2(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy);
void gemv_nbits_i8_avxvnni(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy);
void gemv_nbits_i8_avx512vnni(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy);
#elif defined(__aarch64__)
void gemv_nbits_i8_neon(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy);
void gemv_nbits_i8_neondot(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy);
void gemv_nbits_i8_neoni8mm(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy);
#endif

}  // namespace tern::kernels
