#include "core/dtype.h"

namespace tern {

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
