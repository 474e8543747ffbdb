#include "kernels/cpu/gather.h"

#include <cstring>

namespace tern::kernels {

void gather_rows(const void* src, int64_t outer, int64_t axis_dim, size_t inner_bytes, const int64_t* idx, int64_t n_idx, void* dst) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n_idx; ++i)
      std::memcpy(d + static_cast<size_t>(o * n_idx + i) * inner_bytes, s + static_cast<size_t>(o * axis_dim + idx[i]) * inner_bytes,
                  inner_bytes);
}

std::vector<int64_t> element_offsets(const Dims& data_shape, const Dims& idx_shape, const int64_t* idx, int64_t axis) {
  const size_t r = idx_shape.size();
  Dims strides(r, 1);
  for (size_t k = r; k-- > 1;) strides[k - 1] = strides[k] * data_shape[k];
  int64_t n = 1;
  for (int64_t d : idx_shape) n *= d;
  std::vector<int64_t> off(static_cast<size_t>(n));
  Dims coord(r, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t o = 0;
    for (size_t k = 0; k < r; ++k) o += (static_cast<int64_t>(k) == axis ? idx[e] : coord[k]) * strides[k];
    off[static_cast<size_t>(e)] = o;
    for (size_t k = r; k-- > 0;) {
      if (++coord[k] < idx_shape[k]) break;
      coord[k] = 0;
    }
  }
  return off;
}

}  // namespace tern::kernels
