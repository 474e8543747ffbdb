// A packed for a register-blocked GEMM, once per call: panels of `Rows` rows, [panel][step][Rows], rows past
// M zero — the AVX2 GEMM's floats (gemm_packed.cpp) and the AVX-512 tiles' floats or bf16 pairs
// (x86/gemm_avx512_tiles.h). Internal linkage: each including file compiles its copy with its own flags.
#pragma once
#include <cstdint>

#include "kernels/cpu/parallel.h"

namespace tern::kernels {
namespace {

// out[(i * steps + p) * Rows + r] = element_of(m, p) for row m = i * Rows + r < M, else Elem{}.
template <typename Elem, int64_t Rows, typename ElementOf>
void pack_row_panels(int64_t M, int64_t steps, const ElementOf& element_of, Elem* out) {
  const int64_t panels = (M + Rows - 1) / Rows;
  parallel_chunks(panels, balanced_chunks(panels), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t p = 0; p < steps; ++p)
        for (int64_t r = 0; r < Rows; ++r) {
          const int64_t m = i * Rows + r;
          out[(i * steps + p) * Rows + r] = m < M ? element_of(m, p) : Elem{};
        }
  });
}

}  // namespace
}  // namespace tern::kernels
