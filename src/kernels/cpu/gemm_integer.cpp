#include "kernels/cpu/gemm_integer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/gemm_integer_impl.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/width_kernels.h"

namespace tern::kernels {

void baseline::integer_rows(const int16_t* a, int64_t M, int64_t K, const int8_t* w, int64_t n0, int64_t n1, int32_t* c, int64_t N) {
  integer_rows_at_width(a, M, K, w, n0, n1, c, N);
}
void baseline::integer_rows(const int16_t* a, int64_t M, int64_t K, const uint8_t* w, int64_t n0, int64_t n1, int32_t* c, int64_t N) {
  integer_rows_at_width(a, M, K, w, n0, n1, c, N);
}

void baseline::u8_range(const float* x, int64_t n, float& lo, float& hi) { range_at_width(x, n, lo, hi); }
void baseline::quantize_u8(const float* x, int64_t n, float scale, uint8_t zero_point, uint8_t* q) {
  quantize_u8_at_width(x, n, scale, zero_point, q);
}

U8Quantization dynamic_u8_quantization(const Context& cx, const float* x, int64_t n) {
  float lo = 0, hi = 0;
  kernel_table(cx.isa).u8_range.fn(x, n, lo, hi);
  U8Quantization p;
  p.scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zero = 0.0f - lo / p.scale;  // (NaN for an infinite range: zero point 0)
  p.zero_point = zero > 0 ? static_cast<uint8_t>(std::nearbyint(std::min(zero, 255.0f))) : 0;
  return p;
}

void quantize_u8(const Context& cx, const float* x, int64_t n, U8Quantization p, uint8_t* q) {
  kernel_table(cx.isa).quantize_u8.fn(x, n, p.scale, p.zero_point, q);
}

IntegerMatrix integer_matrix(Tensor rows, bool is_signed, std::vector<int32_t> zeros) {
  IntegerMatrix w;
  w.N = rows.dim(0);
  w.K = rows.dim(1);
  w.is_signed = is_signed;
  w.zeros = std::move(zeros);
  if (rows.raw()) {
    w.sums.resize(static_cast<size_t>(w.N));
    const auto* bytes = static_cast<const uint8_t*>(rows.raw());
    for (int64_t n = 0; n < w.N; ++n) {
      int32_t s = 0;
      for (int64_t k = 0; k < w.K; ++k) s += is_signed ? static_cast<int8_t>(bytes[n * w.K + k]) : bytes[n * w.K + k];
      w.sums[static_cast<size_t>(n)] = s;
    }
  }
  w.rows = std::move(rows);
  return w;
}

IntegerMatrix pack_integer_matrix(const void* B, bool is_signed, int64_t K, int64_t N, std::vector<int32_t> zeros) {
  Tensor rows(is_signed ? DType::Int8 : DType::UInt8, {N, K});
  transpose_matrix(B, K, N, rows.raw(), 1);
  return integer_matrix(std::move(rows), is_signed, std::move(zeros));
}

namespace {

// The tier's dot products on the codes for M rows (gemm_integer.h), or none (kernel_table.h's IntegerDots).
IntegerDots tier_dots(const KernelTable& t, int64_t M) {
  return t.integer_dots_amx.fn && M >= kIntegerAmxMinRows ? t.integer_dots_amx : t.integer_dots;
}

// One product's operands as the tier multiplies them, made once (in the run's workspace) before the threads split
// the columns.
class IntegerProduct {
 public:
  IntegerProduct(const Context& cx, const IntegerRows& a, const IntegerMatrix& w)
      : a_(a), w_(w), table_(kernel_table(cx.isa)), dots_(tier_dots(table_, a.M)) {
    const int64_t M = a.M, K = w.K;
    Workspace& ws = cx.workspace();
    code_sums_ = ws.take<int32_t>(Workspace::IntegerCodeSums, M);
    for (int64_t m = 0; m < M; ++m) {
      int32_t s = 0;
      for (int64_t k = 0; k < K; ++k) s += a.codes[m * K + k];
      code_sums_[m] = s;
    }
    if (dots_.fn) {
      if (dots_.layout) {
        layout_ = ws.take<uint8_t>(Workspace::IntegerLayout, dots_.layout_bytes(M, K));
        dots_.layout(a.codes, M, K, layout_);
      }
      return;
    }
    centered_ = ws.take<int16_t>(Workspace::IntegerCentered, M * K);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) centered_[m * K + k] = static_cast<int16_t>(a.codes[m * K + k] - zero_point(m));
  }

