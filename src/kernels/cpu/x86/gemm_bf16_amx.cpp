// gemm_avx512.h's bf16 GEMM on AMX tiles. TDPBF16PS multiplies a 16 × 32 bf16 tile of A by a 32 × 16 tile
// of B — 16 rows of (k, k+1) pairs, the layout interleave_bf16_pairs writes — into a 16 × 16 fp32 tile of
// C: 8192 products an instruction. A block of C is 32 rows × 32 columns (two panels): four C tiles, two A
// tiles, two B tiles — the 8 tile registers. The loops are the AVX-512 driver's: A rounded to bf16 once per
// call ([M padded to 32][K padded to 32], zeros past M and K), column blocks of panel pairs, K blocks whose
// interleaved pair of panels serves every row block of A, each K block's sum added to C.
#include <immintrin.h>

#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/x86/amx_tiles.h"
#include "kernels/cpu/x86/gemm_avx512_tiles.h"

namespace tern::kernels {
namespace {

constexpr int64_t kTK = 32;  // K per tile step: a 64-byte row of bf16
constexpr int64_t kMB = 32;  // C block rows: two A tiles
// K block: two panels' interleaved block is 128 KB (L2). Fewer blocks mean fewer trips of the C block
// through memory: `tern bench-op matmul --shape 128,2048,8192 --weights bf16 --threads 1` (Sapphire
// Rapids-class Xeon, means of 2 runs) 552 GFLOP/s at 256, 562 at 512, 604 at 1024, 658 at 2048; with A's
// padded rows 620 at 512, 729 at 2048; at 128,8192,2048 661 at 2048 against 530 at 8192.
constexpr int64_t kKB = 2048;

// Rows [m0, m0 + kMB) of A as bf16 into out (rows `ld` apart, Kpad values each), zeros past M and past K (round to nearest even;
// VCVTNEPS2BF16 reads denormals as zero, as AMX itself does).
void round_rows(const float* A, int64_t M, int64_t K, int64_t Kpad, int64_t ld, int64_t m0, uint16_t* out) {
  for (int64_t r = 0; r < kMB; ++r) {
    uint16_t* row = out + r * ld;
    const int64_t m = m0 + r;
    if (m >= M) {
      std::memset(row, 0, static_cast<size_t>(Kpad) * sizeof(uint16_t));
      continue;
    }
    for (int64_t k = 0; k < Kpad; k += 16) {
      const int64_t n = std::clamp<int64_t>(K - k, 0, 16);
      const __mmask16 m16 = static_cast<__mmask16>(n == 16 ? 0xffff : (1u << n) - 1);
      const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m16, A + m * K + k));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + k), (__m256i)v);
    }
  }
}

// Rows [k0, k0 + kc) of an fp32 block ([kc][16], as PanelBlock gives it) as bf16 pairs, rounded to nearest
// even, the second 0 past kc; the pair rows written.
int64_t round_pairs(const float* block, int64_t kc, uint16_t* out) {
  const __m512i idx = _mm512_load_si512(kBf16Pairs);
  int64_t p = 0;
  for (; 2 * p < kc; ++p) {
    const __m512 lo = _mm512_load_ps(block + 2 * p * kTileP);
    const __m512 hi = 2 * p + 1 < kc ? _mm512_load_ps(block + (2 * p + 1) * kTileP) : _mm512_setzero_ps();
    _mm512_store_si512(out + p * 2 * kTileP, _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo)));
  }
  return p;
}

