// CachedAttention (domain "tern"): one decoder layer's attention bound to a KvRingBuffer the op owns,
// made by the fuse_cached_attention pass (graph/fusions.h lists the patterns). Inputs: q, k (before
// RoPE, [B, S, H·D]), v, cos_cache, sin_cache ([positions, rotary_dim/2]), attention_mask [B, total];
// k and v omitted: q packs Q, K and V as [B, S, (Hq + 2·Hkv)·D] (GroupQueryAttention's packed form). Each new token of row b is appended to the ring (padding tokens are skipped) and its
// query attends over the window, keys rotated to their window positions: causal within the step.
// Output [B, S, Hq·D]; padding rows are zero.
#include <cmath>
#include <cstring>
#include <memory>

#include "llm/kv_ring_buffer.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class CachedAttentionOp : public Op {
 public:
  explicit CachedAttentionOp(const Node& n)
      : hq_(n.attr_int("q_num_heads", 0)), hkv_(n.attr_int("kv_num_heads", 0)), window_(n.attr_int("window", 0)),
        sinks_(n.attr_int("sinks", 0)), interleaved_(n.attr_int("interleaved", 0) != 0),
        rot_dim_(n.attr_int("rotary_embedding_dim", 0)), has_scale_(n.has_attr("scale")), scale_(n.attr_float("scale", 1)),
        storage_(static_cast<DType>(n.attr_int("storage", static_cast<int64_t>(DType::Float32)))) {
    if (hq_ <= 0 || hkv_ <= 0 || hq_ % hkv_ != 0 || window_ <= 0)
      fail(n.describe(), ": needs q_num_heads, kv_num_heads (dividing it) and a window");
  }
  bool foldable() const override { return false; }
  void reset() override { ring_.reset(); }
  // Attention reads every held key and value once per token; the append writes one slot.
  // Each new token scores and sums over the window it sees (about half the prompt on average, in a
  // prompt chunk); reads every held key and value once per token.
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out) const override {
    if (!ring_) return {};
    const auto& c = ring_->config();
    double flops = 0, bytes = static_cast<double>(in[0]->nbytes() + out[0].nbytes());
    const int64_t S = in[0]->dim(1);
    for (int64_t b = 0; b < c.batch; ++b) {
      const double held = static_cast<double>(ring_->held(b)), seen_by_new = held - static_cast<double>(S - 1) / 2.0;
      flops += 4.0 * static_cast<double>(S) * std::max(seen_by_new, 1.0) * static_cast<double>(hq_ * c.head_dim);
      bytes += static_cast<double>(S) * std::max(seen_by_new, 1.0) * 2.0 * static_cast<double>(c.kv_heads * c.head_dim) *
               static_cast<double>(dtype_size(c.storage));
    }
    return {flops, bytes};
  }
  std::string kernel(const std::vector<const Tensor*>& in) const override {
    return in[0]->dim(1) > 1 ? "ring attend_chunk" : "ring attend";  // (a chunk the window slides in goes token by token)
  }
  int64_t state_bytes_per_token() const override {
    if (!ring_) return 0;
    const auto& c = ring_->config();
    int64_t held = 0;
    for (int64_t b = 0; b < c.batch; ++b) held += ring_->held(b);
    return (held + c.batch) * 2 * c.kv_heads * c.head_dim * static_cast<int64_t>(dtype_size(c.storage));
  }

  void infer(InferContext& ctx) const override {
    SymShape s = ctx.shape(0);
    if (s.size() != 3) ctx.fail("q must be [batch, sequence, hidden], got ", sym_shape_str(s));
    if (!ctx.has(1) && s[2].is_known()) s[2] = Dim::known(s[2].value / (hq_ + 2 * hkv_) * hq_);
    ctx.set(0, ctx.dtype(0), s);
  }

  void run(RunContext& ctx) const override {
    const bool packed = !ctx.has(1);
    Tensor q_scratch, k_scratch, v_scratch;  // float32 copies, only for float16 models
    const Tensor& q = as_dtype(ctx.in(0), DType::Float32, q_scratch);
    const Tensor& k = packed ? q : as_dtype(ctx.in(1), DType::Float32, k_scratch);
    const Tensor& v = packed ? q : as_dtype(ctx.in(2), DType::Float32, v_scratch);
    if (cos_src_ != ctx.in(3).raw()) {  // float32 tables, made once (a no-copy view for float32 models)
      cos_ = cast_to(ctx.in(3), DType::Float32);
      sin_ = cast_to(ctx.in(4), DType::Float32);
      cos_src_ = ctx.in(3).raw();
    }
    const Tensor& cos = cos_;
    const Tensor& sin = sin_;
    const Tensor& mask = ctx.in(5);
    const int64_t B = q.dim(0), S = q.dim(1), D = q.dim(2) / (packed ? hq_ + 2 * hkv_ : hq_), total = mask.dim(1);
    // Row strides and where K and V start inside a row: packed rows are [Q | K | V].
    const int64_t q_row = q.dim(2), k_row = packed ? q_row : hkv_ * D, k_at = packed ? hq_ * D : 0;
    const int64_t v_at = packed ? (hq_ + hkv_) * D : 0;
    if (!ring_ || ring_->config().batch != B) {
      const int64_t sinks = std::min(sinks_, window_ - 1);
      ring_ = std::make_unique<llm::KvRingBuffer>(llm::KvRingConfig{B, hkv_, D, window_, sinks, storage_});
    }
    const int64_t rot = rot_dim_ ? rot_dim_ : D;
    if (cos.dim(1) * 2 != rot) fail(ctx.node.describe(), ": cos_cache has ", cos.dim(1), " columns for rotary dim ", rot);
    if (cos.dim(0) < window_)
      fail(ctx.node.describe(), ": the window (", window_, ") exceeds the ", cos.dim(0), " positions the RoPE tables cover");
    kernels::RopeTable rope{cos.data<float>(), sin.data<float>(), rot, interleaved_};
    const float scale = has_scale_ ? scale_ : 1.0f / std::sqrt(static_cast<float>(D));
    Tensor& y = ctx.out(0);
    Tensor y_scratch;
    Tensor& yf = y.dtype() == DType::Float32 ? y : (y_scratch = Tensor(DType::Float32, y.shape()));
    for (int64_t b = 0; b < B; ++b) {
      // Real tokens after any left padding: a prompt chunk attends in one call (keys rotated once)
      // unless the window slides during it.
      int64_t first = 0;
      while (first < S && mask.at_i64(b * total + total - S + first) == 0) ++first;
      bool contiguous = true;
      for (int64_t s = first; s < S; ++s) contiguous &= mask.at_i64(b * total + total - S + s) != 0;
      const bool chunk = contiguous && S - first > 1 && ring_->seen(b) + (S - first) <= window_;
      for (int64_t s = 0; s < S; ++s) {
        float* out = yf.data<float>() + (b * S + s) * hq_ * D;
        if (mask.at_i64(b * total + total - S + s) == 0) {  // padding: not cached, no output
          std::memset(out, 0, static_cast<size_t>(hq_ * D) * sizeof(float));
          continue;
        }
        ring_->append(b, k.data<float>() + (b * S + s) * k_row + k_at, v.data<float>() + (b * S + s) * k_row + v_at);
        if (!chunk) ring_->attend(b, q.data<float>() + (b * S + s) * q_row, hq_, scale, rope, out);
      }
      if (chunk)
        ring_->attend_chunk(b, q.data<float>() + (b * S + first) * q_row, q_row, S - first, hq_, scale, rope,
                            yf.data<float>() + (b * S + first) * hq_ * D, hq_ * D);
    }
    if (yf.raw() != y.raw()) convert_tensor(yf, y);
  }

 private:
  int64_t hq_, hkv_, window_, sinks_;
  bool interleaved_;
  int64_t rot_dim_;
  bool has_scale_;
  float scale_;
  DType storage_;
  mutable std::unique_ptr<llm::KvRingBuffer> ring_;  // the layer's cache: state of a session, not of a call
  mutable Tensor cos_, sin_;                         // the RoPE tables as float32
  mutable const void* cos_src_ = nullptr;            // the table they were made from
};

}  // namespace

void register_cached_attention(OpRegistry& r) { r.add("tern", "CachedAttention", factory<CachedAttentionOp>()); }

}  // namespace tern
