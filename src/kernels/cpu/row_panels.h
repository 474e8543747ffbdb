// What the register-blocked GEMM drivers share — the AVX2 GEMM's (gemm_packed.cpp) and the AVX-512 tiles'
// (x86/gemm_avx512_tiles.h): A packed once per call, and the next B block's prefetch. Internal linkage: each
// including file compiles its copy with its own flags.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/parallel.h"

namespace tern::kernels {
namespace {

// A packed in panels of `Rows` rows, [panel][step][Rows], rows past M zero (floats, or bf16 pairs):
// out[(i * steps + p) * Rows + r] = element_of(m, p) for row m = i * Rows + r < M, else Elem{}.
template <typename Elem, int64_t Rows, typename ElementOf>
void pack_row_panels(int threads, int64_t M, int64_t steps, const ElementOf& element_of, Elem* out) {
  const int64_t panels = (M + Rows - 1) / Rows;
  parallel_chunks(threads, panels, balanced_chunks(threads, panels), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t p = 0; p < steps; ++p)
        for (int64_t r = 0; r < Rows; ++r) {
          const int64_t m = i * Rows + r;
          out[(i * steps + p) * Rows + r] = m < M ? element_of(m, p) : Elem{};
        }
  });
}

// The column unit and K block the drivers' loop — for each group of `nc` units from `first` (below `end`): for
// each K block of `kc`: for each unit of the group — visits after (unit, k0), or unit −1 after the last: the
// block whose panels are prefetched while (unit, k0) is multiplied.
struct NextBlock {
  int64_t unit, k0;
};
inline NextBlock next_block(int64_t unit, int64_t k0, int64_t group_first, int64_t nc, int64_t end, int64_t kc, int64_t K) {
  if (unit + 1 < std::min(end, group_first + nc)) return {unit + 1, k0};
  if (k0 + kc < K) return {group_first, k0 + kc};
  if (group_first + nc < end) return {group_first + nc, 0};
  return {-1, 0};
}

// Slice `part` of `parts` of [p, p + bytes) into L2 (nothing for a null p): a block prefetched a slice per row
// panel while the block before is multiplied (gemm_packed.cpp, x86/gemm_avx512_tiles.h).
inline void prefetch_slice(const void* p, int64_t bytes, int64_t part, int64_t parts) {
  if (!p) return;
  const int64_t lines = (bytes + 63) / 64;
  for (int64_t l = lines * part / parts; l < lines * (part + 1) / parts; ++l)
    __builtin_prefetch(static_cast<const char*>(p) + 64 * l, 0, 2);
}

}  // namespace
}  // namespace tern::kernels
