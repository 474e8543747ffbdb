// FNV-1a: a 64-bit hash that stays the same across builds and machines, for names of cached files and
// fingerprints of model files (not for security).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tern {

constexpr uint64_t kFnv1aStart = 1469598103934665603ULL;

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnv1aStart) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}
inline uint64_t fnv1a(const std::string& s, uint64_t h = kFnv1aStart) { return fnv1a(s.data(), s.size(), h); }

}  // namespace tern
