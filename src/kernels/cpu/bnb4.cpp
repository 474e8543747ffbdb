#include "kernels/cpu/bnb4.h"

#include <algorithm>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/parallel.h"

namespace tern::kernels {

namespace {

// The formats' 16 points, as bitsandbytes defines them: NF4 the quantiles of a normal distribution scaled to
// [−1, 1] (QLoRA, Dettmers et al. 2023); FP4 a sign, two exponent bits and one mantissa bit, scaled by 1/12.
constexpr float kNf4[16] = {-1.0f,
                            -0.6961928009986877f,
                            -0.5250730514526367f,
                            -0.39491748809814453f,
                            -0.28444138169288635f,
                            -0.18477343022823334f,
                            -0.09105003625154495f,
                            0.0f,
                            0.07958029955625534f,
                            0.16093020141124725f,
                            0.24611230194568634f,
                            0.33791524171829224f,
                            0.44070982933044434f,
                            0.5626170039176941f,
                            0.7229568362236023f,
                            1.0f};
constexpr float kFp4[16] = {0.0f,  5.208333333e-03f,  0.66666667f,  1.0f,  0.33333333f,  0.5f,  0.16666667f,  0.25f,
                            -0.0f, -5.208333333e-03f, -0.66666667f, -1.0f, -0.33333333f, -0.5f, -0.16666667f, -0.25f};

// The 4-bit code of flat index i: two a byte, the first in the high nibble.
inline uint8_t code_at(const uint8_t* codes, int64_t i) { return i % 2 ? codes[i / 2] & 15 : codes[i / 2] >> 4; }

// Up to this many rows of x read the codes directly (decode); more dequantize slices of W for a GEMM, where the
// lookups would be repeated for every row.
constexpr int64_t kGemvRows = 8;

const float* table_of(Bnb4Type type) { return type == Bnb4Type::NF4 ? kNf4 : kFp4; }

// The tier's rows where it has them and they take w's blocks.
bool tier_rows(const Bnb4Weights& w, const KernelTable& t) { return t.bnb4_rows.fn && w.K % w.block == 0 && w.block % 16 == 0; }

// Any K and block: each weight dequantized as it is read.
void gemv_bnb4_scalar(const float* x, int64_t M, const Bnb4Weights& w, int64_t n0, int64_t n1, float* y) {
  const float* table = table_of(w.type);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t m = 0; m < M; ++m) {
      float sum = 0;
      for (int64_t k = 0; k < w.K; ++k) {
        const int64_t i = n * w.K + k;
        sum += x[m * w.K + k] * (table[code_at(w.codes, i)] * w.absmax[i / w.block]);
      }
      y[m * w.N + n] = sum;
    }
}

// Columns [n0, n0 + kPanel) of Wᵀ (rows of W; past N zero) over k [k0, k0 + kc) into `out` as [kc][kPanel]: each
// value dequantize_bnb4's, a block's 16 points times its absmax looked up per code.
void panel_block_of(const Bnb4Weights& w, int64_t n0, int64_t k0, int64_t kc, float* out) {
  const float* table = table_of(w.type);
  const int64_t columns = std::min(kPanel, w.N - n0);
  if (columns < kPanel) std::fill(out, out + kc * kPanel, 0.0f);
  for (int64_t c = 0; c < columns; ++c) {
    const int64_t row = (n0 + c) * w.K;
    for (int64_t k = k0; k < k0 + kc;) {  // a run of one block at a time
      const int64_t block = (row + k) / w.block, end = std::min(k0 + kc, (block + 1) * w.block - row);
      float points[16];
      for (int q = 0; q < 16; ++q) points[q] = table[q] * w.absmax[block];
      for (; k < end; ++k) out[(k - k0) * kPanel + c] = points[code_at(w.codes, row + k)];
    }
  }
}

}  // namespace

void dequantize_bnb4(const Context& cx, const uint8_t* codes, const float* absmax, int64_t numel, int64_t block, Bnb4Type type,
                     float* out) {
  const float* table = table_of(type);
  const int64_t blocks = (numel + block - 1) / block;
  parallel_chunks(cx.threads, blocks, balanced_chunks(cx.threads, blocks, numel < (int64_t{1} << 16)), [&](int64_t b0, int64_t b1, int) {
    for (int64_t i = b0 * block; i < std::min(numel, b1 * block); ++i) {
      out[i] = table[code_at(codes, i)] * absmax[i / block];
    }
  });
}

std::string matmul_bnb4_kernel(int64_t M, const Bnb4Weights& w, Isa isa) {
  if (M > kGemvRows) return "gemm bnb4 (dequantized a block at a time)";
  const KernelTable& t = kernel_table(isa);
  return tier_rows(w, t) ? std::string("gemv bnb4 ") + t.bnb4_rows.name : "gemv bnb4";
}

void matmul_bnb4(const Context& cx, const float* x, int64_t M, const Bnb4Weights& w, float* y) {
  if (M <= kGemvRows) {
    const KernelTable& t = kernel_table(cx.isa);
    const auto rows = tier_rows(w, t) ? t.bnb4_rows.fn : nullptr;
    parallel_chunks(cx.threads, w.N, balanced_chunks(cx.threads, w.N, w.N * w.K < (int64_t{1} << 16)), [&](int64_t n0, int64_t n1, int) {
      if (rows) return rows(x, M, w, table_of(w.type), n0, n1, y);
      gemv_bnb4_scalar(x, M, w, n0, n1, y);
    });
    return;
  }
  // The GEMM dequantizes one block of 16 columns at a time into L1 as it reads it, the lookups shared by the M rows
  // (SmolLM2-135M's bnb4 prefill, 64 tokens, Zen 3: 139 tok/s through the reference GEMM on an unpacked slice,
  // 205-253 with 4 MB slices dequantized into panels; float32 panels made once at load gave 464, for 8x the memory).
  gemm_panel_source(
      cx, x, M, w.K, w.N,
      [](const void* context, int64_t j, int64_t k0, int64_t kc, float* scratch) -> const float* {
        if (scratch) panel_block_of(*static_cast<const Bnb4Weights*>(context), j * kPanel, k0, kc, scratch);
        return scratch;
      },
      &w, y);
}

}  // namespace tern::kernels
