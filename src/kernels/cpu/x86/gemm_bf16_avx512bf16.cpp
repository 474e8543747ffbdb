// gemm_avx512.h's bf16 GEMM: A broadcast one (k, k+1) bf16 pair at a time, each vdpbf16ps a step of two K
// rows. B's panels hold rows of 16 bf16; vdpbf16ps wants each column's (k, k+1) pair in one 32-bit lane, so
// each K block of a panel is interleaved once into L1 (one vpermw per row pair) and then serves every row
// panel of A.
#include "core/dtype.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/x86/gemm_avx512_tiles.h"

namespace tern::kernels {
namespace {

struct Bf16Steps {
  using A = uint32_t;  // element k in the low half, k + 1 (0 past K) in the high
  static constexpr int64_t kK = 2;
  const uint16_t* panels;
  int64_t K;
  uint32_t a_element(const float* row, int64_t k, int64_t K) const {
    return bf16(row[k]).bits | (k + 1 < K ? uint32_t{bf16(row[k + 1]).bits} : 0u) << 16;
  }
  const float* b_block(int64_t j, int64_t k0, int64_t kc, float* scratch) const {
    interleave_bf16_pairs(panels + j * K * kTileP, k0, kc, reinterpret_cast<uint16_t*>(scratch));
    return scratch;
  }
  Span b_memory(int64_t j, int64_t k0, int64_t kc) const { return {panels + (j * K + k0) * kTileP, kc * kTileP * 2}; }
  __m512 madd(__m512 acc, uint32_t a, __m512 b) const {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(static_cast<int>(a)), (__m512bh)b);
  }
};

}  // namespace

void gemm_bf16_avx512bf16(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, const uint16_t* panels, float* C) {
  avx512_gemm(cx, Bf16Steps{panels, K}, A, M, K, N, C);
}

}  // namespace tern::kernels
