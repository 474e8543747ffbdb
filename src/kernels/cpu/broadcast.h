// Numpy-style broadcasting: iterate an output shape while walking each input with its own strides
// (0 along broadcast dimensions). The innermost dimension is handed to the caller as one run so the
// element loop stays tight.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::kernels {

using Dims = std::vector<int64_t>;

inline int64_t dims_product(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Element strides of `in` (right-aligned against `out`), 0 where `in` is broadcast.
inline Dims broadcast_strides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  int64_t stride = 1;
  for (std::size_t k = 0; k < in.size(); ++k) {
    std::size_t i = in.size() - 1 - k, o = out.size() - 1 - k;
    s[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return s;
}

// body(out_offset, in_offsets, inner_strides, count) for each run along the last output dimension.
template <std::size_t N, typename F>
void broadcast_loop(const Dims& out, const std::array<Dims, N>& strides, F&& body) {
  const std::size_t r = out.size();
  for (int64_t d : out)
    if (d == 0) return;
  if (r == 0) {
    std::array<int64_t, N> offs{}, inner{};
    body(int64_t{0}, offs, inner, int64_t{1});
    return;
  }
  const int64_t inner_n = out[r - 1];
  std::array<int64_t, N> inner{};
  for (std::size_t k = 0; k < N; ++k) inner[k] = strides[k][r - 1];
  int64_t outer = 1;
  for (std::size_t d = 0; d + 1 < r; ++d) outer *= out[d];
  Dims idx(r, 0);
  std::array<int64_t, N> offs{};
  for (int64_t o = 0; o < outer; ++o) {
    body(o * inner_n, offs, inner, inner_n);
    // advance the odometer over dims [0, r-1)
    for (std::size_t d = r - 1; d-- > 0;) {
      ++idx[d];
      for (std::size_t k = 0; k < N; ++k) offs[k] += strides[k][d];
      if (idx[d] < out[d]) break;
      for (std::size_t k = 0; k < N; ++k) offs[k] -= strides[k][d] * idx[d];
      idx[d] = 0;
    }
  }
}

}  // namespace tern::kernels
