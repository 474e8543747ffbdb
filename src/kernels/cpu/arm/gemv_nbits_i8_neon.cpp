// Every AArch64 core: s8·s8 products widened to int16 (vmull_s8: |w| ≤ 128 times |x| ≤ 127 fits), pairs
// added into the int32 lanes (vpadalq_s16).
#include "kernels/cpu/arm/gemv_nbits_i8_impl.h"

namespace tern::kernels {
namespace {

struct DotNeon {
  static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
  }
};

}  // namespace

void gemv_nbits_i8_neon(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  gemv_rows<DotNeon>(x, M, w, n0, n1, y, ldy);
}

}  // namespace tern::kernels
