// Tensors inside model.onnx read in place from the mapped file. protobuf's parse copies every raw_data into a
// std::string, and the loader then copied it into a tensor: a 539 MB single-file SmolLM2-135M export peaked at
// 1.61 GB at load (the mapping, protobuf's copy, the tensors). Instead the loader hands protobuf a slim copy of
// the message in which each large raw_data is a 16-byte token naming where its bytes lie in the file, and the
// tensor is a view of the mapping there (or, when the bytes are not aligned for their type, a copy after which
// the file's pages are dropped).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tern::raw_data_in_place {

// raw_data of at least this many bytes is left in the file; smaller ones (shape constants) stay in the message.
constexpr size_t kMinBytes = 1024;
// A token: the offset and the length of the bytes in the file, 8 bytes each, little-endian. Every raw_data of
// exactly this length is replaced too, so a token in a slim message is never a tensor's own bytes.
constexpr size_t kTokenBytes = 16;

struct FileSpan {
  uint64_t offset = 0, length = 0;
};

// `message`'s wire bytes (of onnx_wire type `type`) with every TensorProto.raw_data at any depth that is
// kMinBytes or longer, or kTokenBytes long, replaced by its token, every enclosing length rewritten. nullopt when
// nothing was replaced, or when the bytes are not a message the walk can follow: protobuf's parse of the original
// then says what is wrong with it.
std::optional<std::string> slim_message(std::span<const uint8_t> message, int type);

// The span a raw_data of a slim message stands for (its size must be kTokenBytes).
FileSpan read_token(std::string_view raw_data);

}  // namespace tern::raw_data_in_place
