// Index-driven copies. Indices are int64, already normalized to [0, dim) by the caller.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::kernels {

using Dims = std::vector<int64_t>;

// src viewed as [outer, axis_dim, inner bytes]; dst[o, i] = src[o, idx[i]].
void gather_rows(const void* src, int64_t outer, int64_t axis_dim, size_t inner_bytes, const int64_t* idx, int64_t n_idx, void* dst);
// Element offset into `data` (shape data_shape) for each element of an index tensor of shape
// idx_shape whose values replace the coordinate along `axis` (GatherElements/ScatterElements).
std::vector<int64_t> element_offsets(const Dims& data_shape, const Dims& idx_shape, const int64_t* idx, int64_t axis);

}  // namespace tern::kernels
