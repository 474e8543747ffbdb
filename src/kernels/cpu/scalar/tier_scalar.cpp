// Tier scalar (kernel_table.h): the baseline's table with the grouped n-bit GEMV's rows in plain C++, one lane at a
// time with explicit FMAs (gemv_nbits_f32_impl.h's ScalarLanes, the bits every vector tier must equal), and none of
// the kernels that need an instruction set (int8 dot products, bf16 products, AVX-512's own rows): any CPU runs it.
// The tests' reference tier (TERN_ISA=scalar, `--isa scalar`), and the smallest example of a tier: this file and
// its line in isa.cpp's tier list.
#include "kernels/cpu/gemv_nbits_f32_impl.h"
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels {

void fill_tier_scalar(KernelTable& t) {
  t.nbits_grouped_rows = {"scalar", grouped_f32<ScalarLanes, 1>};
  t.nbits_groups_8bit = false;
  t.nbits_wide_rows = {};
  t.nbits_i8_rows = {};
  t.bnb4_rows = {};
  t.integer_dots = {};
  t.integer_dots_amx = {};
  t.gemm_bf16 = {};
  t.gemm_rounded_bf16 = {};
}

}  // namespace tern::kernels
