// ONNX Runtime's MatMulNBits weight layout: weights [N, K] stored row by row in blocks of `block`
// values, `bits` per value (packed low bits first), one scale and one zero point per (row, block).
// Dequantization writes W transposed, [K, N] row-major, ready for C = A·W; quantization makes the
// layout from such a W (for --weights int8/int4 and `tern quantize`).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/context.h"

namespace tern::kernels {

//
// Grouped (group_nbits_rows): 4-bit weights re-laid 16 output rows at a time for the decode GEMVs (x86's both,
// AArch64's fp32 one), so that one int32 lane of a dot product is one row and a row's sum needs no reduction at the end:
// chunk c (32 values) of group g is 256 bytes, four runs of 64 — run j holds 4 bytes of each of the 16
// rows, byte t with value 4j + t in its low nibble and 16 + 4j + t in its high one. Scales and zero points
// go [group, k_blocks, 16]; zero points one byte each; scales in fp16 when every one of them is exactly an
// fp16 (GGUF's Q4_0 / Q4_1 scales are: a token then streams 4.5 bits a weight, as llama.cpp's Q4_0 does,
// not 5), else fp32. Rows past N are zeros. 2- and 8-bit weights group the same way for the fp32-activation GEMV:
// chunk c of group g is `bits` runs of 64 bytes — run j holds each row's own 4 bytes 4·bits·c + 4j.. as the file packs
// them (2-bit: two runs, value 32c + 16j + s at bits 2s of its lane; 8-bit: eight runs, value 32c + 4j + t in byte t).
struct NBitsWeights {
  int64_t N = 0, K = 0, bits = 4, block = 32;
  const uint8_t* data = nullptr;       // [N, k_blocks, block·bits/8]; grouped: [groups, k_blocks·block/32, bits, 16, 4]
  const float* scales = nullptr;       // [N·k_blocks]; grouped: [groups, k_blocks, 16]
  const uint8_t* zp_packed = nullptr;  // [N, ceil(k_blocks·bits/8)] or null; grouped: [groups, k_blocks, 16]
  const float* zp_float = nullptr;     // [N·k_blocks] or null; default zero point 2^(bits−1); grouped: as scales
  bool grouped = false;
  const f16* scales_f16 = nullptr;  // grouped: the scales as fp16, instead of `scales`
};
constexpr int64_t kNBitsGroupRows = 16;
// A grouped chunk's bytes: 32 values of 16 rows, `bits` runs of 64 bytes.
constexpr int64_t nbits_chunk_bytes(int64_t bits) { return kNBitsGroupRows * 4 * bits; }
// How far ahead gemv_nbits_i8's per-row kernels (x86 and ARM) request a weight row's bytes (in rows: two row groups
// of 4): the hardware prefetcher alone left the 49152×576 Q8_0 lm_head of SmolLM2 at 11.8 GB/s with 2 threads
// (Zen 3, 28.3 GB/s measured); with this, 22–30 GB/s (4 rows ahead: 23.5; 16: 22.6–25.2 — noisy VM, 8 chosen).
// Reading past the last row is harmless: a prefetch never faults. (The fp32-activation rows read in the file's
// layout gained nothing from it on a Xeon at 38.7 GB/s: 8-bit blocks 1.84-1.95 → 1.98-2.09 ms a 4096 x 14336 row,
// already 35-37 GB/s without; bench/nbits_decode.py, alternated.)
constexpr int64_t kNBitsPrefetchRows = 8;
inline int64_t nbits_k_blocks(const NBitsWeights& w) { return (w.K + w.block - 1) / w.block; }
// 16-row groups of the grouped layout (the last one padded with zero rows).
inline int64_t nbits_groups(const NBitsWeights& w) { return (w.N + kNBitsGroupRows - 1) / kNBitsGroupRows; }

// Where row n's block kb keeps its scale (and a float zero point) in either layout, and the scale.
inline int64_t nbits_scale_index(const NBitsWeights& w, int64_t n, int64_t kb) {
  return w.grouped ? ((n / kNBitsGroupRows) * nbits_k_blocks(w) + kb) * kNBitsGroupRows + n % kNBitsGroupRows : n * nbits_k_blocks(w) + kb;
}
inline float nbits_scale(const NBitsWeights& w, int64_t n, int64_t kb) {
  const int64_t i = nbits_scale_index(w, n, kb);
  return w.scales_f16 ? static_cast<float>(w.scales_f16[i]) : w.scales[i];
}

// The zero points of row n of weights in the file's layout, block by block: the float one given (a GGUF Q4_1
// block's −min/scale), the packed one, or the default 2^(bits−1) — with the row found once (the per-row decode
// kernels read one a block). In an unnamed namespace, as nbits_zero_point is `static`: the per-ISA kernel files
// (x86/*_<tier>.cpp) compile their own copy with their own flags, and internal linkage keeps each copy in its
// file (an inline function would let the linker pick an AVX-512 copy for every caller).
namespace {
struct NBitsRowZeroPoints {
  const uint8_t* packed = nullptr;
  const float* floats = nullptr;
  float fixed = 0;
  int64_t bits = 4;
  NBitsRowZeroPoints() = default;
  NBitsRowZeroPoints(const NBitsWeights& w, int64_t n, int64_t k_blocks)
      : packed(w.zp_packed ? w.zp_packed + n * ((k_blocks * w.bits + 7) / 8) : nullptr),
        floats(w.zp_float ? w.zp_float + n * k_blocks : nullptr),
        fixed(static_cast<float>(int64_t{1} << (w.bits - 1))),
        bits(w.bits) {}
  float at(int64_t kb) const {
    if (packed) return static_cast<float>((packed[kb * bits / 8] >> (kb * bits % 8)) & ((1 << bits) - 1));
    return floats ? floats[kb] : fixed;
  }
};
}  // namespace

// The zero point of row n's block kb, in either layout.
static inline float nbits_zero_point(const NBitsWeights& w, int64_t n, int64_t kb, int64_t k_blocks) {
  if (!w.grouped) return NBitsRowZeroPoints(w, n, k_blocks).at(kb);
  if (w.zp_float) return w.zp_float[nbits_scale_index(w, n, kb)];
  if (!w.zp_packed) return static_cast<float>(int64_t{1} << (w.bits - 1));
  return static_cast<float>(w.zp_packed[nbits_scale_index(w, n, kb)]);
}

void dequantize_nbits_transposed(const NBitsWeights& w, float* out_kn);

// Block-quantized weights that own their bytes (tensors, so the memory cap counts them).
struct QuantizedWeights {
  int64_t N = 0, K = 0, bits = 4, block = 32;
  Tensor data, zero_points;  // uint8 [N·k_blocks·block·bits/8]; uint8 [N·ceil(k_blocks·bits/8)], float32 or none
  Tensor scales;             // float32 [N·k_blocks]; grouped: float32 or float16
  bool grouped = false;      // in NBitsWeights' grouped layout
  NBitsWeights view() const {
    const bool zp_float = zero_points.defined() && zero_points.dtype() == DType::Float32;
    const bool half = scales.dtype() == DType::Float16;
    return {N,
            K,
            bits,
            block,
            data.data<uint8_t>(),
            half ? nullptr : scales.data<float>(),
            zero_points.defined() && !zp_float ? zero_points.data<uint8_t>() : nullptr,
            zp_float ? zero_points.data<float>() : nullptr,
            grouped,
            half ? scales.data<f16>() : nullptr};
  }
  int64_t bytes() const {
    return static_cast<int64_t>(data.nbytes() + scales.nbytes() + (zero_points.defined() ? zero_points.nbytes() : 0));
  }
};

// Whether the decode GEMVs of this build take these weights grouped (group_nbits_rows): 2- and 4-bit blocks a
// multiple of 32, or of 16 in whole chunks (a chunk then holds two blocks: 4-bit, its low nibbles the first; 2-bit,
// its first run) — on x86 for both GEMVs (the int8 one takes 4-bit blocks of 32 and more, the rest go to the fp32
// one), on AArch64 for the fp32-activation one (its int8 GEMV reads the file's layout): there when the decode's
// activations stay fp32; and 8-bit blocks the same way for the fp32 GEMV (x86 from AVX-512). Re-laid (and in huge
// pages, like every large tensor tern allocates), the 1B shape's Q4_0 decode streamed its MatMulNBits at 25.1 GB/s
// where the file's layout gave 21.0 (`tern profile --steps decode`, 2 threads, Xeon with AVX-512 VNNI), and 0.698 GB
// a token with fp16 scales, not 0.775.
bool nbits_groups_native(const NBitsWeights& w, Isa isa, bool int8_activations = false);
// The weights in the grouped layout: data, zero points (uint8 or float32, or none as given), scales
// (float16 when that loses nothing, else float32). A few hundred rows at a time; after each, `rows_done(n0,
// n1)` (when given) is told that rows [n0, n1) of w are not read again — the caller drops their file pages.
QuantizedWeights group_nbits_rows(const Context& cx, const NBitsWeights& w, const std::function<void(int64_t, int64_t)>& rows_done = {});
// The same for weights given as parts, their rows one after another (a fused concatenation's, each part but the
// last a multiple of kNBitsGroupRows rows: its groups land where the whole's would, with no copy of the whole);
// rows_done(part, n0, n1) names the part the rows are of.
QuantizedWeights group_nbits_rows(const Context& cx, const std::vector<NBitsWeights>& parts,
                                  const std::function<void(size_t, int64_t, int64_t)>& rows_done = {});
// The size of each part group_nbits_rows makes: {data, zero points (0: none), scales} elements.
std::vector<int64_t> nbits_group_sizes(const NBitsWeights& w);

// Quantizes W [K, N] row-major (an ONNX MatMul weight) per column block, as ONNX Runtime's MatMulNBits
// quantizer does: asymmetric — the range of each block stretched to include 0, q = round(w / scale) + zp
// clamped to [0, 2^bits − 1] — or symmetric (no zero points: the default 2^(bits−1)), scale = the block's
// value of largest magnitude / −2^(bits−1), so that value is exact (llama.cpp's Q4_0 rule). Each scale is
// rounded up to the next float16 (still stored as float32): grouped for decode (group_nbits_rows) a token
// then streams 2-byte scales, 4.5 + 0.25 bits a weight instead of 5 for blocks of 32; a scale moves by at most
// 2^-11 of itself, far inside the quantization's own step. bits 4 or 8; block a power of two ≥ 16.
QuantizedWeights quantize_nbits(const Context& cx, const float* W, int64_t K, int64_t N, int64_t bits, int64_t block,
                                bool symmetric = false);
// The part rows [n0, n1) × columns [k0, k1) of W, transposed: out[(k − k0)·ld + (n − n0)].
void dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld);

}  // namespace tern::kernels