// C = bf16(A) · B for the pair blocks `pairs(j, k0, kc, out)` writes (returning the pair rows written).
template <typename Pairs>
void amx_gemm(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, const Pairs& pairs_of, float* C) {
  const int64_t Kpad = (K + kTK - 1) / kTK * kTK, row_blocks = (M + kMB - 1) / kMB;
  // A's rows one cache line longer than Kpad: at a power-of-two stride (K 2048: 4 KB) a tile's 16 rows fall
  // in one L1 set and evict one another.
  const int64_t ld = Kpad + kTK;
  const int64_t n_panels = (N + kTileP - 1) / kTileP, pairs = (n_panels + 1) / 2;
  uint16_t* ap = cx.workspace().take<uint16_t>(Workspace::AmxA, row_blocks * kMB * ld);
  // Each thread's two panels' pair blocks (a multiple of 64 bytes each, so each starts aligned).
  constexpr int64_t kPairBlocks = 2 * kKB * kTileP;
  uint16_t* b_blocks = cx.workspace().take<uint16_t>(Workspace::AmxB, cx.threads * kPairBlocks);
  parallel_chunks(cx.threads, row_blocks, balanced_chunks(cx.threads, row_blocks), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) round_rows(A, M, K, Kpad, ld, i * kMB, ap + i * kMB * ld);
  });
  const int64_t lda = ld * static_cast<int64_t>(sizeof(uint16_t));
  parallel_chunks(cx.threads, pairs, balanced_chunks(cx.threads, pairs), [&](int64_t t_begin, int64_t t_end, int slot) {
    load_tiles_16x64();
    uint16_t* b[2] = {b_blocks + slot * kPairBlocks, b_blocks + slot * kPairBlocks + kKB * kTileP};
    alignas(64) float block[kMB * 2 * kTileP];
    for (int64_t tc = t_begin; tc < t_end; tc += kTileNC)
      for (int64_t k0 = 0; k0 < K; k0 += kKB) {
        const int64_t kc = std::min(kKB, K - k0), steps = (kc + kTK - 1) / kTK;
        for (int64_t t = tc; t < std::min(t_end, tc + kTileNC); ++t) {
          const int64_t j = 2 * t;
          for (int64_t h = 0; h < 2; ++h) {  // pair rows past kc (to the step's end) and a missing panel: zeros
            const int64_t written = j + h < n_panels ? pairs_of(j + h, k0, kc, b[h]) : 0;
            std::memset(b[h] + written * 2 * kTileP, 0, static_cast<size_t>((steps * kTK / 2 - written) * 2 * kTileP) * sizeof(uint16_t));
          }
          const int64_t nr = std::min<int64_t>(2 * kTileP, N - j * kTileP);
          for (int64_t i = 0; i < row_blocks; ++i) {
            const uint16_t* a = ap + i * kMB * ld + k0;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t s = 0; s < steps; ++s) {
              _tile_loadd(4, a + s * kTK, lda);
              _tile_loadd(5, a + 16 * ld + s * kTK, lda);
              _tile_loadd(6, b[0] + s * kTK * kTileP, 64);
              _tile_loadd(7, b[1] + s * kTK * kTileP, 64);
              _tile_dpbf16ps(0, 4, 6);
              _tile_dpbf16ps(1, 4, 7);
              _tile_dpbf16ps(2, 5, 6);
              _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, block, 2 * kTileP * sizeof(float));
            _tile_stored(1, block + kTileP, 2 * kTileP * sizeof(float));
            _tile_stored(2, block + 16 * 2 * kTileP, 2 * kTileP * sizeof(float));
            _tile_stored(3, block + 16 * 2 * kTileP + kTileP, 2 * kTileP * sizeof(float));
            add_block(block, 2 * kTileP, C + i * kMB * N + j * kTileP, N, k0 > 0, std::min(kMB, M - i * kMB), nr);
          }
        }
      }
    _tile_release();
  });
}

}  // namespace

void gemm_bf16_amx(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, const uint16_t* panels, float* C) {
  amx_gemm(
      cx, A, M, K, N,
      [&](int64_t j, int64_t k0, int64_t kc, uint16_t* out) { return interleave_bf16_pairs(panels + j * K * kTileP, k0, kc, out); }, C);
}

void gemm_rounded_bf16_amx(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context,
                           float* C) {
  amx_gemm(
      cx, A, M, K, N,
      [&](int64_t j, int64_t k0, int64_t kc, uint16_t* out) {
        alignas(64) float scratch[kTileKC * kTileP];  // PanelBlock's rows at a time: even, so the pairs line up
        int64_t written = 0;
        for (int64_t k = 0; k < kc; k += kTileKC) {
          const int64_t rows = std::min(kTileKC, kc - k);
          written += round_pairs(block(context, j, k0 + k, rows, scratch), rows, out + written * 2 * kTileP);
        }
        return written;
      },
      C);
}

}  // namespace tern::kernels
