// Tier neon's table entries (kernel_table.h): the baseline's int8 GEMV rows (no dot-product instructions).
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels {

void fill_tier_neon(KernelTable& t) { t.nbits_i8_rows = {"neon", gemv_nbits_i8_neon}; }

}  // namespace tern::kernels
