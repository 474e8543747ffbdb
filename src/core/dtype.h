// Element types, numbered as ONNX's TensorProto.DataType so loader and tensors share one enum.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#if defined(__x86_64__) && defined(__F16C__)
#include <immintrin.h>
#endif

#include "core/error.h"

namespace tern {

enum class DType : int32_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
  UInt4 = 21,
  Int4 = 22,
};

// IEEE half: stored as bits, arithmetic happens in float — converted by F16C on x86-64 (part of
// x86-64-v3), by the FP16 conversions every AArch64 core has (__fp16), and in an x86-64-v2 build (no F16C)
// by bit arithmetic (dtype.cpp: out of line, as inlined at every use it made the minimal static CLI 8 KB
// larger); all round to nearest even.
#if defined(__x86_64__) && !defined(__F16C__)
uint16_t f16_bits_of(float f);
float f16_value_of(uint16_t bits);
#endif
struct f16 {
  uint16_t bits = 0;
  f16() = default;
#if defined(__x86_64__) && defined(__F16C__)
  explicit f16(float f) : bits(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)) {}
  operator float() const { return _cvtsh_ss(bits); }
#elif defined(__x86_64__)
  explicit f16(float f) : bits(f16_bits_of(f)) {}
  operator float() const { return f16_value_of(bits); }
#elif defined(__aarch64__)
  explicit f16(float f) {
    const __fp16 h = static_cast<__fp16>(f);
    std::memcpy(&bits, &h, 2);
  }
  operator float() const {
    __fp16 h;
    std::memcpy(&h, &bits, 2);
    return static_cast<float>(h);
  }
#else
#error "tern builds for x86-64 and AArch64"
#endif
};

// bfloat16: the top half of a float, rounded to nearest even.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40);  // keep NaN a NaN
    } else {
      bits = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// n float16 values widened to float32, or float32 values narrowed (to nearest even): the bulk conversions of
// convert_tensor. On x86 with F16C eight a step — an x86-64-v2 build asks the CPU at run time: element by element
// through f16_value_of, a float16 model's every conversion cost it 3-10x (SmolLM2-135M's shape, fp16 prefill: SwiGLU
// 1.10 ms a call against 0.11 in float32).
void f16_to_f32(const uint16_t* src, float* dst, int64_t n);
void f32_to_f16(const float* src, uint16_t* dst, int64_t n);

const char* dtype_name(DType t);
// Bytes per element; 0 for String and the packed 4-bit types (use bytes_for()).
size_t dtype_size(DType t);
size_t bytes_for(DType t, int64_t numel);
bool is_float(DType t);    // f32, f16, bf16, f64
bool is_integer(DType t);  // signed or unsigned ints (not bool)
bool is_signed(DType t);

template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::Float64;
};
template <>
struct dtype_of<f16> {
  static constexpr DType value = DType::Float16;
};
template <>
struct dtype_of<bf16> {
  static constexpr DType value = DType::BFloat16;
};
template <>
struct dtype_of<int8_t> {
  static constexpr DType value = DType::Int8;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::UInt8;
};
template <>
struct dtype_of<int16_t> {
  static constexpr DType value = DType::Int16;
};
template <>
struct dtype_of<uint16_t> {
  static constexpr DType value = DType::UInt16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::Int32;
};
template <>
struct dtype_of<uint32_t> {
  static constexpr DType value = DType::UInt32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct dtype_of<uint64_t> {
  static constexpr DType value = DType::UInt64;
};
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::Bool;
};

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) for the C++ type of `t`. The groups keep instantiations to what ops need.
// A TERN_MINIMAL build keeps the types decoder exports compute in — float32/16, bfloat16 activations,
// int64/int32 ids, shapes and lengths, bool masks — and drops the rest: every generic op is instantiated
// per type (ops/elementwise_binary.cpp alone is 1.41 MB of x86-64 code for all 13).
template <typename F>
decltype(auto) visit_numeric(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float16: return f(TypeTag<f16>{});
    case DType::BFloat16: return f(TypeTag<bf16>{});
    case DType::Int32: return f(TypeTag<int32_t>{});
    case DType::Int64: return f(TypeTag<int64_t>{});
    case DType::Bool: return f(TypeTag<bool>{});
#ifndef TERN_MINIMAL
    case DType::Float64: return f(TypeTag<double>{});
    case DType::Int8: return f(TypeTag<int8_t>{});
    case DType::UInt8: return f(TypeTag<uint8_t>{});
    case DType::Int16: return f(TypeTag<int16_t>{});
    case DType::UInt16: return f(TypeTag<uint16_t>{});
    case DType::UInt32: return f(TypeTag<uint32_t>{});
    case DType::UInt64: return f(TypeTag<uint64_t>{});
    default: fail_unsupported("data type ", dtype_name(t), " is not supported here");
#else
    default:
      fail_unsupported("data type ", dtype_name(t),
                       " is not supported here (a TERN_MINIMAL build computes "
                       "in float32, float16, bfloat16, int32, int64 and bool only)");
#endif
  }
}

// Element types with a fixed byte size, dispatched by size only (copies, gathers, transposes).
template <typename F>
decltype(auto) visit_by_size(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
    default: fail_unsupported("data type ", dtype_name(t), " cannot be moved element-wise");
  }
}

}  // namespace tern
