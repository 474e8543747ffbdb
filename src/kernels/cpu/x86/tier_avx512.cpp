// Tier avx512's table entries (kernel_table.h): the 8 × 32 GEMM tiles, the grouped n-bit GEMV on 16-row
// registers (and 8-bit weights grouped for it), the rows it reads in the file's layout, 512-bit FMA chains.
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels {

void fill_tier_avx512(KernelTable& t) {
  t.gemm_tiles = {"avx512", gemm_f32_avx512};
  t.nbits_grouped_rows = {"avx512", gemv_nbits_f32_avx512};
  // 8-bit, grouped: a 4096 x 14336 row took 1.72 ms against 1.95-2.03 as stored at AVX-512, but 1.94-2.09 against
  // 1.88-1.96 at the avx2 tier (2 threads, a Xeon at 36.5 GB/s, 3 alternated rounds): from AVX-512 only.
  t.nbits_groups_8bit = true;
#ifndef TERN_MINIMAL  // (a minimal build leaves these rows out: CMakeLists.txt)
  t.nbits_wide_rows = {"avx512", gemv_nbits_rows_avx512};
  t.nbits_wide_rows_take = gemv_nbits_rows_avx512_takes;
  t.nbits_wide_position = nbits_rows_avx512_position;
#endif
  t.fma_chains = {"avx512", fma_chains_avx512};
}

}  // namespace tern::kernels
