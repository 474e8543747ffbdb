#include "kernels/cpu/norm.h"

#include "kernels/cpu/norm_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels {

void normalize_rows(const Context& cx, const float* x, float* y, const NormArgs& a) {
#if TERN_FLOAT_KERNELS_AVX2
  if (float_kernels_avx2(cx.isa)) return float_avx2::normalize_rows(cx, x, y, a);
#endif
  normalize_rows_at_width(cx, x, y, a);
}

}  // namespace tern::kernels
