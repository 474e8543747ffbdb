// Tier neoni8mm's table entries (kernel_table.h): smmla for the int8 GEMV (MatMulInteger keeps neondot's).
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels {

void fill_tier_neoni8mm(KernelTable& t) { t.nbits_i8_rows = {"neoni8mm", gemv_nbits_i8_neoni8mm}; }

}  // namespace tern::kernels
