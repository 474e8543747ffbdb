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
  if (!isa_has_int8_dot(isa) || w.N <= 0 || w.K <= 0) return false;
#if defined(__x86_64__)
  if (w.bits == 4) return w.grouped && w.block % 32 == 0;  // (group_nbits_rows)
  if (w.bits != 8) return false;
#ifndef TERN_MINIMAL
  if (w.grouped) return true;  // (in whole chunks: blocks of 16 in pairs)
#endif
  // As stored, blocks of 16 two to a 32-byte chunk (rows8), so a row holds whole chunks.
  return !w.grouped && (w.block % 32 == 0 || (w.block == 16 && w.K % 32 == 0));
#else
  if (w.grouped) return false;  // (the ARM tiers read the file's layout, 16 bytes at a time)
  if (w.bits == 4) return w.block == 32 || w.block % 64 == 0;
  return w.bits == 8 && w.block % 16 == 0;
#endif
}

void baseline::gemv_nbits_i8(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  gemv_nbits_i8_at_width(cx, x, M, w, y);
}

void gemv_nbits_i8(const Context& cx, const float* x, int64_t M, const NBitsWeights& w, float* y) {
  kernel_table(cx.isa).gemv_nbits_i8.fn(cx, x, M, w, y);
}

}  // namespace tern::kernels
