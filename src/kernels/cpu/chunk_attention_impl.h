// chunk_attention.h's kernel at the vector width of the file that includes this: chunk_attention.cpp (the
// build's baseline) and, in an x86-64-v2 build, x86/float_avx2/chunk_attention.cpp (tier avx2). Everything here
// has internal linkage, so each file keeps its own copy built for its flags.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <xsimd/xsimd.hpp>

#include "kernels/cpu/chunk_attention.h"
#include "kernels/cpu/lanes.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_ops.h"

namespace tern::kernels {
namespace {

constexpr int64_t kVecs = kChunkKeyBlock / kLanes;  // vectors a key block
static_assert(kChunkKeyBlock % kLanes == 0, "a key block is whole vectors");
constexpr int kRows = 4;  // query rows a pass: 4 × 2 score accumulators (AVX2), 4 × 2 output ones

static_assert(kChunkKeyBlock == 16, "kKeyIndex lists a block's key indices");
alignas(64) constexpr float kKeyIndex[kChunkKeyBlock] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

float largest(batch v) {
  alignas(64) float lanes[kLanes];
  v.store_aligned(lanes);
  return *std::max_element(lanes, lanes + kLanes);
}

struct Rows {
  const float* q[kRows];
  int64_t last[kRows];  // the last key the row sees
  float* out[kRows];
};

// s[i][j] = q_i · key j of the block at kt (one lane a key, summed over d from 0 up), for the N rows.
template <int N>
void score_block(const Rows& r, const float* kt, int64_t D, float (*s)[kChunkKeyBlock]) {
  batch acc[N][kVecs];
  for (auto& row : acc)
    for (auto& v : row) v = batch(0.0f);
  for (int64_t d = 0; d < D; ++d) {
    const float* k = kt + d * kChunkKeyBlock;
    batch kv[kVecs];
    for (int64_t v = 0; v < kVecs; ++v) kv[v] = batch::load_unaligned(k + v * kLanes);
    for (int i = 0; i < N; ++i) {
      const batch qd(r.q[i][d]);
      for (int64_t v = 0; v < kVecs; ++v) acc[i][v] = xsimd::fma(qd, kv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < N; ++i)
    for (int64_t v = 0; v < kVecs; ++v) acc[i][v].store_unaligned(s[i] + v * kLanes);
}

// out_i += Σ_j p[i][j] · value row j (D floats apart) over the block's `keys` keys: each output element one
// fma chain in key order.
template <int N>
void add_values(const Rows& r, const float (*p)[kChunkKeyBlock], const float* values, int64_t D, int64_t keys) {
  int64_t d = 0;
  for (; d + 2 * kLanes <= D; d += 2 * kLanes) {
    batch acc[N][2];
    for (int i = 0; i < N; ++i)
      for (int c = 0; c < 2; ++c) acc[i][c] = batch::load_unaligned(r.out[i] + d + c * kLanes);
    for (int64_t j = 0; j < keys; ++j) {
      const float* v = values + j * D + d;
      const batch v0 = batch::load_unaligned(v), v1 = batch::load_unaligned(v + kLanes);
      for (int i = 0; i < N; ++i) {
        const batch pj(p[i][j]);
        acc[i][0] = xsimd::fma(pj, v0, acc[i][0]);
        acc[i][1] = xsimd::fma(pj, v1, acc[i][1]);
      }
    }
    for (int i = 0; i < N; ++i)
      for (int c = 0; c < 2; ++c) acc[i][c].store_unaligned(r.out[i] + d + c * kLanes);
  }
  for (; d < D; ++d)
    for (int i = 0; i < N; ++i) {
      float o = r.out[i][d];
      for (int64_t j = 0; j < keys; ++j) o = std::fma(p[i][j], values[j * D + d], o);
      r.out[i][d] = o;
    }
}

// The N rows (of KV head g) over their keys, block by block: scores, the running maximum m and sum l of
// each row (earlier blocks' output and sum rescaled by e^(m_old − m_new) when the maximum grows), values.
template <int N>
void attend_rows(const ChunkAttentionArgs& a, int64_t g, const Rows& r) {
  const int64_t D = a.head_dim, last = r.last[N - 1];  // rows come in position order
  float m[N], l[N];
  for (int i = 0; i < N; ++i) {
    m[i] = -std::numeric_limits<float>::infinity();
    l[i] = 0;
    std::fill(r.out[i], r.out[i] + D, 0.0f);
  }
  alignas(64) float s[N][kChunkKeyBlock];
  for (int64_t j0 = 0; j0 <= last; j0 += kChunkKeyBlock) {
    score_block<N>(r, a.keys_t + chunk_key_at(g, j0, 0, D, a.key_blocks), D, s);
    for (int i = 0; i < N; ++i) {
      const int64_t valid = std::clamp<int64_t>(r.last[i] - j0 + 1, 0, kChunkKeyBlock);
      float* si = s[i];
      if (valid == 0) {  // the row sees none of these keys
        std::fill(si, si + kChunkKeyBlock, 0.0f);
        continue;
      }
      if (a.scoring.softcap > 0)
        for (int64_t j = 0; j < valid; ++j) si[j] = a.scoring(si[j]);
      const batch scale(a.scoring.softcap > 0 ? 1.0f : a.scoring.scale), seen(static_cast<float>(valid));
      const batch hidden(-std::numeric_limits<float>::infinity());  // keys the row does not see (p = 0)
      batch v_s[kVecs], top(m[i]);
      for (int64_t v = 0; v < kVecs; ++v) {
        v_s[v] = xsimd::select(batch::load_aligned(kKeyIndex + v * kLanes) < seen, batch::load_aligned(si + v * kLanes) * scale, hidden);
        top = xsimd::max(top, v_s[v]);
      }
      const float m_new = largest(top);
      batch sum(0.0f);
      for (int64_t v = 0; v < kVecs; ++v) {
        const batch p = xsimd::exp(v_s[v] - batch(m_new));
        p.store_aligned(si + v * kLanes);
        sum += p;
      }
      const float c = std::exp(m[i] - m_new);  // 0 on the first block; 1 when the maximum held
      if (c != 1.0f) scale_in_place(c, r.out[i], D);
      l[i] = l[i] * c + xsimd::hadd(sum);
      m[i] = m_new;
    }
    add_values<N>(r, s, a.values + (g * (a.first + a.count) + j0) * D, D, std::min(kChunkKeyBlock, last - j0 + 1));
  }
  for (int i = 0; i < N; ++i) scale_in_place(l[i] > 0 ? 1.0f / l[i] : 0.0f, r.out[i], D);
}

void chunk_attention_at_width(const ChunkAttentionArgs& a) {
  const int64_t D = a.head_dim, G = a.q_heads / a.kv_heads, rows = a.count * G, sets = (rows + kRows - 1) / kRows;
  const int64_t units = a.kv_heads * sets;
  // Later queries see more keys: small chunks, taken in turn, keep the threads even. Each row is computed
  // whole by one unit, so the split changes no bit. A KV head's units come one after another, so its keys
  // and values stay in the core's L2 (a 2,048-token prompt: 205 → 151 ms against heads interleaved).
  parallel_chunks(a.threads, units, (units + 3) / 4, [&](int64_t u0, int64_t u1, int slot) {
    float* rotated = a.scratch + slot * kRows * D;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t g = u / sets, set = u % sets, n = std::min<int64_t>(kRows, rows - set * kRows);
      Rows r{};
      for (int64_t i = 0; i < n; ++i) {
        const int64_t row = set * kRows + i, t = row / G, h = g * G + row % G;
        float* q = rotated + i * D;
        rotate_head(a.q + t * a.q_stride + h * D, q, D, a.rope, a.first + t);
        r.q[i] = q;
        r.last[i] = a.first + t;
        r.out[i] = a.out + t * a.out_stride + h * D;
      }
      switch (n) {
        case 1: attend_rows<1>(a, g, r); break;
        case 2: attend_rows<2>(a, g, r); break;
        case 3: attend_rows<3>(a, g, r); break;
        default: attend_rows<4>(a, g, r); break;
      }
    }
  });
}

}  // namespace
}  // namespace tern::kernels
