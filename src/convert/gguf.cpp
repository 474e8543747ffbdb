#include "convert/gguf.h"

#include "core/dtype.h"
#include "core/json.h"
#include "core/tensor.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

namespace tern::convert {

std::string ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::Q4_0: return "Q4_0";
    case GgmlType::Q4_1: return "Q4_1";
    case GgmlType::Q5_0: return "Q5_0";
    case GgmlType::Q5_1: return "Q5_1";
    case GgmlType::Q8_0: return "Q8_0";
    case GgmlType::Q8_1: return "Q8_1";
    case GgmlType::Q2_K: return "Q2_K";
    case GgmlType::Q3_K: return "Q3_K";
    case GgmlType::Q4_K: return "Q4_K";
    case GgmlType::Q5_K: return "Q5_K";
    case GgmlType::Q6_K: return "Q6_K";
    case GgmlType::Q8_K: return "Q8_K";
    case GgmlType::I8: return "I8";
    case GgmlType::I16: return "I16";
    case GgmlType::I32: return "I32";
    case GgmlType::I64: return "I64";
    case GgmlType::F64: return "F64";
    case GgmlType::BF16: return "BF16";
  }
  return "type " + std::to_string(static_cast<uint32_t>(t));
}

GgmlBlock ggml_block(GgmlType t) {
  // ggml's block structs: a 32-element block keeps an fp16 scale (and min) before its packed values;
  // K-quants pack 256 elements in super-blocks of sub-block scales.
  switch (t) {
    case GgmlType::F32: return {1, 4};
    case GgmlType::F16: return {1, 2};
    case GgmlType::BF16: return {1, 2};
    case GgmlType::F64: return {1, 8};
    case GgmlType::I8: return {1, 1};
    case GgmlType::I16: return {1, 2};
    case GgmlType::I32: return {1, 4};
    case GgmlType::I64: return {1, 8};
    case GgmlType::Q4_0: return {32, 2 + 16};
    case GgmlType::Q4_1: return {32, 2 + 2 + 16};
    case GgmlType::Q5_0: return {32, 2 + 4 + 16};
    case GgmlType::Q5_1: return {32, 2 + 2 + 4 + 16};
    case GgmlType::Q8_0: return {32, 2 + 32};
    case GgmlType::Q8_1: return {32, 4 + 4 + 32};
    case GgmlType::Q2_K: return {256, 256 / 16 + 256 / 4 + 2 + 2};
    case GgmlType::Q3_K: return {256, 256 / 8 + 256 / 4 + 12 + 2};
    case GgmlType::Q4_K: return {256, 2 + 2 + 12 + 256 / 2};
    case GgmlType::Q5_K: return {256, 2 + 2 + 12 + 256 / 8 + 256 / 2};
    case GgmlType::Q6_K: return {256, 256 / 2 + 256 / 4 + 256 / 16 + 2};
    case GgmlType::Q8_K: return {256, 4 + 256 + 256 / 16 * 2};
  }
  return {0, 0};
}

float ggml_half(const uint8_t* p) {
  f16 h;
  std::memcpy(&h.bits, p, 2);
  return static_cast<float>(h);
}