  // c's columns [n0, n1) for every row.
  void columns(int32_t* c, int64_t n0, int64_t n1) const {
    const int64_t M = a_.M, K = w_.K, N = w_.N;
    const auto* bytes = static_cast<const uint8_t*>(w_.rows.raw());
    if (dots_.fn) {
      // dots = Σ (u − o)·(b − off) (o the tier's offset on the codes, off 128 for uint8 weights where it flips them),
      // so with U = Σ_k u and S = Σ_k b:
      //   Σ (u − zu)·(b − bz) = dots + (off − bz)·U + (o − zu)·S − K·(o·off − zu·bz).
      // In int64: the terms may pass int32 where the result does not.
      dots_.fn(dots_.layout ? layout_ : a_.codes, M, K, bytes, !w_.is_signed, n0, n1, c, N);
      const int64_t off = !w_.is_signed && dots_.flips_unsigned_weights ? 128 : 0, o = dots_.code_offset;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = n0; n < n1; ++n) {
          const int64_t bz = weight_zero_point(n), zu = zero_point(m);
          const int64_t v =
              c[m * N + n] + (off - bz) * code_sums_[m] + (o - zu) * w_.sums[static_cast<size_t>(n)] - K * (o * off - zu * bz);
          c[m * N + n] = static_cast<int32_t>(v);
        }
      return;
    }
    // Σ_k a·(b − bz) = Σ_k a·b − bz·Σ_k a, a = u − zu centered, Σ_k a = U − K·zu.
    if (w_.is_signed) table_.integer_rows_s8.fn(centered_, M, K, reinterpret_cast<const int8_t*>(bytes), n0, n1, c, N);
    else table_.integer_rows_u8.fn(centered_, M, K, bytes, n0, n1, c, N);
    if (w_.zeros.empty()) return;
    for (int64_t m = 0; m < M; ++m) {
      const int32_t a_sum = code_sums_[m] - static_cast<int32_t>(K) * zero_point(m);
      for (int64_t n = n0; n < n1; ++n) c[m * N + n] -= weight_zero_point(n) * a_sum;
    }
  }

 private:
  int32_t zero_point(int64_t m) const { return a_.zero_points[a_.zero_points.size() == 1 ? 0 : static_cast<size_t>(m)]; }
  int32_t weight_zero_point(int64_t n) const { return w_.zeros.empty() ? 0 : w_.zeros[w_.zeros.size() == 1 ? 0 : static_cast<size_t>(n)]; }

  const IntegerRows& a_;
  const IntegerMatrix& w_;
  const KernelTable& table_;
  IntegerDots dots_;
  int32_t* code_sums_ = nullptr;  // Σ_k u of each row
  int16_t* centered_ = nullptr;   // below VNNI: the codes minus their zero points
  uint8_t* layout_ = nullptr;     // the codes as the tier reads them (IntegerDots::layout)
};

int64_t column_chunks(int threads, int64_t M, const IntegerMatrix& w) {
  return balanced_chunks(threads, w.N, M * w.N * w.K < (int64_t{1} << 16));
}

}  // namespace

void gemm_integer(const Context& cx, const IntegerRows& a, const IntegerMatrix& w, int32_t* c) {
  const IntegerProduct product(cx, a, w);
  parallel_chunks(cx.threads, w.N, column_chunks(cx.threads, a.M, w), [&](int64_t n0, int64_t n1, int) { product.columns(c, n0, n1); });
}

void gemm_integer_to_float(const Context& cx, const IntegerRows& a, const IntegerMatrix& w, float a_scale, const float* b_scales,
                           int64_t b_scale_count, const float* bias, float* y) {
  static_assert(sizeof(float) == sizeof(int32_t));
  const int64_t M = a.M, N = w.N;
  const IntegerProduct product(cx, a, w);
  auto* sums = reinterpret_cast<int32_t*>(y);  // each chunk's sums, converted where they lie while still in cache
  parallel_chunks(cx.threads, N, column_chunks(cx.threads, M, w), [&](int64_t n0, int64_t n1, int) {
    product.columns(sums, n0, n1);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = n0; n < n1; ++n) {
        int32_t v;
        std::memcpy(&v, y + m * N + n, sizeof v);
        y[m * N + n] = static_cast<float>(v) * (a_scale * b_scales[b_scale_count == 1 ? 0 : n]) + (bias ? bias[n] : 0.0f);
      }
  });
}

}  // namespace tern::kernels
