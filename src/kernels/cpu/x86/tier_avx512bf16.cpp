// Tier avx512bf16's table entries (kernel_table.h): bf16 panels multiplied in bf16 pairs (vdpbf16ps).
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels {

void fill_tier_avx512bf16(KernelTable& t) { t.gemm_bf16 = {"avx512bf16", gemm_bf16_avx512bf16}; }

}  // namespace tern::kernels
