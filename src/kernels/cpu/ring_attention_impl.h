// ring_attention.h's kernel at the vector width of the file that includes this: ring_attention.cpp (the
// build's baseline) and, in an x86-64-v2 build, x86/float_avx2/ring_attention.cpp (tier avx2). Everything here
// has internal linkage, so each file keeps its own copy built for its flags.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "kernels/cpu/kv_quant.h"
#include "kernels/cpu/lanes.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/ring_attention.h"
#include "kernels/cpu/vector_ops.h"

namespace tern::kernels {
namespace {

// Keys are scored in blocks, each with its own softmax maximum and sum (a partial result), merged at the
// end in block order. The blocks depend only on the number of keys, never on the thread count, so the
// result is the same bit for bit however many threads share the blocks. At most kMaxBlocks partials.
constexpr int64_t kMinBlock = 32, kMaxBlocks = 64;

int64_t block_keys(int64_t n_keys) {
  const int64_t per = (n_keys + kMaxBlocks - 1) / kMaxBlocks;
  return std::max(kMinBlock, (per + kMinBlock - 1) / kMinBlock * kMinBlock);
}

struct Layout {
  int64_t block, blocks, group, D;
  int64_t partial() const { return D + 2; }                             // one query head's partial: D sums, then max and sum
  int64_t per_thread() const { return 2 * block * D + group * block; }  // keys, values as float; scores
};

Layout layout(int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t n_keys) {
  const int64_t block = block_keys(n_keys);
  return {block, (n_keys + block - 1) / block, q_heads / kv_heads, head_dim};
}

// Scores of query `q` against `nb` keys (rows of `kb`, D apart), 8 keys at a time: eight independent
// accumulators keep the FMA pipes full where one dot product after another waits on its own sum.
void score_block(const float* q, const float* kb, int64_t nb, int64_t D, float* s) {
  int64_t i = 0;
  if (D % kLanes == 0)
    for (; i + kLanes <= nb; i += kLanes) {
      batch acc[kLanes];
      for (int64_t r = 0; r < kLanes; ++r) acc[r] = batch(0.0f);
      for (int64_t d = 0; d < D; d += kLanes) {
        const batch qd = batch::load_unaligned(q + d);
        for (int64_t r = 0; r < kLanes; ++r) acc[r] = xsimd::fma(qd, batch::load_unaligned(kb + (i + r) * D + d), acc[r]);
      }
      xsimd::haddp(acc).store_unaligned(s + i);
    }
  for (; i < nb; ++i) s[i] = dot(q, kb + i * D, D);
}

// out[0, D) = Σ_i p[i] · row(i) over `nb` value rows; 64 output floats stay in registers while the
// rows stream past.
template <class Row>
void weighted_sum(const float* p, Row row, int64_t nb, int64_t D, float* out) {
  constexpr int64_t kRegs = 8;
  int64_t d0 = 0;
  for (; d0 + kRegs * kLanes <= D; d0 += kRegs * kLanes) {
    batch acc[kRegs];
    for (int64_t c = 0; c < kRegs; ++c) acc[c] = batch(0.0f);
    for (int64_t i = 0; i < nb; ++i) {
      const batch pi(p[i]);
      const float* v = row(i) + d0;
      for (int64_t c = 0; c < kRegs; ++c) acc[c] = xsimd::fma(pi, batch::load_unaligned(v + c * kLanes), acc[c]);
    }
    for (int64_t c = 0; c < kRegs; ++c) acc[c].store_unaligned(out + d0 + c * kLanes);
  }
  std::fill(out + d0, out + D, 0.0f);
  for (int64_t i = 0; i < nb; ++i) axpy(p[i], row(i) + d0, out + d0, D - d0);
}

// The cache rows a few keys ahead are requested while these are used: in a real model the weights
// streamed between two layers' attention have evicted them.
constexpr int64_t kPrefetchKeys = 4;

template <typename T>
void prefetch_row(const T* row, int64_t D) {
  const char* c = reinterpret_cast<const char*>(row);
  for (int64_t b = 0; b < D / kKvUnitElements<T> * static_cast<int64_t>(sizeof(T)); b += 64) __builtin_prefetch(c + b);
}

// Head g of the i-th key or value row.
template <typename T>
const T* head_row(const void* const* rows, int64_t i, int64_t g, int64_t D) {
  return kv_head(static_cast<const T*>(rows[i]), g, D);
}

// The G query heads of KV head g (rotated queries `qr`) over `nb` keys of block blk, rotated in kb: each head's
// partial in `partials`; s holds G · block scores.
template <typename T, class Values>
void attend_heads(const float* qr, const RingAttentionArgs<T>& a, const Layout& L, int64_t g, int64_t blk, int64_t nb, const float* kb,
                  Values value_row, float* s, float* partials) {
  const int64_t D = L.D, G = L.group;
  for (int64_t j = 0; j < G; ++j) {
    float* sj = s + j * L.block;
    score_block(qr + (g * G + j) * D, kb, nb, D, sj);
    float m = -std::numeric_limits<float>::infinity();
    int64_t i = 0;
    if (a.scoring.softcap > 0) {
      for (; i < nb; ++i) m = std::max(m, sj[i] = a.scoring(sj[i]));
    } else {  // scale and maximum 8 scores at a time
      const batch scale(a.scoring.scale);
      batch mx(m);
      for (; i + kLanes <= nb; i += kLanes) {
        const batch v = batch::load_unaligned(sj + i) * scale;
        v.store_unaligned(sj + i);
        mx = xsimd::max(mx, v);
      }
      alignas(32) float lanes[kLanes];
      mx.store_aligned(lanes);
      for (float v : lanes) m = std::max(m, v);
      for (; i < nb; ++i) m = std::max(m, sj[i] *= a.scoring.scale);
    }
    const batch mb(m);
    batch lsum(0.0f);
    i = 0;
    for (; i + kLanes <= nb; i += kLanes) {
      const batch p = xsimd::exp(batch::load_unaligned(sj + i) - mb);
      p.store_unaligned(sj + i);
      lsum += p;
    }
    float l = xsimd::hadd(lsum);
    for (; i < nb; ++i) l += (sj[i] = std::exp(sj[i] - m));
    float* part = partials + ((blk * a.q_heads) + g * G + j) * L.partial();
    weighted_sum(sj, value_row, nb, D, part);
    part[D] = m;
    part[D + 1] = l;
  }
}

// One block of keys for the query heads of KV head g, for each query row that reads any of them: keys converted and
// rotated once, shared by the group and the rows. Writes each row's head's partial: unnormalized Σ p·v, the block's
// maximum, Σ p — row r's from the keys [i0, i0 + nb_r) it reads, as ring_attention of that row alone would.
template <typename T>
void attend_block(const float* qr, const RingAttentionArgs<T>& a, const Layout& L, int64_t g, int64_t blk, float* partials, float* sc) {
  const int64_t D = L.D, i0 = blk * L.block, nb = std::min(L.block, a.n_keys - i0);
  float* kb = sc;
  float* vb = kb + L.block * D;
  float* s = vb + L.block * D;
  for (int64_t i = 0; i < nb; ++i) {
    if (i + kPrefetchKeys < nb && i0 + i + kPrefetchKeys < a.exact_from) {
      prefetch_row(head_row<T>(a.keys, i0 + i + kPrefetchKeys, g, D), D);
      prefetch_row(head_row<T>(a.values, i0 + i + kPrefetchKeys, g, D), D);
    }
    if constexpr (std::is_same_v<T, float>) {
      rotate_head(head_row<T>(a.keys, i0 + i, g, D), kb + i * D, D, a.rope, a.key_pos[i0 + i]);
    } else if (i0 + i >= a.exact_from) {  // (its value is read where it is)
      rotate_head(head_row<float>(a.keys, i0 + i, g, D), kb + i * D, D, a.rope, a.key_pos[i0 + i]);
    } else {
      load_kv_row(head_row<T>(a.keys, i0 + i, g, D), kb + i * D, D);
      if (a.key_offset) scale_add(a.key_scale + g * D, a.key_offset + g * D, kb + i * D, D);
      rotate_head(kb + i * D, kb + i * D, D, a.rope, a.key_pos[i0 + i]);
      load_kv_values(head_row<T>(a.values, i0 + i, g, D), vb + i * D, D);
    }
  }
  // Float values are read where they are, exact ones too; others as converted above.
  auto value_row = [&](int64_t i) -> const float* {
    if constexpr (std::is_same_v<T, float>) return head_row<T>(a.values, i0 + i, g, D);
    else return i0 + i >= a.exact_from ? head_row<float>(a.values, i0 + i, g, D) : vb + i * D;
  };
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t n_keys = a.n_keys - (a.rows - 1 - r);
    if (n_keys > i0)
      attend_heads(qr + r * a.q_heads * D, a, L, g, blk, std::min(nb, n_keys - i0), kb, value_row, s,
                   partials + r * L.blocks * a.q_heads * L.partial());
  }
}

// out[h] = Σ_b e^(m_b − M) · o_b / Σ_b e^(m_b − M) · l_b over the blocks in order, M the largest m_b.
void merge_head(const float* partials, const Layout& L, int64_t q_heads, int64_t h, float* out) {
  const int64_t D = L.D, stride = q_heads * L.partial();
  const float* p = partials + h * L.partial();
  float M = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < L.blocks; ++b) M = std::max(M, p[b * stride + D]);
  std::fill(out, out + D, 0.0f);
  float l = 0;
  for (int64_t b = 0; b < L.blocks; ++b) {
    const float c = std::exp(p[b * stride + D] - M);
    l += c * p[b * stride + D + 1];
    axpy(c, p + b * stride, out, D);
  }
  scale_in_place(l > 0 ? 1.0f / l : 0.0f, out, D);
}

