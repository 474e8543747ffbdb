// gemv_nbits.cpp's kernels at tier avx2 of an x86-64-v2 build (kernels.h).
#include "kernels/cpu/gemv_nbits_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels::float_avx2 {

void gemv_nbits(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) { gemv_nbits_at_width(cx, x, M, w, y); }

void gemv_nbits_i8(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  gemv_nbits_i8_at_width(cx, x, M, w, y);
}

}  // namespace tern::kernels::float_avx2
