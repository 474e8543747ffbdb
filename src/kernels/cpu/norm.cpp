#include "kernels/cpu/norm.h"

#include "kernels/cpu/norm_impl.h"
#include "kernels/cpu/width_kernels.h"

namespace tern::kernels {

void baseline::normalize_rows(const Context& cx, const float* x, float* y, const NormArgs& a) { normalize_rows_at_width(cx, x, y, a); }

void normalize_rows(const Context& cx, const float* x, float* y, const NormArgs& a) { kernel_table(cx.isa).normalize_rows.fn(cx, x, y, a); }

}  // namespace tern::kernels
