// AVX-VNNI: gemm_integer's dot products on the VEX vpdpbusd, 32 bytes a step (x86/gemm_integer_vnni_impl.h).
#include "kernels/cpu/x86/gemm_integer_vnni_impl.h"

namespace tern::kernels {
namespace {

struct YmmVnni {
  using I = __m256i;
  static constexpr int64_t kBytes = 32;
  static I zero() { return _mm256_setzero_si256(); }
  static I set1_8(char v) { return _mm256_set1_epi8(v); }
  static I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static I bit_xor(I a, I b) { return _mm256_xor_si256(a, b); }
  static I dot(I acc, I u, I s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
  static __m256i half(I v) { return v; }
};

}  // namespace

void integer_dots_avxvnni(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, bool flip, int64_t n0, int64_t n1, int32_t* dots,
                          int64_t N) {
  integer_dots<YmmVnni>(a, M, K, w, flip, n0, n1, dots, N);
}

}  // namespace tern::kernels
