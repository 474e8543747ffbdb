// norm.h's kernel at the vector width of the file that includes this: norm.cpp (the build's baseline)
// and, in an x86-64-v2 build, x86/float_avx2/norm.cpp (tier avx2). Everything here has internal linkage,
// so each file keeps its own copy built for its flags.
#pragma once
#include <cmath>

#include "kernels/cpu/norm.h"
#include "kernels/cpu/parallel.h"

namespace tern::kernels {

namespace {
// Σ f(x[i]) in double over 8 independent partial sums, added pairwise at the end: one chain of n adds
// made the 1B shape's 128-row RMSNorm (2048 wide) 0.56 ms a call, 2% of its prefill.
template <class F>
double sum8(const float* x, int64_t n, const F& f) {
  double part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) part[l] += f(x[i + l]);
  for (int l = 0; i < n; ++i, ++l) part[l] += f(x[i]);
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

void normalize_row(const float* px, float* py, int64_t r, const NormArgs& a) {
  if (a.skip) {  // (inside the row loop: the add shares out over the threads with the rest)
    float* ps = a.sum + r * a.n;
    const float* pk = a.skip + r * a.n;
    for (int64_t i = 0; i < a.n; ++i) ps[i] = px[i] + pk[i];
    px = ps;
  }
  double mean = 0;
  if (!a.rms) mean = sum8(px, a.n, [](float v) { return static_cast<double>(v); }) / static_cast<double>(a.n);
  const double var = sum8(px, a.n,
                          [mean](float v) {
                            const double d = v - mean;
                            return d * d;
                          }) /
                     static_cast<double>(a.n);
  const float inv = static_cast<float>(1.0 / std::sqrt(var + a.eps));
  const float m = static_cast<float>(mean);
  const float* s = a.scale ? a.scale + r * a.scale_stride : nullptr;
  const float* b = a.bias ? a.bias + r * a.bias_stride : nullptr;
  for (int64_t i = 0; i < a.n; ++i) {
    float v = (px[i] - m) * inv;
    if (s) v *= s[i];
    if (b) v += b[i];
    py[i] = v;
  }
  if (a.mean_out) a.mean_out[r] = m;
  if (a.inv_std_out) a.inv_std_out[r] = inv;
}

void normalize_rows_at_width(const Context& cx, const float* x, float* y, const NormArgs& a) {
  // Rows are independent: shared out when there are enough of them (prefill), each computed the same way.
  parallel_chunks(cx.threads, a.rows, balanced_chunks(cx.threads, a.rows, a.rows * a.n < (int64_t{1} << 16)),
                  [&](int64_t r0, int64_t r1, int) {
                    for (int64_t r = r0; r < r1; ++r) normalize_row(x + r * a.n, y + r * a.n, r, a);
                  });
}

}  // namespace
}  // namespace tern::kernels
