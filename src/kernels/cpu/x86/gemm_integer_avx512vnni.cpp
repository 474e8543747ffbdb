// AVX512_VNNI: gemm_integer's dot products on the EVEX vpdpbusd, 64 bytes a step (x86/gemm_integer_vnni_impl.h).
#include "kernels/cpu/x86/gemm_integer_vnni_impl.h"

namespace tern::kernels {
namespace {

struct ZmmVnni {
  using I = __m512i;
  static constexpr int64_t kBytes = 64;
  static I zero() { return _mm512_setzero_si512(); }
  static I set1_8(char v) { return _mm512_set1_epi8(v); }
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static I bit_xor(I a, I b) { return _mm512_xor_si512(a, b); }
  static I dot(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
  // Through memory: GCC 12 warns on the undefined register AVX-512's casts and extracts pass, its bug 105593 (as
  // x86/hsum.h). Once a tile row, after the whole of K.
  static __m256i half(I v) {
    alignas(64) int32_t lanes[16];
    _mm512_store_si512(lanes, v);
    return _mm256_add_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(lanes)),
                            _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes + 8)));
  }
};

}  // namespace

void integer_dots_avx512vnni(const uint8_t* a, int64_t M, int64_t K, const uint8_t* w, bool flip, int64_t n0, int64_t n1, int32_t* dots,
                             int64_t N) {
  integer_dots<ZmmVnni>(a, M, K, w, flip, n0, n1, dots, N);
}

}  // namespace tern::kernels
