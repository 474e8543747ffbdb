// Tier avx2 of an x86-64-v2 build: the baseline's fp32 GEMM tiles and panel GEMV (gemm_panels_impl.h) at
// AVX2/FMA width, with F16C widening fp16 panels. (An x86-64-v3 build's baseline is this already and does
// not compile the file.)
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/gemm_panels_impl.h"

namespace tern::kernels {

void gemm_f32_avx2(const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context, float* C) {
  gemm_panel_tiles(A, M, K, N, C, [&](int64_t j, int64_t k0, int64_t kc, float* scratch) { return block(context, j, k0, kc, scratch); });
}

void gemv_panels_avx2(const float* x, int64_t M, const PackedMatrix& B, float* y) {
  switch (B.type) {
    case DType::Float16: return gemv_panels<f16>(x, M, B, y);
    case DType::BFloat16: return gemv_panels<bf16>(x, M, B, y);
    default: return gemv_panels<float>(x, M, B, y);
  }
}

}  // namespace tern::kernels
