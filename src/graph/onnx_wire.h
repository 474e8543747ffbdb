// ONNX's protobuf schema as the loader's pre-parse walk needs it: which length-delimited fields of each
// message are nested messages, strings, bytes or packed numbers. Every other field and every unknown one
// is just bytes to the walk. A table of our own rather than protobuf's descriptors, so that the walk also
// runs over protobuf-lite classes (TERN_STATIC compiles onnx.proto as LITE_RUNTIME: no descriptors);
// tests/test_loader.cpp checks it field by field against the descriptors of the onnx-ml classes.
#pragma once
#include <cstdint>
#include <span>

namespace tern::onnx_wire {

enum class Kind : uint8_t {
  Message,       // a nested message of type `message`
  String,        // text: must be UTF-8
  Bytes,         // raw bytes (raw_data, an attribute's `s`)
  PackedFixed,   // repeated float/double: 4 or 8 bytes a number on disk and in memory
  PackedVarint,  // repeated int32/int64/uint64: at least a byte a number on disk, 8 in memory
};

struct Field {
  int number;
  Kind kind;
  int message;  // Kind::Message: the index of its type in messages()
  const char* name;
};

struct Message {
  const char* name;  // as protobuf's full_name(), e.g. "onnx.NodeProto"
  std::span<const Field> fields;
  const Field* find(int number) const;  // nullptr for any field not listed
};

std::span<const Message> messages();
// The walk's roots.
int model_proto();
int tensor_proto();

// A base-128 varint at `p` (advanced past it); false when it runs past `end` or past 10 bytes.
inline bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

}  // namespace tern::onnx_wire
