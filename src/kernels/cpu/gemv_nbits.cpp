#include "kernels/cpu/gemv_nbits.h"

#include "kernels/cpu/gemv_nbits_impl.h"
#include "kernels/cpu/width_kernels.h"

namespace tern::kernels {

bool gemv_nbits_supported(const NBitsWeights& w) {
  const bool blocks = w.grouped ? (w.block % 32 == 0 || w.block == 16)
                                : ((w.bits == 4 || w.bits == 8) && w.block % kGroup == 0) || (w.bits == 2 && w.block % kGroup2 == 0);
  return blocks && w.N > 0 && w.K > 0;
}

void baseline::gemv_nbits(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  gemv_nbits_at_width(cx, x, M, w, y);
}

void gemv_nbits(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  kernel_table(cx.isa).gemv_nbits.fn(cx, x, M, w, y);
}

bool gemv_nbits_i8_supported(const NBitsWeights& w, Isa isa) {
  if (!isa_has_int8_dot(isa)) return false;
#if defined(__x86_64__)
  const bool four_bit = w.grouped && w.block % 32 == 0;  // (group_nbits_rows)
#else
  const bool four_bit = !w.grouped && (w.block == 32 || w.block % 64 == 0);
#endif
#if defined(__aarch64__)
  const bool eight_bit = w.block % 16 == 0;  // (the ARM tiers read 16 bytes at a time)
#else
  // 8-bit blocks of 16 two to a 32-byte chunk (x86's rows8), so a row holds whole chunks.
  const bool eight_bit = w.block % 32 == 0 || (w.block == 16 && w.K % 32 == 0);
#endif
  const bool blocks = w.bits == 4 ? four_bit : w.bits == 8 && eight_bit && !w.grouped;  // (8-bit: as stored)
  return blocks && w.N > 0 && w.K > 0;
}

void baseline::gemv_nbits_i8(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  gemv_nbits_i8_at_width(cx, x, M, w, y);
}

void gemv_nbits_i8(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  kernel_table(cx.isa).gemv_nbits_i8.fn(cx, x, M, w, y);
}

}  // namespace tern::kernels
