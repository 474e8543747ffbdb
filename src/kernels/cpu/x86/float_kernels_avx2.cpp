// Tier avx2 of an x86-64-v2 build (float_kernels_avx2.h): the baseline's float kernels compiled for
// x86-64-v3 (CMakeLists.txt), F16C widening fp16 panels and scales.
#include "kernels/cpu/x86/float_kernels_avx2.h"

#include "kernels/cpu/gemm_panels_impl.h"
#include "kernels/cpu/nbits_dequant_impl.h"

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

void dequantize_nbits_block_avx2(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld) {
  dequantize_block_at_width(w, n0, n1, k0, k1, out, ld);
}

}  // namespace tern::kernels
