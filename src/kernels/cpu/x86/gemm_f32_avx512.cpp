// gemm_avx512.h's fp32 GEMM: one FMA of 16 lanes per row and panel a step, A broadcast one float at a time.
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/x86/gemm_avx512_tiles.h"

namespace tern::kernels {
namespace {

struct F32Steps {
  using A = float;
  static constexpr int64_t kK = 1;
  PanelBlock block;
  const void* context;
  float a_element(const float* row, int64_t k, int64_t) const { return row[k]; }
  const float* b_block(int64_t j, int64_t k0, int64_t kc, float* scratch) const { return block(context, j, k0, kc, scratch); }
  Span b_memory(int64_t j, int64_t k0, int64_t kc) const {  // panels read in place (fp32); not those made in scratch
    const float* p = block(context, j, k0, kc, nullptr);
    return {p, p ? kc * kTileP * static_cast<int64_t>(sizeof(float)) : 0};
  }
  __m512 madd(__m512 acc, float a, __m512 b) const { return _mm512_fmadd_ps(_mm512_set1_ps(a), b, acc); }
};

}  // namespace

void gemm_f32_avx512(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context, float* C) {
  avx512_gemm(cx, F32Steps{block, context}, A, M, K, N, C);
}

}  // namespace tern::kernels
