// swiglu.cpp's kernel at tier avx2 of an x86-64-v2 build (kernels.h).
#include "kernels/cpu/swiglu_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels::float_avx2 {

void swiglu_rows(const Context& cx, const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n,
                 GateActivation act) {
  swiglu_rows_at_width(cx, gate, up, in_stride, y, rows, n, act);
}

}  // namespace tern::kernels::float_avx2
