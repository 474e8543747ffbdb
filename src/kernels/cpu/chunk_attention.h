// Causal attention of a prompt chunk (prefill) over keys already rotated: query t sees the keys up to its
// own position. The query rows of one KV head's group are taken four at a time against blocks of 16 keys
// stored transposed ([head_dim][16], one block after another), so a block's 4×16 scores are one
// register-tiled product rather than 64 dot products; each row keeps a running maximum and sum (online
// softmax) and its output accumulates block by block. A row is computed whole by one thread: the result
// does not depend on the thread count. Against one query at a time through ring_attention (Llama-3.2-1B
// heads: 32 query, 8 KV, 64 wide; 2 threads, Xeon tier amx, medians of 21): 128 tokens 2.36 → 0.82–0.98 ms,
// 512 35.6 → 12.3 ms, 2,048 552 → 149 ms.
#pragma once
#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/ring_attention.h"

namespace tern::kernels {

constexpr int64_t kChunkKeyBlock = 16;

// Blocks of `chunk_attention`'s transposed keys for n keys.
inline int64_t chunk_key_blocks(int64_t n) { return (n + kChunkKeyBlock - 1) / kChunkKeyBlock; }
// Where key i's element d of KV head g goes in them.
inline int64_t chunk_key_at(int64_t g, int64_t i, int64_t d, int64_t head_dim, int64_t key_blocks) {
  return ((g * key_blocks + i / kChunkKeyBlock) * head_dim + d) * kChunkKeyBlock + i % kChunkKeyBlock;
}

struct ChunkAttentionArgs {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t count = 0;         // query tokens
  int64_t first = 0;         // key index of the first query's own key: query t sees keys [0, first + t]
  const float* q = nullptr;  // query t's head h at q + t·q_stride + h·head_dim, before RoPE
  int64_t q_stride = 0;
  RopeTable rope;                 // query t is rotated to position first + t
  const float* keys_t = nullptr;  // [kv_heads][key_blocks][head_dim][16] (chunk_key_at), rotated; padding finite
  int64_t key_blocks = 0;         // chunk_key_blocks(first + count)
  const float* values = nullptr;  // [kv_heads][first + count][head_dim]
  Scoring scoring;
  float* out = nullptr;  // query t's head h at out + t·out_stride + h·head_dim
  int64_t out_stride = 0;
  float* scratch = nullptr;  // chunk_attention_scratch_floats(head_dim) for each of `threads`
  int threads = 1;
  Isa isa = default_isa();  // the tier to run at (Context::isa)
};

int64_t chunk_attention_scratch_floats(int64_t head_dim);

void chunk_attention(const ChunkAttentionArgs& a);

}  // namespace tern::kernels
