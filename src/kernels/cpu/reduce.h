// Reductions over a tensor viewed as [outer, n, inner] (one axis) or over any set of axes.
// Templates: T is the storage type; arithmetic happens in double (values) or compute_t<T> (order).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/elementwise.h"

namespace tern::kernels {

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// out[j] = reduce over the input elements whose kept coordinates give output index j.
// `reduced[k]` marks the reduced dims of `shape`; `out` has the product of the kept dims.
template <typename T>
void reduce_axes(const T* x, const Dims& shape, const std::vector<char>& reduced, ReduceKind kind, T* out) {
  using C = compute_t<T>;
  const size_t r = shape.size();
  // Products taken only where they are known to fit: the input's element count when it has none of size 0
  // (its shape was checked whole), the kept dims' when they are the output's (allocated already). A zero
  // among huge dims made [0, 2^40, 2^40]'s partial products overflow.
  for (size_t k = 0; k < r; ++k)
    if (!reduced[k] && shape[k] == 0) return;                                           // no output
  const bool empty = std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end();  // a reduced dim of 0
  Dims ostride(r, 0);
  int64_t s = 1, count = empty ? 0 : 1, n_in = empty ? 0 : 1;
  for (size_t k = r; k-- > 0;) {
    if (!empty) n_in *= shape[k];
    if (reduced[k]) {
      if (!empty) count *= shape[k];
      continue;
    }
    ostride[k] = s;
    s *= shape[k];
  }
  const double init = kind == ReduceKind::Max    ? -std::numeric_limits<double>::infinity()
                      : kind == ReduceKind::Min  ? std::numeric_limits<double>::infinity()
                      : kind == ReduceKind::Prod ? 1.0
                                                 : 0.0;
  std::vector<double> acc(static_cast<size_t>(s), init);
  Dims idx(r, 0);
  int64_t o = 0;
  for (int64_t e = 0; e < n_in; ++e) {
    const double v = static_cast<double>(static_cast<C>(x[e]));
    double& a = acc[static_cast<size_t>(o)];
    switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
      case ReduceKind::LogSum: a += v; break;
      case ReduceKind::Max: a = (std::isnan(v) || v > a) ? v : a; break;
      case ReduceKind::Min: a = (std::isnan(v) || v < a) ? v : a; break;
      case ReduceKind::Prod: a *= v; break;
      case ReduceKind::L1: a += std::abs(v); break;
      case ReduceKind::L2:
      case ReduceKind::SumSquare: a += v * v; break;
      case ReduceKind::LogSumExp: a += std::exp(v); break;
    }
    for (size_t k = r; k-- > 0;) {  // odometer over the input, tracking the output offset
      o += ostride[k];
      if (++idx[k] < shape[k]) break;
      o -= ostride[k] * idx[k];
      idx[k] = 0;
    }
  }
  for (int64_t i = 0; i < s; ++i) {
    double a = acc[static_cast<size_t>(i)];
    if (kind == ReduceKind::Mean) a /= static_cast<double>(count);
    else if (kind == ReduceKind::L2) a = std::sqrt(a);
    else if (kind == ReduceKind::LogSum || kind == ReduceKind::LogSumExp) a = std::log(a);
    if constexpr (std::is_integral_v<C>) {
      if (std::isinf(a))
        a = a > 0 ? static_cast<double>(std::numeric_limits<C>::max()) : static_cast<double>(std::numeric_limits<C>::lowest());
    }
    out[i] = static_cast<T>(static_cast<C>(a));
  }
}

// Index of the max (or min) along n; ties take the first index, or the last with `last`.
template <typename T>
void arg_reduce(const T* x, int64_t outer, int64_t n, int64_t inner, bool is_max, bool last, int64_t* out) {
  using C = compute_t<T>;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      C bv = static_cast<C>(x[o * n * inner + i]);
      for (int64_t j = 1; j < n; ++j) {
        const C v = static_cast<C>(x[(o * n + j) * inner + i]);
        const bool better = is_max ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv);
        if (better) {
          bv = v;
          best = j;
        }
      }
      out[o * inner + i] = best;
    }
}

// Running sum along n; `exclusive` starts from 0, `reverse` runs from the end.
template <typename T>
void cumulative_sum(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse) {
  using C = compute_t<T>;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      C acc = C(0);
      for (int64_t s = 0; s < n; ++s) {
        const int64_t e = (o * n + (reverse ? n - 1 - s : s)) * inner + i;
        const C v = static_cast<C>(x[e]);
        if (exclusive) {
          y[e] = static_cast<T>(acc);
          acc = static_cast<C>(acc + v);
        } else {
          acc = static_cast<C>(acc + v);
          y[e] = static_cast<T>(acc);
        }
      }
    }
}

// The k largest (or smallest) along n with their indices, sorted; ties keep the lower index.
template <typename T>
void top_k(const T* x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest, T* values, int64_t* indices) {
  using C = compute_t<T>;
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto val = [&](int64_t j) { return static_cast<C>(x[(o * n + j) * inner + i]); };
      std::iota(order.begin(), order.end(), 0);
      // The first k by (value, index): what a stable sort by value gives, in O(n log k) — and a heap's code,
      // not a merge sort's (14 KB less in the minimal static CLI, which has TopK).
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        const C va = val(a), vb = val(b);
        return (largest ? va > vb : va < vb) || (!(va < vb) && !(vb < va) && a < b);
      });
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = (o * k + j) * inner + i, src = order[static_cast<size_t>(j)];
        values[e] = x[(o * n + src) * inner + i];
        indices[e] = src;
      }
    }
}

// Zeroes everything outside the band of `mats` N×M matrices: upper keeps j − i ≥ k, lower j − i ≤ k.
inline void triangle(const void* src, void* dst, int64_t mats, int64_t N, int64_t M, int64_t k, bool upper, size_t es) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < M; ++j) {
        const size_t off = static_cast<size_t>((m * N + i) * M + j) * es;
        if (upper ? (j - i >= k) : (j - i <= k)) std::memcpy(d + off, s + off, es);
        else std::memset(d + off, 0, es);
      }
}

}  // namespace tern::kernels
