// Data movement by element size: broadcast copies, permutations, strided slices. Type-agnostic.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::kernels {

using Dims = std::vector<int64_t>;

// `rows` rows of `row_bytes` each, from src (rows `src_stride` bytes apart) to dst (`dst_stride` apart).
void copy_rows(const void* src, size_t src_stride, void* dst, size_t dst_stride, int64_t rows, size_t row_bytes);
// dst (shape dst_shape) = src broadcast from src_shape.
void broadcast_copy(const void* src, const Dims& src_shape, void* dst, const Dims& dst_shape, size_t elem_size);
// dst[i0..] = src permuted: dst dim k is src dim perm[k].
void transpose(const void* src, const Dims& src_shape, const Dims& perm, void* dst, size_t elem_size);
// dst [cols, rows] = src [rows, cols] transposed, in tiles that both sides read and write a cache line at a time.
void transpose_matrix(const void* src, int64_t rows, int64_t cols, void* dst, size_t elem_size);
// For ops whose source index along each dimension depends only on the output index along that
// dimension (Slice, Pad, Tile): index[k][i] is the source index for output index i of dim k, or -1
// for "write `fill`" (constant padding). `fill` points to one element, or is null when never used.
void separable_gather(const void* src, const Dims& src_shape, void* dst, const Dims& dst_shape, const std::vector<Dims>& index,
                      const void* fill, size_t elem_size);

}  // namespace tern::kernels
