// gemm_integer.cpp's dot products and quantization at tier avx2 of an x86-64-v2 build (kernels.h).
#include "kernels/cpu/gemm_integer_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels::float_avx2 {

void integer_rows(const int16_t* a, int64_t M, int64_t K, const int8_t* w, int64_t n0, int64_t n1, int32_t* c, int64_t N) {
  integer_rows_at_width(a, M, K, w, n0, n1, c, N);
}
void integer_rows(const int16_t* a, int64_t M, int64_t K, const uint8_t* w, int64_t n0, int64_t n1, int32_t* c, int64_t N) {
  integer_rows_at_width(a, M, K, w, n0, n1, c, N);
}
void u8_range(const float* x, int64_t n, float& lo, float& hi) { range_at_width(x, n, lo, hi); }
void quantize_u8(const float* x, int64_t n, float scale, uint8_t zero_point, uint8_t* q) {
  quantize_u8_at_width(x, n, scale, zero_point, q);
}

}  // namespace tern::kernels::float_avx2
