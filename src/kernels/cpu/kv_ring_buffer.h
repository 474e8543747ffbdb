// KvRingBuffer: the key/value cache of one layer for a batch of sequences, with a fixed capacity W
// (allocated as it fills, in doublings, then never again). Keys are stored before RoPE, so a token's rotation is decided when it is read:
// positions are re-based to the window (0 … held−1), which lets generation slide past the context the
// model's RoPE tables cover. The first S slots can be attention sinks (kept forever, StreamingLLM); the
// other W − S slots hold the most recent tokens and wrap around. Appending writes one slot and copies
// nothing else.
#pragma once
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/context.h"
#include "kernels/cpu/ring_attention.h"
#include "kernels/kv_storage.h"
#include "kernels/ring_slots.h"

namespace tern::kernels {

// An allocator that leaves new elements uninitialized: the ring's slots are allocated ahead of use (256 at
// first) and a zeroed vector touched every page of them. Left alone, a page is first touched when a token is
// written there: a 128-token 1B-shape prefill took ~8,000 page faults fewer (16 layers × 1 MiB of keys
// and values, half of it used).
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T>
using RingStorage = std::vector<T, UninitializedAllocator<T>>;

struct KvRingConfig {
  int64_t batch = 1, kv_heads = 1, head_dim = 64;
  int64_t capacity = 2048;             // W: slots per sequence
  int64_t sinks = 0;                   // S: leading slots never evicted (0 ≤ S < W)
  KvStorage storage = KvStorage::F32;  // fp16, q8_0, q4_0: 0.5x, 0.27x, 0.14x the memory and bandwidth (kv_storage.h)
};

class KvRingBuffer {
 public:
  explicit KvRingBuffer(KvRingConfig c);
  ~KvRingBuffer();
  KvRingBuffer(const KvRingBuffer&) = delete;
  KvRingBuffer& operator=(const KvRingBuffer&) = delete;
  // A q8_0 or q4_0 ring also keeps each sequence's newest tokens exact, as float beside their blocks, and attention
  // reads them so: the tokens from the second-newest whole group of kExactGroup on (kExactGroup + 1 to 2·kExactGroup
  // of them, the line moving a group at a time, so that a speculative check's rows read alike). The newest keys are
  // the ones a query looks at most, in sliding-window layers above all, and a 4-bit block's error there costs the
  // most. `tern eval MODEL --text /tmp/kjv48k.txt --context 2048 --second-half --kv-dtype T` (each position attended
  // as decode does), against the fp32 ring (Gemma-3-270M 11.842, SmolLM2-135M 27.3948): q4_0 all as stored 12.7901
  // (+8.0%) / 28.247 (+3.1%), with the newest exact 11.891 (+0.41%) / 27.7336 (+1.24%); q8_0 11.9016 (+0.50%) /
  // 27.4122 → 11.8683 (+0.22%) / 27.4356 (+0.15%). Decode speed unchanged (Gemma-3 q4_0 ring at 1,024 tokens, 3
  // alternated runs: 118.5 / 133.3 / 133.9 → 124.2 / 136.4 / 133.4 tok/s). An fp32 ring simulating q4_0 kept the
  // newest 4, 8, 32, 128 tokens exact (not grouped; eval's earlier runs of 256): 12.147, 12.079, 12.156, 12.039
  // against 12.489 none — most of it in the last few. The copies hold the newest kExactTokens, so a roll back of up
  // to kExactRollback tokens (a speculative step's drafts) still finds them; after a longer one (keep_prefix of a
  // reused prompt) the tokens whose copies are gone read as stored. Their memory is fixed: 2 · kExactTokens tokens of
  // floats a sequence and layer.
  static constexpr int64_t kExactGroup = 32, kExactRollback = 16, kExactTokens = 2 * kExactGroup + kExactRollback;
  static bool keeps_exact(KvStorage s) { return s == KvStorage::Q8_0 || s == KvStorage::Q4_0; }

  // Bytes of keys and values allocated now (they grow with the ring; counted as owned host memory), with a q4_0
  // or q8_0 ring's exact copies.
  int64_t storage_bytes() const { return static_cast<int64_t>(counted_); }
  // Bytes of keys and values (and exact copies) a ring of config `c` has allocated once `tokens` tokens a row are
  // appended: its growths (ring_slots_for: 256 slots, then doubling) up to that fill, capped by its window. An upper
  // bound where a prompt chunk grows it straight to its length.
  static int64_t bytes_for(const KvRingConfig& c, int64_t tokens);
  const KvRingConfig& config() const { return c_; }

