// CachedAttention (domain "tern"): one decoder layer's attention bound to a KvRingBuffer the op owns,
// made by the fuse_cached_attention pass (passes/fusions.h lists the patterns). Inputs: q, k (before
// RoPE, [B, S, H·D]), v, cos_cache, sin_cache ([positions, rotary_dim/2]), attention_mask [B, total];
// k and v omitted: q packs Q, K and V as [B, S, (Hq + 2·Hkv)·D] (GroupQueryAttention's packed form). Each new token of row b is appended to the ring (padding tokens are skipped) and its
// query attends over the window, keys rotated to their window positions: causal within the step.
// Output [B, S, Hq·D]; padding rows are zero. Attribute softcap > 0: scores are soft-capped (Gemma-2).
// cos/sin omitted: no RoPE (GPT-2's learned positions are in the hidden state already).
#include <cmath>
#include <cstring>
#include <memory>

#include "kernels/cpu/kv_ring_buffer.h"
#include "kernels/opencl/kernels.h"
#include "ops/op.h"
#include "ops/register_all.h"
#include "kernels/opencl/device.h"

namespace tern {
namespace {

class CachedAttentionOp : public Op {
 public:
  explicit CachedAttentionOp(const Node& n)
      : hq_(n.attr_int("q_num_heads", 0)), hkv_(n.attr_int("kv_num_heads", 0)), window_(n.attr_int("window", 0)),
        sinks_(n.attr_int("sinks", 0)), interleaved_(n.attr_int("interleaved", 0) != 0),
        rot_dim_(n.attr_int("rotary_embedding_dim", 0)), has_scale_(n.has_attr("scale")), scale_(n.attr_float("scale", 1)),
        softcap_(n.attr_float("softcap", 0)), storage_(static_cast<DType>(n.attr_int("storage", static_cast<int64_t>(DType::Float32)))) {
    if (hq_ <= 0 || hkv_ <= 0 || hq_ % hkv_ != 0 || window_ <= 0)
      fail(n.describe(), ": needs q_num_heads, kv_num_heads (dividing it) and a window");
  }
  bool foldable() const override { return false; }
  void reset() override {
    ring_.reset();
    device_seen_ = 0;
  }
  // On OpenCL: one float32 sequence; the ring lives in device memory with the CPU ring's semantics.
  bool runs_on(const Device& d, const std::vector<const Tensor*>& in) const override {
    if (d.kind == DeviceKind::CPU) return true;
    if (softcap_ != 0 || !in[3]) return false;  // decoder.cl scores without soft-capping, and always rotates
    for (int i : {0, 1, 2})
      if (in[static_cast<size_t>(i)] && in[static_cast<size_t>(i)]->dtype() != DType::Float32) return false;
    return in[0]->dim(0) == 1 && !cl::on_device(*in[5]);
  }
  // Attention reads every held key and value once per token; the append writes one slot.
  // Each new token scores and sums over the window it sees (about half the prompt on average, in a
  // prompt chunk); reads every held key and value once per token.
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out) const override {
    const bool packed = in.size() < 2 || !in[1];
    const int64_t S = in[0]->dim(1), D = in[0]->dim(2) / (packed ? hq_ + 2 * hkv_ : hq_);
    const double elem = static_cast<double>(dtype_size(storage_));
    double flops = 0, bytes = static_cast<double>(in[0]->nbytes() + out[0].nbytes());
    auto add = [&](int64_t held_tokens) {
      const double seen_by_new = std::max(static_cast<double>(held_tokens) - static_cast<double>(S - 1) / 2.0, 1.0);
      flops += 4.0 * static_cast<double>(S) * seen_by_new * static_cast<double>(hq_ * D);
      bytes += static_cast<double>(S) * seen_by_new * 2.0 * static_cast<double>(hkv_ * D) * elem;
    };
    if (ring_)
      for (int64_t b = 0; b < ring_->config().batch; ++b) add(ring_->held(b));
    else if (device_seen_ > 0)  // the ring on the OpenCL device (one sequence)
      add(std::min(window_, device_seen_));
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
    if (ctx.device.kind == DeviceKind::OpenCL) return run_opencl(ctx);
    const bool packed = !ctx.has(1);
    Tensor q_scratch, k_scratch, v_scratch;  // float32 copies, only for float16 models
    const Tensor& q = as_dtype(ctx.in(0), DType::Float32, q_scratch);
    const Tensor& k = packed ? q : as_dtype(ctx.in(1), DType::Float32, k_scratch);
    const Tensor& v = packed ? q : as_dtype(ctx.in(2), DType::Float32, v_scratch);
    make_tables(ctx);
    const Tensor& cos = cos_;
    const Tensor& sin = sin_;
    const Tensor& mask = ctx.in(5);
    const int64_t B = q.dim(0), S = q.dim(1), D = q.dim(2) / (packed ? hq_ + 2 * hkv_ : hq_), total = mask.dim(1);
    // Row strides and where K and V start inside a row: packed rows are [Q | K | V].
    const int64_t q_row = q.dim(2), k_row = packed ? q_row : hkv_ * D, k_at = packed ? hq_ * D : 0;
    const int64_t v_at = packed ? (hq_ + hkv_) * D : 0;
    if (!ring_ || ring_->config().batch != B) {
      const int64_t sinks = std::min(sinks_, window_ - 1);
      ring_ = std::make_unique<kernels::KvRingBuffer>(kernels::KvRingConfig{B, hkv_, D, window_, sinks, storage_});
    }
    const int64_t rot = check_tables(ctx, D);
    kernels::RopeTable rope{rot ? cos.data<float>() : nullptr, rot ? sin.data<float>() : nullptr, rot, interleaved_};
    const kernels::Scoring scoring{has_scale_ ? scale_ : 1.0f / std::sqrt(static_cast<float>(D)), softcap_};
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
        if (!chunk) ring_->attend(b, q.data<float>() + (b * S + s) * q_row, hq_, scoring, rope, out);
      }
      if (chunk)
        ring_->attend_chunk(b, q.data<float>() + (b * S + first) * q_row, q_row, S - first, hq_, scoring, rope,
                            yf.data<float>() + (b * S + first) * hq_ * D, hq_ * D);
    }
    if (yf.raw() != y.raw()) convert_tensor(yf, y);
  }

 private:
  // The RoPE tables as float32, made once (a no-copy view for float32 models).
  void make_tables(const RunContext& ctx) const {
    if (!ctx.has(3) || cos_src_ == ctx.in(3).raw()) return;
    cos_ = cast_to(ctx.in(3), DType::Float32);
    sin_ = cast_to(ctx.in(4), DType::Float32);
    cos_src_ = ctx.in(3).raw();
  }
  // The rotary dim, after checking the tables cover it and the window.
  int64_t check_tables(const RunContext& ctx, int64_t D) const {
    if (!ctx.has(3)) return 0;  // no RoPE
    const int64_t rot = rot_dim_ ? rot_dim_ : D;
    if (cos_.dim(1) * 2 != rot) fail(ctx.node.describe(), ": cos_cache has ", cos_.dim(1), " columns for rotary dim ", rot);
    if (cos_.dim(0) < window_)
      fail(ctx.node.describe(), ": the window (", window_, ") exceeds the ", cos_.dim(0), " positions the RoPE tables cover");
    return rot;
  }
  // One sequence on the device: append the step's tokens to the device ring, attend. Same order as the
  // CPU path: a chunk at once while the window has room, token by token once it slides.
  void run_opencl(RunContext& ctx) const {
    const bool packed = !ctx.has(1);
    const Tensor& q = ctx.in(0);
    const Tensor& mask = ctx.in(5);
    const int64_t S = q.dim(1), D = q.dim(2) / (packed ? hq_ + 2 * hkv_ : hq_), total = mask.dim(1);
    for (int64_t s = 0; s < S; ++s)
      if (mask.at_i64(total - S + s) == 0) fail_unsupported(ctx.node.describe(), ": padding tokens on the OpenCL device");
    make_tables(ctx);
    const int64_t rot = check_tables(ctx, D);
    auto& c = ctx.opencl->context();
    const int64_t kv_floats = hkv_ * D, elem = storage_ == DType::Float16 ? 2 : 4;
    const int64_t W = window_, sinks = std::min(sinks_, window_ - 1);
    // Slots grow as the CPU ring's (kernels/ring_slots.h).
    const int64_t need = std::min(W, device_seen_ + S);
    if (device_slots_ < need) {
      const int64_t slots = kernels::ring_slots_for(device_slots_, need, W);
      for (Tensor* t : {&device_keys_, &device_values_}) {
        Tensor grown = cl::device_tensor(c, DType::UInt8, {slots * kv_floats * elem});
        if (t->defined()) c.copy(cl::mem_of(*t), cl::mem_of(grown), static_cast<size_t>(device_slots_ * kv_floats * elem));
        *t = grown;
      }
      device_slots_ = slots;
    }
    Tensor qd, kd, vd;
    const cl_mem qm = device_input(ctx, 0, qd), km = packed ? qm : device_input(ctx, 1, kd), vm = packed ? qm : device_input(ctx, 2, vd);
    const int q_row = static_cast<int>(q.dim(2)), k_row = static_cast<int>(packed ? q.dim(2) : kv_floats);
    const int k_at = static_cast<int>(packed ? hq_ * D : 0), v_at = static_cast<int>(packed ? (hq_ + hkv_) * D : 0);
    const kernels::opencl::DeviceRope rope{cos_dev_.get(ctx, cos_), sin_dev_.get(ctx, sin_), static_cast<int>(rot), interleaved_};
    const float scale = has_scale_ ? scale_ : 1.0f / std::sqrt(static_cast<float>(D));
    const bool half = storage_ == DType::Float16;
    const cl_mem keys = cl::mem_of(device_keys_), values = cl::mem_of(device_values_), out = device_output(ctx, 0);
    const int64_t held_after = std::min(W, device_seen_ + S);
    if (!scores_.defined() || scores_.numel() < S * hq_ * held_after)
      scores_ = cl::device_tensor(c, DType::Float32, {S * hq_ * held_after});
    // A chunk attends at once while the window has room for all of it; else token by token.
    const int64_t step = device_seen_ + S <= W ? S : 1;
    for (int64_t s = 0; s < S; s += step) {
      ctx.opencl->ring_write(km, static_cast<int>(k_at + s * k_row), k_row, vm, static_cast<int>(v_at + s * k_row), k_row,
                             static_cast<int>(step), static_cast<int>(device_seen_), static_cast<int>(W), static_cast<int>(sinks),
                             static_cast<int>(kv_floats), half, keys, values);
      device_seen_ += step;
      const int64_t held = std::min(W, device_seen_);
      ctx.opencl->ring_attend(qm, static_cast<int>(s * q_row), q_row, static_cast<int>(step), static_cast<int>(hq_),
                              static_cast<int>(hkv_), static_cast<int>(D), static_cast<int>(held), static_cast<int>(device_seen_),
                              static_cast<int>(W), static_cast<int>(sinks), half, keys, values, rope, scale, cl::mem_of(scores_),
                              out, static_cast<int>(s * hq_ * D), static_cast<int>(hq_ * D));
    }
  }

  int64_t hq_, hkv_, window_, sinks_;
  bool interleaved_;
  int64_t rot_dim_;
  bool has_scale_;
  float scale_;
  float softcap_;
  DType storage_;
  mutable std::unique_ptr<kernels::KvRingBuffer> ring_;  // the layer's cache: state of a session, not of a call
  mutable Tensor cos_, sin_;                         // the RoPE tables as float32
  mutable const void* cos_src_ = nullptr;            // the table they were made from
  // OpenCL: the ring in device memory ([slots][kv_heads][D] keys and values, as storage_), tokens
  // appended so far, the RoPE tables and the scores scratch.
  mutable Tensor device_keys_, device_values_, scores_;
  mutable int64_t device_seen_ = 0, device_slots_ = 0;
  mutable DeviceConstant cos_dev_, sin_dev_;
};

}  // namespace

void register_cached_attention(OpRegistry& r) { r.add("tern", "CachedAttention", factory<CachedAttentionOp>()); }

}  // namespace tern
