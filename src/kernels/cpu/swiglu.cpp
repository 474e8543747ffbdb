#include "kernels/cpu/swiglu.h"

#include "kernels/cpu/swiglu_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels {

void swiglu_rows(const Context& cx, const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n,
                 GateActivation act) {
#if TERN_FLOAT_KERNELS_AVX2
  if (float_kernels_avx2(cx.isa)) return float_avx2::swiglu_rows(cx, gate, up, in_stride, y, rows, n, act);
#endif
  swiglu_rows_at_width(cx, gate, up, in_stride, y, rows, n, act);
}

}  // namespace tern::kernels