  // Appends one token of sequence b: key (before RoPE) and value, each [kv_heads][head_dim].
  void append(int64_t b, const float* key, const float* value);
  // A q4_0 ring stores sequence b's keys less an offset, the per-channel mean of the `n` keys given here (rows
  // `stride` floats apart: its first run's), and adds it back as it reads them; until set, zero. Pre-RoPE keys
  // share a large mean (a few channels of the same sign in every token), which would otherwise take most of each
  // block's 16 steps from what tells keys apart. `tern eval MODEL --context 2048 --second-half --kv-dtype q4_0` on
  // 48,000 characters of models/default/validation.txt, with the mean of the first run's 256 keys: SmolLM2-135M
  // 28.653 → 28.215 (fp32 27.399: +4.6% → +3.0%), Gemma-3-270M 13.799 → 13.017 (fp32 11.814: +16.8% → +10.2%).
  // (q8_0's 256 steps have room: SmolLM2 27.406 without, 27.422 with, so it keeps none.)
  // Given the same run's queries too (`q_heads` heads a row, rows `q_stride` floats apart; `interleaved`: RoPE pairs
  // (2i, 2i + 1), else (i, i + head_dim/2)), a KV head's key channels are also stored divided by a scale s and
  // multiplied back as read: s² ∝ the channel's key RMS over its query RMS (a RoPE pair shares theirs; the group's
  // query heads pooled), where that is predicted to at least halve a logit's error (kv_ring_buffer.cpp). A logit's
  // error is Σ q·e over the channels while a block's steps follow its keys' magnitude; these scales put the finer
  // steps where the queries look (SmoothQuant's balance, the query in the weight's place). `tern eval MODEL --text
  // /tmp/kjv48k.txt --context 2048 --second-half --kv-dtype q4_0`, against the fp32 ring (11.8317, 27.372):
  // Gemma-3-270M 12.886 → 12.511 (+8.9% → +5.7%), SmolLM2-135M 27.979 → 27.940 (+2.2% → +2.1%); s ∝ (RMS ratio)^¼
  // or ^1 measured worse on both, and per channel without its RoPE pair Gemma-3 17.48. Only while b holds no token
  // (its stored keys keep theirs); other rings ignore it.
  void calibrate_keys(int64_t b, const float* keys, int64_t n, int64_t stride, const float* queries = nullptr, int64_t q_stride = 0,
                      int64_t q_heads = 0, bool interleaved = false);
  // [kv_heads][head_dim]: a stored key is read back as stored · key_scale + key_offset; nullptr but in a q4_0 ring.
  const float* key_offset(int64_t b) const;
  const float* key_scale(int64_t b) const;
  int64_t seen(int64_t b) const { return seen_[static_cast<size_t>(b)]; }  // tokens ever appended
  int64_t held(int64_t b) const;                                           // tokens in the window
  void clear();
  void clear_row(int64_t b);                // sequence b starts again; the others keep their tokens
  void copy_row(int64_t from, int64_t to);  // sequence `to` becomes a copy of `from` (a shared prompt)
  // Sequence b keeps its first n tokens, as if the others had never been appended (a prompt that begins with
  // them reuses their keys and values). Needs a window that has not slid: n ≤ seen(b) ≤ capacity.
  void keep_prefix(int64_t b, int64_t n);

  // Slot of the i-th held token in window order: sinks first, then oldest to newest.
  int64_t slot(int64_t b, int64_t i) const;
  // Element d of the key / value held in `slot` (as stored: rounded to fp16, or quantized, with that storage; a
  // quantized ring's newest are read exact besides, from exact_from(b) on).
  float key(int64_t b, int64_t slot, int64_t d) const;
  float value(int64_t b, int64_t slot, int64_t d) const;
  // The first window index attention reads exact (held(b) where none is: fp32 and fp16 rings).
  int64_t exact_from(int64_t b) const;
  // Whether attend_rows may take the `count` tokens about to be appended to b: their key counts split into blocks
  // alike (ring_attention_takes_rows) and each reads the same tokens exact. (The window must not slide during them.)
  bool takes_rows(int64_t b, int64_t count) const;

