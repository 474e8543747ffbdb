// Tier avxvnni's table entries (kernel_table.h): 256-bit VNNI dot products for the int8 GEMV and MatMulInteger.
#include "kernels/cpu/gemm_integer.h"
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels {

void fill_tier_avxvnni(KernelTable& t) {
  t.nbits_i8_rows = {"avxvnni", gemv_nbits_i8_avxvnni};
#ifndef TERN_MINIMAL  // (no MatMulInteger there: the entry alone would link the dots)
  t.integer_dots = {integer_dots_avxvnni, 0, true, nullptr, nullptr};
#endif
}

}  // namespace tern::kernels
