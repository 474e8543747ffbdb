#include "kernels/cpu/copy.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/broadcast.h"

namespace tern::kernels {

namespace {
template <typename T>
void broadcast_copy_t(const T* src, const Dims& src_shape, T* dst, const Dims& dst_shape) {
  std::array<Dims, 1> st{broadcast_strides(src_shape, dst_shape)};
  broadcast_loop<1>(dst_shape, st, [&](int64_t o, const std::array<int64_t, 1>& off, const std::array<int64_t, 1>& inc, int64_t n) {
    if (inc[0] == 1) std::memcpy(dst + o, src + off[0], static_cast<size_t>(n) * sizeof(T));
    else
      for (int64_t i = 0; i < n; ++i) dst[o + i] = src[off[0] + i * inc[0]];
  });
}

template <typename F>
void by_size(size_t es, F&& f) {
  switch (es) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: break;
  }
}

Dims contiguous_strides(const Dims& shape) {
  Dims s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}
}  // namespace

void copy_rows(const void* src, size_t src_stride, void* dst, size_t dst_stride, int64_t rows, size_t row_bytes) {
  if (row_bytes == 0) return;
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(dst) + static_cast<size_t>(r) * dst_stride,
                static_cast<const char*>(src) + static_cast<size_t>(r) * src_stride, row_bytes);
}

void broadcast_copy(const void* src, const Dims& src_shape, void* dst, const Dims& dst_shape, size_t es) {
  by_size(es, [&](auto t) {
    using T = decltype(t);
    broadcast_copy_t(static_cast<const T*>(src), src_shape, static_cast<T*>(dst), dst_shape);
  });
}

// 64 × 64 tiles: a tile's source and destination lines stay in L1 while the tile is read a column at a time.
// Element by element, the column reads of a 1B-shape model's int8 weights (transformers.js's q8 file, 1.24 GB
// transposed at load by pack_integer_matrix) missed the cache on every byte: over half of a 9 s load (perf).
void transpose_matrix(const void* src, int64_t rows, int64_t cols, void* dst, size_t es) {
  constexpr int64_t kTile = 64;
  by_size(es, [&](auto t) {
    using T = decltype(t);
    const T* s = static_cast<const T*>(src);
    T* d = static_cast<T*>(dst);
    for (int64_t r0 = 0; r0 < rows; r0 += kTile)
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t r = r0; r < r1; ++r) d[c * rows + r] = s[r * cols + c];
      }
  });
}

void transpose(const void* src, const Dims& src_shape, const Dims& perm, void* dst, size_t es) {
  if (perm.size() == 2 && perm[0] == 1 && perm[1] == 0) return transpose_matrix(src, src_shape[0], src_shape[1], dst, es);
  Dims in_strides = contiguous_strides(src_shape);
  Dims out_shape(perm.size()), strides(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) {
    out_shape[k] = src_shape[static_cast<size_t>(perm[k])];
    strides[k] = in_strides[static_cast<size_t>(perm[k])];
  }
  // A permutation is a strided read with the permuted strides.
  by_size(es, [&](auto t) {
    using T = decltype(t);
    const T* s = static_cast<const T*>(src);
    T* d = static_cast<T*>(dst);
    std::array<Dims, 1> st{strides};
    broadcast_loop<1>(out_shape, st, [&](int64_t o, const std::array<int64_t, 1>& off, const std::array<int64_t, 1>& inc, int64_t n) {
      for (int64_t i = 0; i < n; ++i) d[o + i] = s[off[0] + i * inc[0]];
    });
  });
}

void separable_gather(const void* src, const Dims& src_shape, void* dst, const Dims& dst_shape, const std::vector<Dims>& index,
                      const void* fill, size_t es) {
  const size_t r = dst_shape.size();
  for (int64_t d : dst_shape)
    if (d == 0) return;
  Dims in_strides = contiguous_strides(src_shape);
  by_size(es, [&](auto t) {
    using T = decltype(t);
    const T* s = static_cast<const T*>(src);
    T* d = static_cast<T*>(dst);
    T fv{};
    if (fill) std::memcpy(&fv, fill, sizeof(T));
    if (r == 0) {
      d[0] = s[0];
      return;
    }
    // Source offset contributed by each output index of dim k (or -1 for fill).
    std::vector<Dims> off(r);
    for (size_t k = 0; k < r; ++k) {
      off[k].resize(static_cast<size_t>(dst_shape[k]));
      for (int64_t i = 0; i < dst_shape[k]; ++i) {
        int64_t j = index[k][static_cast<size_t>(i)];
        off[k][static_cast<size_t>(i)] = j < 0 ? -1 : j * in_strides[k];
      }
    }
    Dims idx(r, 0);
    int64_t outer = 1;
    for (size_t k = 0; k + 1 < r; ++k) outer *= dst_shape[k];
    const Dims& last = off[r - 1];
    const int64_t n = dst_shape[r - 1];
    for (int64_t o = 0; o < outer; ++o) {
      int64_t base = 0;
      bool filled = false;
      for (size_t k = 0; k + 1 < r; ++k) {
        int64_t v = off[k][static_cast<size_t>(idx[k])];
        if (v < 0) filled = true;
        base += v;
      }
      T* out = d + o * n;
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = last[static_cast<size_t>(i)];
        out[i] = (filled || v < 0) ? fv : s[base + v];
      }
      for (size_t k = r - 1; k-- > 0;) {
        if (++idx[k] < dst_shape[k]) break;
        idx[k] = 0;
      }
    }
  });
}

}  // namespace tern::kernels