template <typename T>
void ring_attention_at_width(const float* q, float* out, const RingAttentionArgs<T>& a) {
  const Layout L = layout(a.q_heads, a.kv_heads, a.head_dim, a.n_keys);
  const int64_t D = a.head_dim;
  float* qr = a.scratch;                          // the queries, rotated
  float* partials = qr + a.rows * a.q_heads * D;  // [rows][blocks][q_heads][partial]
  float* per_thread = partials + a.rows * L.blocks * a.q_heads * L.partial();
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t h = 0; h < a.q_heads; ++h) {
      const int64_t at = (r * a.q_heads + h) * D;
      rotate_head(q + r * (a.q_stride ? a.q_stride : a.q_heads * D) + h * D, qr + at, D, a.rope, a.query_pos - (a.rows - 1 - r));
    }
  const int64_t units = a.kv_heads * L.blocks;
  // Short windows stay on one thread: a parallel region costs more than they do.
  const int threads = a.n_keys * a.q_heads * D < 32768 ? 1 : static_cast<int>(std::min<int64_t>(std::max(a.threads, 1), units));
  parallel_chunks(threads, units, threads > 1 ? balanced_chunks(threads, units) : 1, [&](int64_t u0, int64_t u1, int slot) {
    float* sc = per_thread + slot * L.per_thread();
    for (int64_t u = u0; u < u1; ++u) attend_block(qr, a, L, u % a.kv_heads, u / a.kv_heads, partials, sc);
  });
  const int64_t heads = a.rows * a.q_heads;
  parallel_chunks(threads, heads, threads > 1 ? balanced_chunks(threads, heads) : 1, [&](int64_t h0, int64_t h1, int) {
    for (int64_t rh = h0; rh < h1; ++rh) {
      const int64_t r = rh / a.q_heads, h = rh % a.q_heads;
      const Layout row = layout(a.q_heads, a.kv_heads, D, a.n_keys - (a.rows - 1 - r));  // (its own block count)
      merge_head(partials + r * L.blocks * a.q_heads * L.partial(), row, a.q_heads, h, out + rh * D);
      finish_kv_sum<T>(out + rh * D, D);
    }
  });
}

}  // namespace
}  // namespace tern::kernels
