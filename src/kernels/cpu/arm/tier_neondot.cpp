// Tier neondot's table entries (kernel_table.h): sdot for the int8 GEMV and MatMulInteger.
#include "kernels/cpu/gemm_integer.h"
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels {

void fill_tier_neondot(KernelTable& t) {
  t.nbits_i8_rows = {"neondot", gemv_nbits_i8_neondot};
#ifndef TERN_MINIMAL  // (no MatMulInteger there: the entry alone would link the dots)
  t.integer_dots = {integer_dots_neondot, kIntegerDotsCodeOffset_neondot, true, nullptr, nullptr};
#endif
}

}  // namespace tern::kernels
