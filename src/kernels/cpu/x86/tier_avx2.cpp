// Tier avx2's table entries (kernel_table.h): its int8 GEMV rows and bitsandbytes rows, and — in an x86-64-v2
// build, whose baseline runs at SSE4.2 width — the width kernels compiled again for AVX2 (float_avx2/).
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels {

void fill_tier_avx2(KernelTable& t) {
#if TERN_FLOAT_KERNELS_AVX2
  float_avx2::fill_width_kernels(t, "avx2");
#endif
  t.nbits_i8_rows = {"avx2", gemv_nbits_i8_avx2};
#ifndef TERN_MINIMAL  // (no MatMulBnb4 there: the entry alone would link the rows)
  t.bnb4_rows = {"avx2", gemv_bnb4_avx2};
#endif
}

}  // namespace tern::kernels
