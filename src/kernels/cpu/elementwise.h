// Element-wise kernels over broadcast inputs. `Compute` is the type arithmetic happens in: float for
// float16/bfloat16 storage, the storage type otherwise.
#pragma once
#include <type_traits>

#include "core/dtype.h"
#include "kernels/cpu/broadcast.h"

namespace tern::kernels {

template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, f16> || std::is_same_v<T, bf16>, float, T>;

// Same shapes, or one side a single element: flat loops (no stride tables to allocate, so a decode step's
// masks stay allocation-free). Broadcasts: the strided loop, and with kFast a loop of its own for contiguous
// rows that the compiler vectorizes — left out for ops that run on masks and shape arithmetic rather than
// activations (ops/elementwise_binary.cpp), where code size matters more.
template <bool kFast = true, typename A, typename B, typename O, typename F>
void binary_broadcast(const A* a, const Dims& a_shape, const B* b, const Dims& b_shape, O* out, const Dims& out_shape, F&& f) {
  const int64_t n = dims_product(out_shape), na = dims_product(a_shape), nb = dims_product(b_shape);
  if (na == n && nb == n && a_shape == out_shape && b_shape == out_shape) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
    return;
  }
  if (na == n && nb == 1 && a_shape == out_shape) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[0]);
    return;
  }
  if (nb == n && na == 1 && b_shape == out_shape) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[0], b[i]);
    return;
  }
  std::array<Dims, 2> st{broadcast_strides(a_shape, out_shape), broadcast_strides(b_shape, out_shape)};
  broadcast_loop<2>(out_shape, st, [&](int64_t o, const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& inc, int64_t n) {
    const A* pa = a + off[0];
    const B* pb = b + off[1];
    O* po = out + o;
    if (kFast && inc[0] == 1 && inc[1] == 1) {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i * inc[0]], pb[i * inc[1]]);
    }
  });
}

template <typename C, typename X, typename Y, typename O, typename F>
void ternary_broadcast(const C* c, const Dims& c_shape, const X* x, const Dims& x_shape, const Y* y, const Dims& y_shape, O* out,
                       const Dims& out_shape, F&& f) {
  std::array<Dims, 3> st{broadcast_strides(c_shape, out_shape), broadcast_strides(x_shape, out_shape),
                         broadcast_strides(y_shape, out_shape)};
  broadcast_loop<3>(out_shape, st, [&](int64_t o, const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& inc, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[o + i] = f(c[off[0] + i * inc[0]], x[off[1] + i * inc[1]], y[off[2] + i * inc[2]]);
  });
}

template <typename I, typename O, typename F>
void unary_map(const I* in, O* out, int64_t n, F&& f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

}  // namespace tern::kernels
