#include "core/dtype.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace tern {

#if defined(__x86_64__) && !defined(__F16C__)
uint16_t f16_bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u >= 0x47800000u)  // 2^16 and up: infinity, or NaN made quiet with its payload's top bits (as F16C)
    return static_cast<uint16_t>(sign | (u > 0x7f800000u ? 0x7e00u | (u >> 13 & 0x3ffu) : 0x7c00u));
  if (u < 0x38800000u) {  // below 2^-14: a subnormal half, rounded by adding 0.5 (its ulp is 2^-24)
    float v;
    std::memcpy(&v, &u, 4);
    v += 0.5f;
    std::memcpy(&u, &v, 4);
    return static_cast<uint16_t>(sign | (u - 0x3f000000u));
  }
  u += 0xc8000fffu + ((u >> 13) & 1u);             // rebias the exponent (127 → 15), round the 13 dropped bits to even
  return static_cast<uint16_t>(sign | (u >> 13));  // (a carry out of the mantissa may give infinity)
}

float f16_value_of(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16, exponent = bits >> 10 & 0x1fu, mantissa = bits & 0x3ffu;
  uint32_t u;
  if (exponent == 0x1f) {  // infinity, or NaN made quiet (as F16C)
    u = sign | 0x7f800000u | (mantissa != 0 ? 0x400000u : 0u) | mantissa << 13;
  } else if (exponent != 0) {
    u = sign | (exponent + 112) << 23 | mantissa << 13;
  } else {  // zero or subnormal: mantissa · 2^-24, exact in float
    const float f = static_cast<float>(mantissa) * 0x1p-24f;
    std::memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
#endif

#if defined(__x86_64__)
namespace {
__attribute__((target("avx,f16c"))) void f16_to_f32_f16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}
__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}
// CPUID leaf 1 ECX bit 29 read directly: clang 14 (the fuzz and sanitizer builds) has no "f16c" in
// __builtin_cpu_supports. "avx" there also checks that the OS saves the YMM registers.
bool has_f16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1) && __builtin_cpu_supports("avx");
}
const bool kHasF16c = has_f16c();
}  // namespace
#endif

void f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return f16_to_f32_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) {
    f16 h;
    h.bits = src[i];
    dst[i] = static_cast<float>(h);
  }
}

void f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return f32_to_f16_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = f16(src[i]).bits;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Undefined: return "undefined";
    case DType::Float32: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::String: return "string";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Float64: return "float64";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::BFloat16: return "bfloat16";
    case DType::UInt4: return "uint4";
    case DType::Int4: return "int4";
  }
  return "unknown data type";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32:
    case DType::Int32:
    case DType::UInt32: return 4;
    case DType::UInt8:
    case DType::Int8:
    case DType::Bool: return 1;
    case DType::UInt16:
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int64:
    case DType::UInt64:
    case DType::Float64: return 8;
    default: return 0;
  }
}

size_t bytes_for(DType t, int64_t numel) {
  if (t == DType::Int4 || t == DType::UInt4) return static_cast<size_t>((numel + 1) / 2);
  return dtype_size(t) * static_cast<size_t>(numel);
}

bool is_float(DType t) { return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || t == DType::Float64; }

bool is_integer(DType t) {
  switch (t) {
    case DType::UInt8:
    case DType::Int8:
    case DType::UInt16:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
    case DType::UInt32:
    case DType::UInt64:
    case DType::Int4:
    case DType::UInt4: return true;
    default: return false;
  }
}

bool is_signed(DType t) {
  return t == DType::Int8 || t == DType::Int16 || t == DType::Int32 || t == DType::Int64 || t == DType::Int4 || is_float(t);
}

}  // namespace tern
