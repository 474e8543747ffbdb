// gemm_avx512.h's bf16 GEMM: A broadcast one (k, k+1) bf16 pair at a time, each vdpbf16ps a step of two K
// rows. B's panels hold rows of 16 bf16; vdpbf16ps wants each column's (k, k+1) pair in one 32-bit lane, so
// each K block of a panel is interleaved once into L1 (one vpermw per row pair) and then serves every row
// panel of A.
#include "core/dtype.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/x86/gemm_avx512_tiles.h"

namespace tern::kernels {
namespace {

// Lane 2c takes row k's column c, lane 2c + 1 row k + 1's.
alignas(64) constexpr uint16_t kPairs[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                            8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

struct Bf16Steps {
  using A = uint32_t;  // element k in the low half, k + 1 (0 past K) in the high
  static constexpr int64_t kK = 2;
  const uint16_t* panels;
  int64_t K;
  uint32_t a_element(const float* row, int64_t k, int64_t K) const {
    return bf16(row[k]).bits | (k + 1 < K ? uint32_t{bf16(row[k + 1]).bits} : 0u) << 16;
  }
  // Rows [k0, k0 + kc) of panel j as pairs: out[p][c] = (B[k0 + 2p][c], B[k0 + 2p + 1][c]), the second 0 past K.
  const float* b_block(int64_t j, int64_t k0, int64_t kc, float* scratch) const {
    const uint16_t* panel = panels + j * K * kTileP;
    const __m512i idx = _mm512_load_si512(kPairs);
    int64_t p = 0;
    for (; 2 * p + 1 < kc; ++p)
      _mm512_store_si512(scratch + p * kTileP, _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(panel + (k0 + 2 * p) * kTileP)));
    if (2 * p < kc)  // odd K: the last row with a zero row
      _mm512_store_si512(scratch + p * kTileP, _mm512_permutexvar_epi16(idx, _mm512_maskz_loadu_epi16(0xffff, panel + (k0 + 2 * p) * kTileP)));
    return scratch;
  }
  __m512 madd(__m512 acc, uint32_t a, __m512 b) const {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(static_cast<int>(a)), (__m512bh)b);
  }
};

}  // namespace

void gemm_bf16_avx512bf16(const float* A, int64_t M, int64_t K, int64_t N, const uint16_t* panels, float* C) {
  avx512_gemm(Bf16Steps{panels, K}, A, M, K, N, C);
}

}  // namespace tern::kernels
