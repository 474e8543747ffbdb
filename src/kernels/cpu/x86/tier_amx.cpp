// Tier amx's table entries (kernel_table.h): bf16 GEMMs on AMX tiles (bf16 panels; MatMulNBits prefill rows of
// int8-activation sessions) and MatMulInteger's prefill rows on AMX-INT8 tiles.
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/gemm_integer.h"
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels {

void fill_tier_amx(KernelTable& t) {
  t.gemm_bf16 = {"amx", gemm_bf16_amx};
  t.gemm_rounded_bf16 = {"amx", gemm_rounded_bf16_amx};
#ifndef TERN_MINIMAL  // (no MatMulInteger there: the entry alone would link the tiles)
  t.integer_dots_amx = {integer_dots_amx, 0, false, integer_amx_layout, integer_amx_layout_bytes};
#endif
}

}  // namespace tern::kernels
