#include "kernels/cpu/gemv.h"

#include <omp.h>

#include <algorithm>
#include <xsimd/xsimd.hpp>

namespace tern::kernels {
namespace {

using batch = xsimd::batch<float>;
constexpr int64_t kLanes = static_cast<int64_t>(batch::size);

// Columns [n0, n1) of y[m] = x[m] · W, four weight rows per pass over the y block (which stays in cache).
template <int M>
void gemv_block(const float* x, int64_t ldx, const float* W, int64_t K, int64_t N, float* y, int64_t ldy, int64_t n0,
                int64_t n1) {
  for (int m = 0; m < M; ++m) std::fill(y + m * ldy + n0, y + m * ldy + n1, 0.0f);
  const int64_t vec_end = n0 + (n1 - n0) / kLanes * kLanes;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    const float* w0 = W + k * N;
    const float* w1 = w0 + N;
    const float* w2 = w1 + N;
    const float* w3 = w2 + N;
    batch a0[M], a1[M], a2[M], a3[M];
    for (int m = 0; m < M; ++m) {
      a0[m] = batch(x[m * ldx + k]);
      a1[m] = batch(x[m * ldx + k + 1]);
      a2[m] = batch(x[m * ldx + k + 2]);
      a3[m] = batch(x[m * ldx + k + 3]);
    }
    for (int64_t j = n0; j < vec_end; j += kLanes) {
      const batch b0 = batch::load_unaligned(w0 + j), b1 = batch::load_unaligned(w1 + j);
      const batch b2 = batch::load_unaligned(w2 + j), b3 = batch::load_unaligned(w3 + j);
      for (int m = 0; m < M; ++m) {
        float* out = y + m * ldy + j;
        batch acc = batch::load_unaligned(out);
        acc = xsimd::fma(a0[m], b0, acc);
        acc = xsimd::fma(a1[m], b1, acc);
        acc = xsimd::fma(a2[m], b2, acc);
        acc = xsimd::fma(a3[m], b3, acc);
        acc.store_unaligned(out);
      }
    }
    for (int64_t j = vec_end; j < n1; ++j)
      for (int m = 0; m < M; ++m) {
        const float* xm = x + m * ldx + k;
        y[m * ldy + j] += xm[0] * w0[j] + xm[1] * w1[j] + xm[2] * w2[j] + xm[3] * w3[j];
      }
  }
  for (; k < K; ++k)
    for (int m = 0; m < M; ++m)
      for (int64_t j = n0; j < n1; ++j) y[m * ldy + j] += x[m * ldx + k] * W[k * N + j];
}

template <int M>
void gemv_rows(const float* x, int64_t ldx, const float* W, int64_t K, int64_t N, float* y, int64_t ldy) {
  // Column ranges in whole cache lines, one per thread; tiny products stay on one thread.
  const int threads = N * K < (int64_t{1} << 15) ? 1 : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
  {
    const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lines = (N + 15) / 16;
    const int64_t n0 = std::min(N, lines * t / T * 16), n1 = std::min(N, lines * (t + 1) / T * 16);
    if (n0 < n1) gemv_block<M>(x, ldx, W, K, N, y, ldy, n0, n1);
  }
}

}  // namespace

void gemv_f32(const float* x, int64_t M, int64_t ldx, const float* W, int64_t K, int64_t N, float* y, int64_t ldy) {
  switch (M) {
    case 1: return gemv_rows<1>(x, ldx, W, K, N, y, ldy);
    case 2: return gemv_rows<2>(x, ldx, W, K, N, y, ldy);
    case 3: return gemv_rows<3>(x, ldx, W, K, N, y, ldy);
    case 4: return gemv_rows<4>(x, ldx, W, K, N, y, ldy);
    default: break;
  }
}

}  // namespace tern::kernels
