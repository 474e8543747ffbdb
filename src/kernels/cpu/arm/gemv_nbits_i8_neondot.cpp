// ARMv8.2 DotProd: sdot adds four s8·s8 products into each int32 lane in one instruction.
#include "kernels/cpu/arm/gemv_nbits_i8_impl.h"

namespace tern::kernels {

void gemv_nbits_i8_neondot(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  gemv_rows<DotNeonDot>(x, M, w, n0, n1, y, ldy);
}

}  // namespace tern::kernels
