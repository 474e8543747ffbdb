// Rotary position embedding of one head vector. The first `rot_dim` elements are rotated as pairs
// (x1, x2) → (x1·cos − x2·sin, x1·sin + x2·cos); pairs are (i, i + rot_dim/2) or, interleaved, (2i, 2i+1).
// The remaining head_size − rot_dim elements pass through.
#pragma once
#include <cstdint>

namespace tern::kernels {

// A model's RoPE table, read by the attention kernels (kernels/cpu/vector_ops.h rotates a head by it).
struct RopeTable {
  const float* cos = nullptr;  // [positions, rot/2]
  const float* sin = nullptr;
  int64_t rot_dim = 0;  // rotated leading dims of a head (even); 0: no RoPE
  bool interleaved = false;
};

void rope_rotate(const float* x, float* y, const float* cos, const float* sin, int64_t rot_dim, int64_t head_size, bool interleaved);

}  // namespace tern::kernels