namespace {

// A K-quant super-block's 6-bit scale and min number j of 8, packed in 12 bytes (Q4_K, Q5_K).
void scale_min_k4(int j, const uint8_t* q, float& scale, float& min) {
  if (j < 4) {
    scale = static_cast<float>(q[j] & 63), min = static_cast<float>(q[j + 4] & 63);
  } else {
    scale = static_cast<float>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    min = static_cast<float>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace

void ggml_unpack_block(GgmlType t, const uint8_t* p, GgmlSubBlocks& out) {
  auto each = [&](int count, int size, int bits, int zero, bool mins = false) {
    out.count = count, out.size = size, out.bits = bits, out.zero = zero, out.has_offset = mins;
    std::fill_n(out.offset, count, 0.0f);
  };
  uint8_t* q = out.q;
  switch (t) {
    case GgmlType::Q8_0:  // d · q, q signed: stored + 128
      each(1, 32, 8, 128);
      out.scale[0] = ggml_half(p);
      for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(static_cast<int8_t>(p[2 + j]) + 128);
      return;
    case GgmlType::Q4_0:  // d · (q − 8); byte j: element j low nibble, element j + 16 high
    case GgmlType::Q4_1:  // d · q + m
      each(1, 32, 4, t == GgmlType::Q4_0 ? 8 : 0, t == GgmlType::Q4_1);
      out.scale[0] = ggml_half(p);
      if (t == GgmlType::Q4_1) out.offset[0] = ggml_half(p + 2);
      for (int j = 0; j < 16; ++j) {
        const uint8_t b = p[(t == GgmlType::Q4_1 ? 4 : 2) + j];
        q[j] = b & 15, q[j + 16] = b >> 4;
      }
      return;
    case GgmlType::Q5_0:    // d · (q − 16), the fifth bits in a 32-bit mask
    case GgmlType::Q5_1: {  // d · q + m
      const bool one = t == GgmlType::Q5_1;
      each(1, 32, 5, one ? 0 : 16, one);
      out.scale[0] = ggml_half(p);
      if (one) out.offset[0] = ggml_half(p + 2);
      uint32_t qh;
      std::memcpy(&qh, p + (one ? 4 : 2), 4);
      const uint8_t* qs = p + (one ? 8 : 6);
      for (int j = 0; j < 16; ++j) {
        q[j] = static_cast<uint8_t>((qs[j] & 15) | (((qh >> j) << 4) & 0x10));
        q[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
      }
      return;
    }
    case GgmlType::Q2_K: {  // 16 sub-blocks of 16: scale and min 4 bits each, values 2 bits
      each(16, 16, 2, 0, true);
      const uint8_t *scales = p, *qs = p + 16;
      const float d = ggml_half(p + 80), dmin = ggml_half(p + 82);
      for (int half = 0, is = 0; half < 2; ++half, qs += 32)
        for (int shift = 0; shift < 8; shift += 2)
          for (int part = 0; part < 2; ++part, ++is) {
            out.scale[is] = d * static_cast<float>(scales[is] & 15);
            out.offset[is] = -(dmin * static_cast<float>(scales[is] >> 4));
            for (int l = 0; l < 16; ++l) *q++ = (qs[l + 16 * part] >> shift) & 3;
          }
      return;
    }
    case GgmlType::Q3_K: {  // 16 sub-blocks of 16: 6-bit signed scales, values 2 bits + a high bit (set: +4), minus 4
      each(16, 16, 3, 4);
      const uint8_t *hmask = p, *qs = p + 32;
      const float d = ggml_half(p + 108);
      uint32_t aux[4];
      std::memcpy(aux, p + 96, 12);
      const uint32_t tmp = aux[2], k1 = 0x03030303, k2 = 0x0f0f0f0f;
      aux[2] = ((aux[0] >> 4) & k2) | (((tmp >> 4) & k1) << 4);
      aux[3] = ((aux[1] >> 4) & k2) | (((tmp >> 6) & k1) << 4);
      aux[0] = (aux[0] & k2) | (((tmp >> 0) & k1) << 4);
      aux[1] = (aux[1] & k2) | (((tmp >> 2) & k1) << 4);
      int8_t scales[16];
      std::memcpy(scales, aux, 16);
      uint8_t m = 1;
      for (int half = 0, is = 0; half < 2; ++half, qs += 32)
        for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1))
          for (int part = 0; part < 2; ++part, ++is) {
            out.scale[is] = d * static_cast<float>(scales[is] - 32);
            for (int l = 0; l < 16; ++l) {
              const int k = l + 16 * part;
              *q++ = static_cast<uint8_t>(((qs[k] >> shift) & 3) + ((hmask[k] & m) ? 4 : 0));
            }
          }
      return;
    }
    case GgmlType::Q4_K:    // 8 sub-blocks of 32: 6-bit scales and mins, values 4 bits
    case GgmlType::Q5_K: {  // the same with a fifth bit per value
      const bool five = t == GgmlType::Q5_K;
      each(8, 32, five ? 5 : 4, 0, true);
      const float d = ggml_half(p), dmin = ggml_half(p + 2);
      const uint8_t *scales = p + 4, *qh = p + 16, *ql = p + (five ? 48 : 16);
      for (int is = 0; is < 8; is += 2, ql += 32) {
        for (int part = 0; part < 2; ++part) {
          float sc, mn;
          scale_min_k4(is + part, scales, sc, mn);
          out.scale[is + part] = d * sc, out.offset[is + part] = -(dmin * mn);
          const uint8_t high = static_cast<uint8_t>(1 << (is + part));
          for (int l = 0; l < 32; ++l) *q++ = static_cast<uint8_t>((part ? ql[l] >> 4 : ql[l] & 15) + (five && (qh[l] & high) ? 16 : 0));
        }
      }
      return;
    }
    case GgmlType::Q6_K: {  // 16 sub-blocks of 16: int8 scales, values 4 + 2 bits, minus 32
      each(16, 16, 6, 32);
      const uint8_t *ql = p, *qh = p + 128;
      const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
      const float d = ggml_half(p + 208);
      for (int is = 0; is < 16; ++is) out.scale[is] = d * static_cast<float>(sc[is]);
      for (int n = 0; n < 256; n += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; ++l) {
          q[n + l] = static_cast<uint8_t>((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4));
          q[n + l + 32] = static_cast<uint8_t>((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4));
          q[n + l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
          q[n + l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
        }
      return;
    }
    default:
      fail_unsupported("ggml ", ggml_type_name(t),
                       " values are not decoded by tern (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, "
                       "Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K are)");
  }
}

void dequantize_blocks(GgmlType t, const uint8_t* p, int64_t elements, float* y) {
  const GgmlBlock block = ggml_block(t);
  if (block.elements == 0 || elements % block.elements) fail("cannot decode ", elements, " values of ggml ", ggml_type_name(t));
  switch (t) {
    case GgmlType::F32: std::memcpy(y, p, static_cast<size_t>(elements) * 4); return;
    case GgmlType::F16:
      for (int64_t i = 0; i < elements; ++i) y[i] = ggml_half(p + 2 * i);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < elements; ++i) {
        const uint32_t bits = static_cast<uint32_t>(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
        std::memcpy(y + i, &bits, 4);
      }
      return;
    default: break;
  }
  GgmlSubBlocks s;
  for (int64_t b = 0; b < elements / block.elements; ++b, p += block.bytes) {
    ggml_unpack_block(t, p, s);
    for (int j = 0; j < s.count; ++j)
      for (int l = 0; l < s.size; ++l) *y++ = s.value(j, l);
  }
}

bool GgufValue::is_integer() const {
  switch (type) {
    case Type::UInt8:
    case Type::Int8:
    case Type::UInt16:
    case Type::Int16:
    case Type::UInt32:
    case Type::Int32:
    case Type::UInt64:
    case Type::Int64:
    case Type::Bool: return true;
    default: return false;
  }
}

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read little-endian
constexpr int kMaxArrayDepth = 4;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// Reads little-endian fields from the mapped bytes, failing with the field's name when the file ends.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path) : data_(data), size_(size), path_(path) {}
  size_t at() const { return at_; }
  size_t left() const { return size_ - at_; }
  const std::string& path() const { return path_; }
  size_t values_bytes = 0;  // what the metadata arrays read so far hold in memory
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + at_), static_cast<size_t>(n));
    // GGUF strings are UTF-8 (the spec); one that is not would only fail later, writing tokenizer.json.
    if (!is_utf8(s)) fail("'", path_, "' is corrupt: ", what, " holds a string of ", n, " bytes at offset ", at_, " that is not UTF-8");
    at_ += static_cast<size_t>(n);
    return s;
  }
  void need(uint64_t n, const char* what) const {
    if (n > left()) fail("'", path_, "' is truncated or corrupt: ", what, " needs ", n, " bytes at offset ", at_, ", ", left(), " remain");
  }

