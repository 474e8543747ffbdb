// Attention of new queries over keys/values held in window order, with RoPE applied at read time:
// keys are stored before RoPE, and key i of the window is rotated to position key_pos[i], the query to
// query_pos. Keys are taken in blocks (32, more in windows over 2,048 keys: at most 64 blocks); each
// (KV head, block) pair is one unit of work — keys converted and rotated once, shared by the query heads
// of the group — giving a partial softmax (its own maximum and sum) per query head; the partials are
// merged in block order, so threads split the units without changing a bit of the result. Dot
// products, rotations and value sums are SIMD (xsimd). No allocation: `scratch` holds
// ring_attention_scratch_floats(…) floats.
#pragma once
#include <cstdint>
#include <limits>

#include "core/dtype.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/rope.h"
#include "kernels/kv_storage.h"

namespace tern::kernels {

// T: how the cache stores keys and values (kv_storage.h: float, f16, KvBlockQ8_0 or KvBlockQ4_0), each
// block of keys converted in the kernel's scratch as it is read.
template <typename T>
struct RingAttentionArgs {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t n_keys = 0;
  const void* const* keys = nullptr;    // n_keys pointers to T, each row [kv_heads][head_dim], pre-RoPE
  const void* const* values = nullptr;  // n_keys pointers to T, each row [kv_heads][head_dim]
  const int64_t* key_pos = nullptr;     // RoPE position of each key
  const float* key_offset = nullptr;    // [kv_heads][head_dim]: a key as read is stored · key_scale + key_offset
  const float* key_scale = nullptr;     //   (KvRingBuffer::calibrate_keys; both or neither)
  // Keys and values from this index on are float rows held exact (a quantized KvRingBuffer's newest tokens): keys read
  // with neither offset nor scale, values in the form the kernel sums T's (to_summed_values in kv_quant.h).
  int64_t exact_from = std::numeric_limits<int64_t>::max();
  int64_t query_pos = 0;
  // Query rows, each over the keys up to its own (a speculative check's tokens after one another): row r of `rows`
  // reads the first n_keys − (rows − 1 − r) keys at position query_pos − (rows − 1 − r), as decode would have
  // attended it — the same bits — with each block's keys converted and rotated once for every row. The rows' key
  // counts share a block size (ring_attention_takes_rows).
  int64_t rows = 1;
  int64_t q_stride = 0;  // floats from one query row to the next (0: q_heads · head_dim)
  Scoring scoring;
  RopeTable rope;
  float* scratch = nullptr;
  int threads = 1;          // at most the count `scratch` was sized for
  Isa isa = default_isa();  // the tier to run at (Context::isa)
};

// Scratch `ring_attention` needs for up to `n_keys` keys, `rows` query rows and `threads` threads (grows with n_keys).
int64_t ring_attention_scratch_floats(int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t n_keys, int threads, int64_t rows = 1);
// Whether `rows` query rows over up to `n_keys` keys (RingAttentionArgs::rows) split the keys into blocks as each
// row alone would: the block grows with the keys past 2,048.
bool ring_attention_takes_rows(int64_t n_keys, int64_t rows);

// out[rows][q_heads][head_dim] = softmax(scoring(rope(q)·rope(k)ᵀ))·v for `rows` query tokens (q pre-RoPE, each row
// [q_heads][head_dim]).
template <typename T>
void ring_attention(const float* q, float* out, const RingAttentionArgs<T>& a);

}  // namespace tern::kernels