  // Attention of one new query token of sequence b (q pre-RoPE, [q_heads][head_dim]) over every held
  // token, the query at window position held(b) − 1 (append its key first). Allocates nothing once the
  // workspace holds scratch for the ring's slots.
  void attend(const Context& cx, int64_t b, const float* q, int64_t q_heads, const Scoring& scoring, const RopeTable& rope, float* out);
  // The same for each of the last `count` appended tokens (queries `q_stride` floats apart; outputs
  // [count][q_heads][head_dim]), each as attend gave it right after its own append — the same bits — with the keys
  // converted and rotated once for all (a speculative step's check). Needs a window that has not slid during them,
  // and rows that read alike (takes_rows).
  void attend_rows(const Context& cx, int64_t b, const float* q, int64_t q_stride, int64_t count, int64_t q_heads, const Scoring& scoring,
                   const RopeTable& rope, float* out);
  // The same for each of the last `count` appended tokens (a prompt chunk; queries `q_stride` floats
  // apart, outputs `out_stride` apart), each over the window as it stood after its own append: keys
  // are rotated once for the chunk rather than once per query — and a quantized ring's newest tokens read exact as of
  // the chunk's end (exact_from), for every query of it. Needs a window that has not slid during the chunk
  // (seen(b) ≤ capacity).
  void attend_chunk(const Context& cx, int64_t b, const float* q, int64_t q_stride, int64_t count, int64_t q_heads, const Scoring& scoring,
                    const RopeTable& rope, float* out, int64_t out_stride);

 private:
  template <typename T>
  void attend_chunk_as(const Context& cx, int64_t b, const float* q, int64_t q_stride, int64_t count, int64_t q_heads,
                       const Scoring& scoring, const RopeTable& rope, float* out, int64_t out_stride);
  template <typename T>
  void attend_as(const Context& cx, int64_t b, const float* q, int64_t q_stride, int64_t count, int64_t q_heads, const Scoring& scoring,
                 const RopeTable& rope, float* out);
  // Calls f(T{}) with the storage's element or block type.
  template <typename F>
  void with_storage_type(F&& f) const;
  size_t at(int64_t b, int64_t slot) const { return static_cast<size_t>((b * slots_ + slot) * token_bytes_); }  // a token's bytes
  void grow(int64_t slots);
  // The first token read exact once sequence b has appended `seen` (seen itself where none is).
  int64_t exact_token(int64_t b, int64_t seen) const;
  // Whether `count` rows read alike once sequence b has appended `seen` tokens and holds `held`.
  bool rows_alike(int64_t b, int64_t seen, int64_t held, int64_t count) const;
  size_t exact_at(int64_t b, int64_t token) const {  // a token's exact copy in exact_keys_ / exact_values_
    return static_cast<size_t>((b * kExactTokens + token % kExactTokens) * token_floats_);
  }

  KvRingConfig c_;
  int64_t token_floats_;      // kv_heads · head_dim
  int64_t token_bytes_;       // the same as stored
  int64_t slots_ = 0;         // slots allocated per sequence (≤ capacity)
  size_t counted_ = 0;        // keys + values bytes, as counted by take_host_bytes…
  MemoryAccountPtr account_;  // …against the process and this account (the session's that grew it)
  // [batch][slots_][kv_heads][head_dim] in the storage type.
  RingStorage<uint8_t> keys_, values_;
  std::vector<int64_t> seen_;
  std::vector<float> key_offset_, key_scale_;  // [batch][kv_heads][head_dim], q4_0 only (calibrate_keys)
  std::vector<float> offset_key_;              // append's scratch: a key less its offset
  // q8_0 and q4_0: [batch][kExactTokens][kv_heads][head_dim], token t at t % kExactTokens, values as the kernels
  // sum them (to_summed_values: q4_0's H·v / 32); per sequence, the oldest token whose copy outlived a keep_prefix.
  std::vector<float> exact_keys_, exact_values_;
  std::vector<int64_t> exact_lo_;
  // Per-call views, sized once to the capacity so attend() allocates nothing.
  std::vector<const void*> key_ptrs_, value_ptrs_;
  std::vector<int64_t> positions_;
};

}  // namespace tern::kernels
