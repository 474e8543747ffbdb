#include "kernels/cpu/ring_attention.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/rope.h"

namespace tern::kernels {

template <typename T>
void ring_attention(const float* q, float* out, const RingAttentionArgs<T>& a) {
  const int64_t D = a.head_dim, group = a.q_heads / a.kv_heads;
  float* qr = a.scratch;             // [group][D] rotated queries of this KV head's group
  float* kr = qr + group * D;        // [D] rotated key
  float* stats = kr + D;             // [group][2]: running max, running sum
  auto rotate = [&](const float* x, float* y, int64_t pos) {
    if (a.rope.rot_dim > 0)
      rope_rotate(x, y, a.rope.cos + pos * (a.rope.rot_dim / 2), a.rope.sin + pos * (a.rope.rot_dim / 2), a.rope.rot_dim, D,
                  a.rope.interleaved);
    else
      std::memcpy(y, x, static_cast<size_t>(D) * sizeof(float));
  };
  for (int64_t g = 0; g < a.kv_heads; ++g) {
    for (int64_t j = 0; j < group; ++j) {
      rotate(q + (g * group + j) * D, qr + j * D, a.query_pos);
      stats[2 * j] = -std::numeric_limits<float>::infinity();
      stats[2 * j + 1] = 0;
      std::memset(out + (g * group + j) * D, 0, static_cast<size_t>(D) * sizeof(float));
    }
    for (int64_t i = 0; i < a.n_keys; ++i) {
      const T* k = a.keys[i] + g * D;
      for (int64_t d = 0; d < D; ++d) kr[d] = static_cast<float>(k[d]);
      rotate(kr, kr, a.key_pos[i]);  // in place: each pair is read before it is written
      const T* v = a.values[i] + g * D;
      for (int64_t j = 0; j < group; ++j) {
        float s = 0;
        for (int64_t d = 0; d < D; ++d) s += qr[j * D + d] * kr[d];
        s *= a.scale;
        float& m = stats[2 * j];
        float& l = stats[2 * j + 1];
        float* o = out + (g * group + j) * D;
        if (s > m) {  // rescale what was accumulated under the old maximum
          const float c = std::exp(m - s);
          l *= c;
          for (int64_t d = 0; d < D; ++d) o[d] *= c;
          m = s;
        }
        const float p = std::exp(s - m);
        l += p;
        for (int64_t d = 0; d < D; ++d) o[d] += p * static_cast<float>(v[d]);
      }
    }
    for (int64_t j = 0; j < group; ++j) {
      const float l = stats[2 * j + 1];
      float* o = out + (g * group + j) * D;
      for (int64_t d = 0; d < D; ++d) o[d] = l > 0 ? o[d] / l : 0.0f;
    }
  }
}

template void ring_attention<float>(const float*, float*, const RingAttentionArgs<float>&);
template void ring_attention<f16>(const float*, float*, const RingAttentionArgs<f16>&);

}  // namespace tern::kernels
