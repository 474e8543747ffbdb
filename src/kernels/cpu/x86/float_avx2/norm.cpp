// norm.cpp's kernel at tier avx2 of an x86-64-v2 build (kernels.h).
#include "kernels/cpu/norm_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels::float_avx2 {

void normalize_rows(const Context& cx, const float* x, float* y, const NormArgs& a) { normalize_rows_at_width(cx, x, y, a); }

}  // namespace tern::kernels::float_avx2
