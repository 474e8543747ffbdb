// GGUF, llama.cpp's model file (versions 2 and 3): a header, typed metadata key/values (architecture,
// hyperparameters, tokenizer), tensor infos, and the tensor data, aligned, mapped from the file. The
// reader checks every length and offset against the file before it trusts it: a truncated or hostile
// file gets an error naming the field, key or tensor, never a read past the end. What the tensors mean
// is the importer's business (gguf_import.h); this only reads the container.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace tern::convert {

// Element and block types of ggml, as GGUF numbers them.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};
// "Q4_1", or "type 99" for a number the reader does not know.
std::string ggml_type_name(GgmlType t);
// Elements per block and bytes per block; {0, 0} for a type the reader does not know.
struct GgmlBlock {
  int64_t elements = 0, bytes = 0;
};
GgmlBlock ggml_block(GgmlType t);
// The little-endian fp16 at `p` (ggml blocks keep their scales so), as float.
float ggml_half(const uint8_t* p);
// One quantized ggml block as unsigned integers per sub-block: value l of sub-block j is
// scale[j] · (q − zero) + offset[j], in that order of float operations — bit for bit what ggml's own
// dequantization computes (its "d · q − m" with offset −m, its signed values shifted up by `zero`). The one
// place that knows the block layouts: dequantize_blocks and the importer's MatMulNBits blocks both read it.
struct GgmlSubBlocks {
  int count = 0, size = 0;  // sub-blocks per block, values per sub-block
  int bits = 0;             // q < 2^bits
  int zero = 0;
  bool has_offset = false;  // the type keeps a min per sub-block (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K)
  float scale[16] = {}, offset[16] = {};
  uint8_t q[256] = {};  // in element order
  float value(int j, int l) const { return scale[j] * static_cast<float>(q[j * size + l] - zero) + offset[j]; }
};
// Unpacks one block of a quantized type (Q4_0 … Q6_K, not Q8_1/Q8_K); fails for any other type.
void ggml_unpack_block(GgmlType t, const uint8_t* block, GgmlSubBlocks& out);
// The float values of `elements` values stored as `t` (whole blocks), as ggml decodes them: exact for the
// float types; scale · (q − zero) + offset per sub-block for the quantized ones. Fails for the integer types
// and types tern does not decode.
void dequantize_blocks(GgmlType t, const uint8_t* data, int64_t elements, float* out);

// One metadata value. Scalars: integers in `i` (unsigned ones too, when they fit) or `u`, floats in `f`,
// bools in `i`, strings in `s`; arrays in `array`, all of `element_type`.
struct GgufValue {
  enum class Type : uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
  };
  Type type = Type::UInt8;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  Type element_type = Type::UInt8;
  std::vector<GgufValue> array;
  bool is_integer() const;
  bool is_float() const { return type == Type::Float32 || type == Type::Float64; }
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] varies fastest (a row-major [rows, cols] matrix is {cols, rows})
  GgmlType type = GgmlType::F32;
  int64_t elements = 0;
  int64_t bytes = 0;
  const uint8_t* data = nullptr;  // inside the mapping
};

class GgufFile {
 public:
  // Reads and checks the header, metadata and tensor infos of `path`; fails naming what is wrong.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const std::shared_ptr<MappedFile>& mapping() const { return file_; }

  // Lookups that fail naming the key (and the file) when it is absent or of another kind.
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::string string(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;  // float or integer
  const std::vector<GgufValue>& array(const std::string& key) const;
  const GgufTensor* tensor(const std::string& name) const;  // nullptr when absent

 private:
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensor> tensors_;
};

}  // namespace tern::convert
