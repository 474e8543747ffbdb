#include "graph/raw_data_in_place.h"

#include <climits>
#include <cstring>
#include <vector>

#include "graph/onnx_wire.h"

namespace tern::raw_data_in_place {
namespace {

constexpr int kRawDataField = 9;  // TensorProto.raw_data

size_t varint_size(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

void put_varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  out.push_back(static_cast<char>(v));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// One walk over the wire bytes, made twice: first measuring (each nested message's new size kept, in the order
// the walk meets them), then writing the slim message with those sizes as its length prefixes.
class Slimmer {
 public:
  explicit Slimmer(const uint8_t* begin) : begin_(begin), tensor_(onnx_wire::tensor_proto()) {}

  std::optional<std::string> run(int type, const uint8_t* end) {
    const std::optional<uint64_t> size = walk(type, begin_, end, 0);
    if (!size || !replaced_) return std::nullopt;
    std::string out;
    out.reserve(*size);
    out_ = &out;
    walk(type, begin_, end, 0);
    return out;
  }

 private:
  void copy(const uint8_t* from, const uint8_t* to) {
    if (out_) out_->append(reinterpret_cast<const char*>(from), static_cast<size_t>(to - from));
  }

  // The new size of the message of type `type` in [p, end); nullopt when the bytes do not walk.
  std::optional<uint64_t> walk(int type, const uint8_t* p, const uint8_t* end, int depth) {
    if (depth > 100) return std::nullopt;  // protobuf's own recursion limit
    const onnx_wire::Message& message = onnx_wire::messages()[static_cast<size_t>(type)];
    uint64_t size = 0;
    while (p < end) {
      const uint8_t* field = p;
      uint64_t tag = 0, len = 0;
      if (!onnx_wire::read_varint(p, end, tag)) return std::nullopt;
      const uint8_t* after_tag = p;
      switch (tag & 7) {
        case 0:
          if (!onnx_wire::read_varint(p, end, len)) return std::nullopt;
          break;
        case 1:
        case 5: {
          const ptrdiff_t n = (tag & 7) == 1 ? 8 : 4;
          if (end - p < n) return std::nullopt;
          p += n;
          break;
        }
        case 2: {
          if (!onnx_wire::read_varint(p, end, len) || len > static_cast<uint64_t>(end - p)) return std::nullopt;
          const uint64_t number = tag >> 3;
          const onnx_wire::Field* f = number <= INT_MAX ? message.find(static_cast<int>(number)) : nullptr;
          const auto tag_bytes = static_cast<uint64_t>(after_tag - field);
          if (f && f->kind == onnx_wire::Kind::Message) {
            size_t slot = sizes_.size();
            if (out_) {
              slot = next_++;
              copy(field, after_tag);
              put_varint(*out_, sizes_[slot]);
            } else {
              sizes_.push_back(0);
            }
            const std::optional<uint64_t> inner = walk(f->message, p, p + len, depth + 1);
            if (!inner) return std::nullopt;
            sizes_[slot] = *inner;
            size += tag_bytes + varint_size(*inner) + *inner;
          } else if (type == tensor_ && number == kRawDataField && (len >= kMinBytes || len == kTokenBytes)) {
            replaced_ = true;
            if (out_) {
              copy(field, after_tag);
              put_varint(*out_, kTokenBytes);
              put_u64(*out_, static_cast<uint64_t>(p - begin_));
              put_u64(*out_, len);
            }
            size += tag_bytes + varint_size(kTokenBytes) + kTokenBytes;
          } else {
            copy(field, p + len);
            size += static_cast<uint64_t>(p + len - field);
          }
          p += len;
          continue;
        }
        default: return std::nullopt;  // groups: not in ONNX
      }
      copy(field, p);
      size += static_cast<uint64_t>(p - field);
    }
    return size;
  }

  const uint8_t* begin_;
  const int tensor_;
  std::vector<uint64_t> sizes_;  // each nested message's new size, in walk order
  size_t next_ = 0;              // the writing walk's place in sizes_
  std::string* out_ = nullptr;   // null while measuring
  bool replaced_ = false;
};

}  // namespace

std::optional<std::string> slim_message(std::span<const uint8_t> message, int type) {
  return Slimmer(message.data()).run(type, message.data() + message.size());
}

FileSpan read_token(std::string_view raw_data) {
  FileSpan s;
  for (int i = 0; i < 8; ++i) {
    s.offset |= static_cast<uint64_t>(static_cast<uint8_t>(raw_data[static_cast<size_t>(i)])) << (8 * i);
    s.length |= static_cast<uint64_t>(static_cast<uint8_t>(raw_data[static_cast<size_t>(8 + i)])) << (8 * i);
  }
  return s;
}

}  // namespace tern::raw_data_in_place
