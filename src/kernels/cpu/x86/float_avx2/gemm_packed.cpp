// gemm_packed.cpp's float kernels at tier avx2 of an x86-64-v2 build (kernels.h); F16C widens fp16 panels
// and scales.
#include "kernels/cpu/gemm_panels_impl.h"
#include "kernels/cpu/nbits_dequant_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels::float_avx2 {

void gemm_tiles(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context, float* C) {
  gemm_tiles_at_width(cx, A, M, K, N, block, context, C);
}

void gemv_panels(const Context& cx, const float* x, int64_t M, const PackedMatrix& B, float* y) { gemv_panels_at_width(cx, x, M, B, y); }

void dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld) {
  dequantize_block_at_width(w, n0, n1, k0, k1, out, ld);
}

}  // namespace tern::kernels::float_avx2
