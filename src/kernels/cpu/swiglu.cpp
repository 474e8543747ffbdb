#include "kernels/cpu/swiglu.h"

#include "kernels/cpu/swiglu_impl.h"
#include "kernels/cpu/width_kernels.h"

namespace tern::kernels {

void baseline::swiglu_rows(const Context& cx, const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n,
                           GateActivation act) {
  swiglu_rows_at_width(cx, gate, up, in_stride, y, rows, n, act);
}

void swiglu_rows(const Context& cx, const float* gate, const float* up, int64_t in_stride, float* y, int64_t rows, int64_t n,
                 GateActivation act) {
  kernel_table(cx.isa).swiglu_rows.fn(cx, gate, up, in_stride, y, rows, n, act);
}

}  // namespace tern::kernels
