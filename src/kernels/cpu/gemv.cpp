#include "kernels/cpu/gemv.h"

#include "kernels/cpu/lanes.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <xsimd/xsimd.hpp>

namespace tern::kernels {
namespace {

// Narrower weights are split by rows: column ranges of a 576-wide matrix are 1 KB pieces of each row, a
// poor stream; contiguous row bands read at 24 instead of 19 GB/s here (K=576, N=576, 2 threads).
constexpr int64_t kRowSplitBelowN = 4096;

// Columns [n0, n1) of y[m] = x[m, k0:k1] · W[k0:k1], four weight rows per pass over the y block (which
// stays in cache).
template <int M>
void gemv_block(const float* x, int64_t ldx, const float* W, int64_t k0, int64_t K, int64_t N, float* y, int64_t ldy, int64_t n0,
                int64_t n1) {
  for (int m = 0; m < M; ++m) std::fill(y + m * ldy + n0, y + m * ldy + n1, 0.0f);
  const int64_t vec_end = n0 + (n1 - n0) / kLanes * kLanes;
  int64_t k = k0;
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
void gemv_rows(const Context& cx, const float* x, int64_t ldx, const float* W, int64_t K, int64_t N, float* y, int64_t ldy) {
  const bool small = N * K < (int64_t{1} << 15);
  const int threads = cx.threads;
  if (!small && threads > 1 && N < kRowSplitBelowN) {
    // Narrow matrices: one band of rows a thread, each streamed into partial sums of its own, then the
    // partials added in band order (the same result every run at a given thread count).
    float* part = cx.workspace().take<float>(Workspace::GemvPartials, threads * M * N);
    const int64_t quads = K / 4;  // bands in whole groups of four rows; the last takes the remainder
    const int64_t T = threads;
    parallel_chunks(threads, T, T, [&](int64_t t, int64_t, int) {  // chunk t: band t
      const int64_t k0 = quads * t / T * 4, k1 = t + 1 == T ? K : quads * (t + 1) / T * 4;
      gemv_block<M>(x, ldx, W, k0, k1, N, part + t * M * N, N, 0, N);
    });
    parallel_chunks(threads, N, balanced_chunks(threads, N), [&](int64_t n0, int64_t n1, int) {
      for (int m = 0; m < M; ++m)
        for (int64_t j = n0; j < n1; ++j) {
          float sum = 0;
          for (int64_t p = 0; p < threads; ++p) sum += part[(p * M + m) * N + j];
          y[m * ldy + j] = sum;
        }
    });
    return;
  }
  // Column ranges in whole cache lines; tiny products stay on one thread.
  const int64_t lines = (N + 15) / 16;
  parallel_chunks(threads, lines, balanced_chunks(threads, lines, small),
                  [&](int64_t l0, int64_t l1, int) { gemv_block<M>(x, ldx, W, 0, K, N, y, ldy, l0 * 16, std::min(N, l1 * 16)); });
}

}  // namespace

void gemv_f32(const Context& cx, const float* x, int64_t M, int64_t ldx, const float* W, int64_t K, int64_t N, float* y, int64_t ldy) {
  switch (M) {
    case 1: return gemv_rows<1>(cx, x, ldx, W, K, N, y, ldy);
    case 2: return gemv_rows<2>(cx, x, ldx, W, K, N, y, ldy);
    case 3: return gemv_rows<3>(cx, x, ldx, W, K, N, y, ldy);
    case 4: return gemv_rows<4>(cx, x, ldx, W, K, N, y, ldy);
    default: break;
  }
}

}  // namespace tern::kernels
