// CachedAttention (domain "tern"): one decoder layer's attention over a KV ring, made by the
// fuse_cached_attention pass (passes/attention/attention.h lists the patterns). Inputs: q, k (before RoPE,
// [B, S, H·D]), v, cos_cache, sin_cache ([positions, rotary_dim/2]), attention_mask [B, total]; k and v
// omitted: q packs Q, K and V as [B, S, (Hq + 2·Hkv)·D] (GroupQueryAttention's packed form). Each new
// token of row b is appended to the ring (padding tokens are skipped) and its query attends over the
// window, keys rotated to their window positions: causal within the step. Output [B, S, Hq·D]; padding
// rows are zero. Attribute softcap > 0: scores are soft-capped (Gemma-2). cos/sin omitted: no RoPE
// (GPT-2's learned positions are in the hidden state already).
//
// The ring is the node's sequence state (KvRingState), owned by the session; the op itself is fixed
// after pack. ops/opencl/cached_attention_opencl.cpp is its OpenCL variant.
#pragma once
#include <memory>

#include "kernels/cpu/kv_ring_buffer.h"
#include "ops/op.h"
#include "ops/weight_packer.h"

namespace tern {

// The layer's cache for the batch of sequences the session runs: made at the first run (which fixes
// the batch and head size), dropped with the state.
struct KvRingState : OpState {
  std::unique_ptr<kernels::KvRingBuffer> ring;
  // Tokens each row holds (the window it attends over); empty before the first run.
  virtual std::vector<int64_t> held_tokens() const;
  int64_t bytes_per_token() const override;
  int64_t held_bytes() const override { return ring ? ring->storage_bytes() : 0; }
  void clear_row(int64_t row) override {
    if (ring) ring->clear_row(row);
  }
  void copy_row(int64_t from, int64_t to) override {
    if (ring) ring->copy_row(from, to);
  }
  void keep_prefix(int64_t row, int64_t n) override {
    if (ring) ring->keep_prefix(row, n);
  }
};

// The RoPE tables as float32 (undefined without RoPE).
struct RopeTables {
  Tensor cos, sin;
};
// The constant tables converted once at load (a view for float32 models), and the cos table they came from.
struct PackedRopeTables {
  RopeTables tables;
  const void* from = nullptr;
};

class CachedAttentionOp : public Op, public PacksWeights<PackedRopeTables>, public StatefulOp, public CostedOp {
 public:
  enum Input : int { kQ, kK, kV, kCos, kSin, kMask };  // (the order above; fuse_cached_attention writes it)
  explicit CachedAttentionOp(const Node& n);
  OpTraits traits() const override { return {.foldable = false}; }
  std::vector<int> prepare(const std::vector<const Tensor*>& constants, const PackTarget& options, PackedRopeTables& into) const override;
  int64_t packed_bytes() const override { return 0; }  // (the tables are read a row at a time)
  std::unique_ptr<OpState> make_state() const override { return std::make_unique<KvRingState>(); }
  int64_t state_bytes(int64_t rows, int64_t positions, const std::vector<const Value*>& inputs) const override;
  // Each new token scores and sums over the window it sees (about half the prompt on average, in a
  // prompt chunk), reading every held key and value once.
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState* state) const override;
  std::string kernel(const std::vector<const Tensor*>& in, kernels::Isa isa) const override;
  void infer(InferContext& ctx) const override;
  void run(RunContext& ctx) const override;

  // What its OpenCL variant shares.
  using Tables = RopeTables;
  // This run's RoPE tables as float32: the packed ones when the inputs are the constants, else made
  // in `scratch` (a reference, not a copy: a decode step allocates nothing).
  const Tables& tables(const RunContext& ctx, Tables& scratch) const;
  // The rotary dim, after checking the tables cover it and the window (0: no RoPE).
  int64_t check_tables(const RunContext& ctx, const Tables& t, int64_t D) const;
  bool packed(const RunContext& ctx) const { return !ctx.has(kK); }
  int64_t head_dim(const Tensor& q, bool packed) const { return q.dim(2) / (packed ? hq_ + 2 * hkv_ : hq_); }
  float scale(int64_t D) const;
  const Tables& packed_tables() const { return prepared().tables; }
  const void* packed_from() const { return prepared().from; }
  struct Attributes {
    int64_t q_heads, kv_heads, ring_capacity, sinks;
    bool interleaved;
    float softcap;
    kernels::KvStorage storage;
  };
  Attributes attributes() const { return {hq_, hkv_, ring_capacity_, sinks_, interleaved_, softcap_, storage_}; }

 private:
  int64_t hq_, hkv_, ring_capacity_, sinks_;
  bool interleaved_;
  int64_t rot_dim_;
  bool has_scale_;
  float scale_;
  float softcap_;
  kernels::KvStorage storage_;
};

}  // namespace tern