 private:
  const uint8_t* data_;
  size_t size_, at_ = 0;
  const std::string& path_;
};

// The smallest number of bytes one value of `t` takes in the file (bounds array counts before reading).
uint64_t min_bytes(GgufValue::Type t) {
  using T = GgufValue::Type;
  switch (t) {
    case T::UInt8:
    case T::Int8:
    case T::Bool: return 1;
    case T::UInt16:
    case T::Int16: return 2;
    case T::UInt32:
    case T::Int32:
    case T::Float32: return 4;
    case T::UInt64:
    case T::Int64:
    case T::Float64:
    case T::String: return 8;
    case T::Array: return 12;
  }
  return 0;
}

GgufValue read_value(Cursor& c, GgufValue::Type type, const std::string& key, int depth) {
  using T = GgufValue::Type;
  GgufValue v;
  v.type = type;
  const char* what = key.c_str();
  switch (type) {
    case T::UInt8: v.i = c.read<uint8_t>(what); break;
    case T::Int8: v.i = c.read<int8_t>(what); break;
    case T::UInt16: v.i = c.read<uint16_t>(what); break;
    case T::Int16: v.i = c.read<int16_t>(what); break;
    case T::UInt32: v.i = c.read<uint32_t>(what); break;
    case T::Int32: v.i = c.read<int32_t>(what); break;
    case T::Int64: v.i = c.read<int64_t>(what); break;
    case T::UInt64:
      v.u = c.read<uint64_t>(what);
      v.i = v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? -1 : static_cast<int64_t>(v.u);
      break;
    case T::Bool: {
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) fail("'", c.path(), "': metadata '", key, "': a bool holds ", int(b));
      v.i = b;
      break;
    }
    case T::Float32: v.f = c.read<float>(what); break;
    case T::Float64: v.f = c.read<double>(what); break;
    case T::String: v.s = c.string(what); break;
    case T::Array: {
      if (depth >= kMaxArrayDepth) fail("'", c.path(), "': metadata '", key, "': arrays nested deeper than ", kMaxArrayDepth);
      const uint32_t et = c.read<uint32_t>(what);
      if (et > static_cast<uint32_t>(T::Float64))
        fail("'", c.path(), "': metadata '", key, "': array element type ", et, " is not a GGUF type");
      v.element_type = static_cast<T>(et);
      const uint64_t n = c.read<uint64_t>(what);
      if (n > c.left() / min_bytes(v.element_type))
        fail("'", c.path(), "': metadata '", key, "': an array of ", n, " elements cannot fit in the ", c.left(), " bytes left");
      // A uint8 element is 1 byte in the file and a GgufValue (~100 bytes) here: the arrays' values so far
      // are checked against the memory cap before they are allocated (a 200 MB file could ask for 20 GB).
      c.values_bytes += static_cast<size_t>(n) * sizeof(GgufValue);
      check_host_bytes(c.values_bytes, detail::concat("'", c.path(), "': metadata '", key, "': an array of ", n, " elements: "));
      v.array.reserve(static_cast<size_t>(n));
      for (uint64_t k = 0; k < n; ++k) v.array.push_back(read_value(c, v.element_type, key, depth + 1));
      break;
    }
    default: fail("'", c.path(), "': metadata '", key, "': value type ", static_cast<uint32_t>(type), " is not a GGUF type");
  }
  return v;
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : path_(path), file_(map_file(path)) {
  const auto* bytes = static_cast<const uint8_t*>(file_->data);
  Cursor c(bytes, file_->size, path_);
  if (c.read<uint32_t>("the magic") != kMagic) fail("'", path_, "' is not a GGUF file (no GGUF magic)");
  version_ = c.read<uint32_t>("the version");
  if (version_ == 1) fail("'", path_, "' is GGUF version 1, which tern does not read (convert it again with a current llama.cpp)");
  if (version_ != 2 && version_ != 3) fail("'", path_, "' is GGUF version ", version_, "; tern reads versions 2 and 3");
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count"), n_kv = c.read<uint64_t>("the metadata count");
  // Each key/value takes at least 8 + 4 + 1 bytes, each tensor info 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.left() / 13) fail("'", path_, "' claims ", n_kv, " metadata entries; the file cannot hold them");
  if (n_tensors > c.left() / 32) fail("'", path_, "' claims ", n_tensors, " tensors; the file cannot hold them");
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.string("a metadata key");
    const uint32_t type = c.read<uint32_t>(key.c_str());
    if (type > static_cast<uint32_t>(GgufValue::Type::Float64))
      fail("'", path_, "': metadata '", key, "' has value type ", type, ", not a GGUF type");
    GgufValue v = read_value(c, static_cast<GgufValue::Type>(type), key, 0);
    if (!metadata_.emplace(key, std::move(v)).second) fail("'", path_, "': metadata key '", key, "' appears twice");
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufValue::Type::UInt32)
      fail("'", path_, "': general.alignment is of GGUF value type ", static_cast<uint32_t>(a->type), "; it must be a uint32 (type 4)");
    if (a->i == 0 || (a->i & (a->i - 1)) != 0) fail("'", path_, "': general.alignment must be a power of two, got ", a->i);
    alignment_ = static_cast<uint64_t>(a->i);
  }
  std::set<std::string> names;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = c.string("a tensor name");
    if (!names.insert(t.name).second) fail("'", path_, "': tensor '", t.name, "' appears twice");
    const uint32_t n_dims = c.read<uint32_t>(t.name.c_str());
    if (n_dims == 0 || n_dims > kMaxDims) fail("'", path_, "': tensor '", t.name, "' has ", n_dims, " dims (1 to ", kMaxDims, ")");
    t.elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = c.read<uint64_t>(t.name.c_str());
      if (n == 0 || n > (uint64_t{1} << 40) || static_cast<uint64_t>(t.elements) > (uint64_t{1} << 50) / n)
        fail("'", path_, "': tensor '", t.name, "' has an impossible dim ", n);
      t.dims.push_back(static_cast<int64_t>(n));
      t.elements *= static_cast<int64_t>(n);
    }
    t.type = static_cast<GgmlType>(c.read<uint32_t>(t.name.c_str()));
    const uint64_t offset = c.read<uint64_t>(t.name.c_str());
    const GgmlBlock block = ggml_block(t.type);
    if (block.elements == 0) fail("'", path_, "': tensor '", t.name, "' has ggml ", ggml_type_name(t.type), ", which tern does not know");
    if (t.dims[0] % block.elements != 0)
      fail("'", path_, "': tensor '", t.name, "' rows of ", t.dims[0], " are not whole ", ggml_type_name(t.type), " blocks of ",
           block.elements);
    t.bytes = t.elements / block.elements * block.bytes;
    if (offset % alignment_ != 0)
      fail("'", path_, "': tensor '", t.name, "' starts at ", offset, ", not a multiple of the alignment ", alignment_);
    t.data = reinterpret_cast<const uint8_t*>(offset);  // relative until the data section is known
    tensors_.push_back(std::move(t));
  }
  const uint64_t data_start = (c.at() + alignment_ - 1) / alignment_ * alignment_;
  for (GgufTensor& t : tensors_) {
    const auto offset = reinterpret_cast<uint64_t>(t.data);
    if (data_start > file_->size || offset > file_->size - data_start || static_cast<uint64_t>(t.bytes) > file_->size - data_start - offset)
      fail("'", path_, "' is truncated: tensor '", t.name, "' (", t.bytes, " bytes at data offset ", offset,
           ") ends past the end of the file");
    t.data = bytes + data_start + offset;
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
const GgufValue& require(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) fail("'", f.path(), "' has no metadata '", key, "'");
  return *v;
}
}  // namespace

std::string GgufFile::string(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  if (v.type != GgufValue::Type::String) fail("'", path_, "': metadata '", key, "' is not a string");
  return v.s;
}

int64_t GgufFile::integer(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  if (!v.is_integer() || (v.type == GgufValue::Type::UInt64 && v.i < 0))
    fail("'", path_, "': metadata '", key, "' is not an integer tern can hold");
  return v.i;
}

double GgufFile::number(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  if (v.is_float()) return v.f;
  return static_cast<double>(integer(key));
}

const std::vector<GgufValue>& GgufFile::array(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  if (v.type != GgufValue::Type::Array) fail("'", path_, "': metadata '", key, "' is not an array");
  return v.array;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  for (const GgufTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace tern::convert
