#include "kernels/cpu/ring_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <xsimd/xsimd.hpp>

#include "kernels/cpu/rope.h"

namespace tern::kernels {
namespace {

using batch = xsimd::batch<float>;
constexpr int64_t kLanes = static_cast<int64_t>(batch::size);
constexpr int64_t kBlock = 64;  // keys scored together: one max/rescale per block instead of per key

float dot(const float* a, const float* b, int64_t n) {
  batch acc(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = xsimd::fma(batch::load_unaligned(a + i), batch::load_unaligned(b + i), acc);
  float s = xsimd::hadd(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += p · x
void axpy(float p, const float* x, float* y, int64_t n) {
  const batch pb(p);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) xsimd::fma(pb, batch::load_unaligned(x + i), batch::load_unaligned(y + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] += p * x[i];
}

void scale_in_place(float c, float* y, int64_t n) {
  const batch cb(c);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) (batch::load_unaligned(y + i) * cb).store_unaligned(y + i);
  for (; i < n; ++i) y[i] *= c;
}

}  // namespace

// Half-split pairs vectorized; interleaved pairs scalar.
void rotate_head(float* x, int64_t D, const RopeTable& r, int64_t pos) {
  if (r.rot_dim <= 0) return;
  const int64_t half = r.rot_dim / 2;
  const float* c = r.cos + pos * half;
  const float* s = r.sin + pos * half;
  if (r.interleaved) {
    rope_rotate(x, x, c, s, r.rot_dim, D, true);
    return;
  }
  int64_t i = 0;
  for (; i + kLanes <= half; i += kLanes) {
    const batch x1 = batch::load_unaligned(x + i), x2 = batch::load_unaligned(x + half + i);
    const batch cb = batch::load_unaligned(c + i), sb = batch::load_unaligned(s + i);
    xsimd::fms(x1, cb, x2 * sb).store_unaligned(x + i);
    xsimd::fma(x1, sb, x2 * cb).store_unaligned(x + half + i);
  }
  for (; i < half; ++i) {
    const float x1 = x[i], x2 = x[half + i];
    x[i] = x1 * c[i] - x2 * s[i];
    x[half + i] = x1 * s[i] + x2 * c[i];
  }
}

namespace {

template <typename T>
void load_row(const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

int64_t per_thread_floats(int64_t group, int64_t D) {
  return group * D           // rotated queries of the group
         + kBlock * D        // the block's keys, converted and rotated
         + group * kBlock    // scores, then probabilities
         + D                 // one value row as float
         + 2 * group;        // running max and sum per query head
}

template <typename T>
void attend_kv_head(const float* q, float* out, const RingAttentionArgs<T>& a, int64_t g, float* sc) {
  const int64_t D = a.head_dim, G = a.q_heads / a.kv_heads;
  float* qr = sc;
  float* kb = qr + G * D;
  float* s = kb + kBlock * D;
  float* vrow = s + G * kBlock;
  float* m = vrow + D;
  float* l = m + G;
  for (int64_t j = 0; j < G; ++j) {
    std::memcpy(qr + j * D, q + (g * G + j) * D, static_cast<size_t>(D) * sizeof(float));
    rotate_head(qr + j * D, D, a.rope, a.query_pos);
    m[j] = -std::numeric_limits<float>::infinity();
    l[j] = 0;
    std::memset(out + (g * G + j) * D, 0, static_cast<size_t>(D) * sizeof(float));
  }
  for (int64_t i0 = 0; i0 < a.n_keys; i0 += kBlock) {
    const int64_t nb = std::min(kBlock, a.n_keys - i0);
    for (int64_t i = 0; i < nb; ++i) {
      load_row(a.keys[i0 + i] + g * D, kb + i * D, D);
      rotate_head(kb + i * D, D, a.rope, a.key_pos[i0 + i]);
    }
    for (int64_t j = 0; j < G; ++j) {
      float* sj = s + j * kBlock;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < nb; ++i) {
        sj[i] = a.scoring(dot(qr + j * D, kb + i * D, D));
        block_max = std::max(block_max, sj[i]);
      }
      if (block_max > m[j]) {  // rescale what was accumulated under the old maximum
        const float c = std::exp(m[j] - block_max);
        l[j] *= c;
        scale_in_place(c, out + (g * G + j) * D, D);
        m[j] = block_max;
      }
      for (int64_t i = 0; i < nb; ++i) {
        sj[i] = std::exp(sj[i] - m[j]);
        l[j] += sj[i];
      }
    }
    for (int64_t i = 0; i < nb; ++i) {  // each value row converted once, added into every head of the group
      const T* v = a.values[i0 + i] + g * D;
      const float* vf = vrow;
      if constexpr (std::is_same_v<T, float>) vf = v;
      else load_row(v, vrow, D);
      for (int64_t j = 0; j < G; ++j) axpy(s[j * kBlock + i], vf, out + (g * G + j) * D, D);
    }
  }
  for (int64_t j = 0; j < G; ++j) scale_in_place(l[j] > 0 ? 1.0f / l[j] : 0.0f, out + (g * G + j) * D, D);
}

}  // namespace

int64_t ring_attention_scratch_floats(int64_t q_heads, int64_t kv_heads, int64_t head_dim, int threads) {
  return per_thread_floats(q_heads / kv_heads, head_dim) * std::max(threads, 1);
}

template <typename T>
void ring_attention(const float* q, float* out, const RingAttentionArgs<T>& a) {
  const int64_t per = per_thread_floats(a.q_heads / a.kv_heads, a.head_dim);
  // Short windows stay on one thread: a parallel region costs more than they do.
  const int threads = a.n_keys * a.q_heads * a.head_dim < 32768 ? 1 : std::max(a.threads, 1);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t g = 0; g < a.kv_heads; ++g) attend_kv_head(q, out, a, g, a.scratch + omp_get_thread_num() * per);
}

template void ring_attention<float>(const float*, float*, const RingAttentionArgs<float>&);
template void ring_attention<f16>(const float*, float*, const RingAttentionArgs<f16>&);

}  // namespace tern::kernels
