// How a ring KV cache stores its keys and values (`--kv-dtype`): fp32, fp16, or llama.cpp's q8_0 and q4_0 —
// blocks of 32 elements with one fp16 scale, 34 and 18 bytes, so 0.53x and 0.28x of fp16's bytes. Keys are
// quantized as the ring stores them, before RoPE; a block never spans two heads (head_dim a multiple of 32).
// A q4_0 block holds the Walsh–Hadamard transform of its 32 elements, not the elements: a few large channels
// (pre-RoPE keys have them) then spread over the block instead of taking its 16 steps from the others.
// SmolLM2-135M, `tern eval --context 2048` on 5,792 tokens of models/default/validation.txt: fp32 ring perplexity
// 29.045; q4_0 keys alone, stored as they are, 32.54 (+12%), transformed 30.16 (+3.9%); q4_0 values alone, as they
// are, 29.47 (+1.5%); both transformed (this format) 30.27 (+4.2%).
#pragma once
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace tern::kernels {

enum class KvStorage { F32, F16, Q8_0, Q4_0 };

constexpr int64_t kKvBlock = 32;  // elements a q8_0 / q4_0 block

// x[j] ≈ q[j] · scale, q in [−127, 127].
struct KvBlockQ8_0 {
  f16 scale;
  int8_t q[kKvBlock];
};
// y[j] ≈ (n[j] − 8) · scale, n in [0, 15], for y = H·x (H the 32×32 Walsh–Hadamard matrix, H·H = 32·I): element j <
// 16 of y in the low nibble of q[j], element 16 + j in its high one; x = H·y / 32.
struct KvBlockQ4_0 {
  f16 scale;
  uint8_t q[kKvBlock / 2];
};
static_assert(sizeof(KvBlockQ8_0) == 34 && sizeof(KvBlockQ4_0) == 18, "llama.cpp's block sizes");

// The names `--kv-dtype` takes and profiles print: fp32, fp16, q8_0, q4_0.
inline const char* kv_storage_name(KvStorage s) {
  switch (s) {
    case KvStorage::F16: return "fp16";
    case KvStorage::Q8_0: return "q8_0";
    case KvStorage::Q4_0: return "q4_0";
    default: return "fp32";
  }
}
constexpr KvStorage kKvStorages[] = {KvStorage::F32, KvStorage::F16, KvStorage::Q8_0, KvStorage::Q4_0};
inline std::optional<KvStorage> kv_storage_named(std::string_view name) {
  for (KvStorage s : kKvStorages)
    if (name == kv_storage_name(s)) return s;
  return std::nullopt;
}
// Every name, for messages: "fp32, fp16, q8_0, q4_0" (`last` before the last one: ", " or " or ").
inline std::string kv_storage_names(const char* last = ", ") {
  std::string out;
  for (size_t i = 0; i < std::size(kKvStorages); ++i) {
    if (i > 0) out += i + 1 < std::size(kKvStorages) ? ", " : last;
    out += kv_storage_name(kKvStorages[i]);
  }
  return out;
}
// Elements a storage unit holds (1, or a block's 32): a row of n elements is n / that units.
inline int64_t kv_storage_unit_elements(KvStorage s) { return s == KvStorage::Q8_0 || s == KvStorage::Q4_0 ? kKvBlock : 1; }
// Bytes of a row of n elements (n a multiple of kv_storage_unit_elements).
inline int64_t kv_storage_bytes(KvStorage s, int64_t elements) {
  switch (s) {
    case KvStorage::F16: return elements * 2;
    case KvStorage::Q8_0: return elements / kKvBlock * static_cast<int64_t>(sizeof(KvBlockQ8_0));
    case KvStorage::Q4_0: return elements / kKvBlock * static_cast<int64_t>(sizeof(KvBlockQ4_0));
    default: return elements * 4;
  }
}

// The storage type's unit, as the kernels template over it.
template <typename T>
constexpr int64_t kKvUnitElements = 1;
template <>
inline constexpr int64_t kKvUnitElements<KvBlockQ8_0> = kKvBlock;
template <>
inline constexpr int64_t kKvUnitElements<KvBlockQ4_0> = kKvBlock;

}  // namespace tern::kernels
