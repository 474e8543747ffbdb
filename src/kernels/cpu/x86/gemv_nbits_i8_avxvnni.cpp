// AVX-VNNI: vpdpbusd (VEX) adds four u8·s8 products per int32 lane with no int16 step, so 8-bit weights
// are taken as stored.
#include "kernels/cpu/x86/gemv_nbits_i8_impl.h"

namespace tern::kernels {
namespace {

struct DotAvxVnni {
  static constexpr int32_t kW8Offset = 0;
  static constexpr bool kTwoChains = true;  // groups: vpdpbusd is a 5-cycle chain;
  static __m256i u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
  static __m256i u8s8_2(__m256i acc, __m256i u0, __m256i s0, __m256i u1, __m256i s1) { return u8s8(u8s8(acc, u0, s0), u1, s1); }
  static __m256i w8(__m256i acc, __m256i w, __m256i s) { return u8s8(acc, w, s); }
};

}  // namespace

void gemv_nbits_i8_avxvnni(const Int8Row* x, int64_t M, const NBitsWeights& w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  gemv_rows<DotAvxVnni>(x, M, w, n0, n1, y, ldy);
}

}  // namespace tern::kernels
