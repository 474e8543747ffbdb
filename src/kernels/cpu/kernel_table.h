// The kernels each ISA tier runs (isa.h), one table per tier, as MLAS's platform table: every kernel that differs
// between tiers is an entry {name, function}, and a caller runs `kernel_table(cx.isa).entry.fn` — the one way a
// tier is picked — and names what ran by the entry's name (the profiler's "gemm_panels fp32 avx512").
//
// A tier's table is the table of the tier below it with the entries its own files provide: each tier has one fill
// function in its folder (x86/tier_avx512.cpp's fill_tier_avx512, arm/tier_neondot.cpp, scalar/tier_scalar.cpp)
// and one line in isa.cpp's tier list (its name, the tier below it, its fill, whether the CPU runs it). The baseline's entries (the kernels
// written once over the vector width, *_impl.h) come from width_kernels.h. An entry without a function is a kernel
// the tier lacks; its caller takes the general path.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/cpu/bnb4.h"
#include "kernels/cpu/chunk_attention.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/gemv_nbits_f32.h"
#include "kernels/cpu/gemv_nbits_i8.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/peak.h"
#include "kernels/cpu/ring_attention.h"
#include "kernels/cpu/swiglu.h"

namespace tern::kernels {

// One kernel: what profiles call it (its tier's name for kernels that differ only by tier: "avx512"; "" for the
// baseline's) and its function. No default member values: tables are built by value-initialization and filled
// by plain assignments, so no inline constructor compiled with a tier's flags is ever shared with baseline code.
template <typename Fn>
struct Kernel {
  const char* name;
  Fn* fn;
};

// The int8·uint8 dot products of MatMulInteger's codes (gemm_integer.h): their function, their offset on the
// codes, whether they take uint8 weights as b − 128, and the layout they read the codes in (none: as they are).
struct IntegerDots {
  void (*fn)(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, bool flip, int64_t n0, int64_t n1, int32_t* dots, int64_t N);
  int32_t code_offset;
  bool flips_unsigned_weights;
  void (*layout)(const uint8_t* codes, int64_t M, int64_t K, uint8_t* out);
  int64_t (*layout_bytes)(int64_t M, int64_t K);
};

struct KernelTable {
  // Float GEMM and GEMV over packed panels (gemm_packed.h)
  Kernel<void(const Context&, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context, float* C)> gemm_tiles;
  Kernel<void(const Context&, const float* x, int64_t M, const PackedMatrix& B, float* y)> gemv_panels;
  // bf16 panels multiplied in bf16 (none: widened to fp32 for gemm_tiles)
  Kernel<void(const Context&, const float* A, int64_t M, int64_t K, int64_t N, const uint16_t* panels, float* C)> gemm_bf16;
  // MatMulNBits prefill rows with int8-activation precision, rounded to bf16 (none: gemm_tiles in fp32)
  Kernel<void(const Context&, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context, float* C)>
      gemm_rounded_bf16;
  // MatMulNBits (nbits.h, gemv_nbits.h): a block dequantized for the GEMM, the fp32- and int8-activation GEMVs
  Kernel<void(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld)> dequantize_nbits_block;
  Kernel<void(const Context&, const float* x, int64_t M, const NBitsWeights& w, float* y)> gemv_nbits;
  Kernel<void(const Context&, const float* x, int64_t M, const NBitsWeights& w, float* y)> gemv_nbits_i8;
  //   the grouped weights' rows, where the tier has its own (none: the width's, gemv_nbits_impl.h)
  Kernel<void(const FloatRow* x, int64_t M, const NBitsWeights& w, int64_t g0, int64_t g1, float* y, int64_t ldy)> nbits_grouped_rows;
  //   whether 8-bit weights are grouped for the fp32 GEMV (faster than as stored only with this tier's rows)
  bool nbits_groups_8bit;
  //   rows in the file's layout the tier reads its own way where `takes` says so, activations at `position`
  Kernel<void(const float* xs, const NBitsWeights& w, int64_t n0, int64_t n1, float* y)> nbits_wide_rows;
  bool (*nbits_wide_rows_take)(const NBitsWeights& w);
  int64_t (*nbits_wide_position)(int64_t k, int64_t bits);
  //   the int8 dot products (none: the tier has no int8 GEMV)
  Kernel<void(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy)> nbits_i8_rows;
  // bitsandbytes 4-bit rows, K a multiple of the block, the block of 16 (none: the scalar lookups)
  Kernel<void(const float* x, int64_t M, const Bnb4Weights& w, const float* table, int64_t n0, int64_t n1, float* y)> bnb4_rows;
  // MatMulInteger (gemm_integer.h): centered int16 codes times the weights, and the tier's dot products on the codes
  Kernel<void(const int16_t* a, int64_t M, int64_t K, const int8_t* w, int64_t n0, int64_t n1, int32_t* c, int64_t N)> integer_rows_s8;
  Kernel<void(const int16_t* a, int64_t M, int64_t K, const uint8_t* w, int64_t n0, int64_t n1, int32_t* c, int64_t N)> integer_rows_u8;
  //   DynamicQuantizeLinear's range (min and max with 0) and its uint8 codes (gemm_integer.h)
  Kernel<void(const float* x, int64_t n, float& lo, float& hi)> u8_range;
  Kernel<void(const float* x, int64_t n, float scale, uint8_t zero_point, uint8_t* q)> quantize_u8;
  IntegerDots integer_dots;      // decode and prefill rows (none: integer_rows)
  IntegerDots integer_dots_amx;  // prefill rows from kIntegerAmxMinRows on (none: integer_dots)
  // Attention over the ring (ring_attention.h) and over a prompt chunk (chunk_attention.h)
  Kernel<void(const float* q, float* out, const RingAttentionArgs<float>& a)> ring_attention_f32;
  Kernel<void(const float* q, float* out, const RingAttentionArgs<f16>& a)> ring_attention_f16;
  Kernel<void(const float* q, float* out, const RingAttentionArgs<KvBlockQ8_0>& a)> ring_attention_q8_0;
  Kernel<void(const float* q, float* out, const RingAttentionArgs<KvBlockQ4_0>& a)> ring_attention_q4_0;
  Kernel<void(const ChunkAttentionArgs& a)> chunk_attention;
  // Row-wise kernels (swiglu.h, norm.h)
  Kernel<void(const Context&, const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n, GateActivation act)>
      swiglu_rows;
  Kernel<void(const Context&, const float* x, float* y, const NormArgs& a)> normalize_rows;
  // The FLOP-limit probe (peak.h)
  Kernel<FmaChains(int64_t iterations, float seed)> fma_chains;
};

// The table of tier `isa`, built at first use; a tier this CPU cannot run fails, naming what it has.
const KernelTable& kernel_table(Isa isa);
// How profiles name a kernel that ran through an entry: `what` and the entry's tier ("gemm_panels fp32 avx512"),
// `what` alone for the baseline's entries (named "").
std::string profile_name(const std::string& what, const char* entry_name);

// The baseline's entries (width_kernels.cpp): the width kernels of the build's baseline (sse42, avx2 or neon),
// where every root tier's table starts (isa.cpp's tier list, which also declares each tier's fill).
void fill_baseline(KernelTable& t);

}  // namespace tern::kernels
