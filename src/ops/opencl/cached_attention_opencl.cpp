// CachedAttention on an OpenCL device: one float32 sequence, the ring in device memory with the CPU
// ring's semantics (slot rule: kernels/ring_slots.h). Same order as the CPU path: a chunk at once while
// the window has room, token by token once it slides.
#include "ops/cached_attention.h"
#include "ops/opencl/device_io.h"
#include "ops/register_all.h"

namespace tern {
namespace {

// The sequence's ring on the device ([slots][kv_heads][D] keys and values, as the storage type), the
// tokens appended so far and the scores scratch. (A sequence the device does not take runs on the CPU
// ring of the base state.)
struct DeviceRingState : KvRingState {
  Tensor keys, values, scores;
  int64_t seen = 0, slots = 0, window = 0;
  std::vector<int64_t> held_tokens() const override {
    return seen > 0 ? std::vector<int64_t>{std::min(window, seen)} : KvRingState::held_tokens();
  }
  void clear_row(int64_t row) override {  // the device holds one sequence: row 0
    if (row == 0) seen = 0;
    KvRingState::clear_row(row);
  }
  void keep_prefix(int64_t row, int64_t n) override {
    if (row == 0 && seen > 0) {
      if (n > seen || seen > window) fail("the device ring cannot keep ", n, " of its ", seen, " tokens (window ", window, ")");
      seen = n;
      return;
    }
    KvRingState::keep_prefix(row, n);
  }
};

class CachedAttentionOpenCl : public OpenClVariant {
 public:
  explicit CachedAttentionOpenCl(const Node& n)
      : OpenClVariant(n), op_(static_cast<const CachedAttentionOp&>(*cpu_)), a_(op_.attributes()) {}
  std::vector<int> pack(const std::vector<const Tensor*>& constants, const PackSettings& options) override {
    auto freed = OpenClVariant::pack(constants, options);
    const auto& t = op_.packed_tables();
    if (t.cos.defined()) cos_ = upload_constant(options, &t.cos), sin_ = upload_constant(options, &t.sin);
    return freed;
  }
  std::unique_ptr<OpState> make_state() const override {
    auto s = std::make_unique<DeviceRingState>();
    s->window = a_.ring_capacity;
    return s;
  }

 protected:
  bool device_takes(const std::vector<const Tensor*>& in) const override {
    // decoder.cl scores without soft-capping, always rotates, with the tables uploaded at pack, and keeps fp32 or
    // fp16 rings (a q8_0 / q4_0 one stays on the CPU).
    if (a_.softcap != 0 || (a_.storage != kernels::KvStorage::F32 && a_.storage != kernels::KvStorage::F16) ||
        !in[CachedAttentionOp::kCos] || !cos_.device.defined() || in[CachedAttentionOp::kCos]->raw() != op_.packed_from())
      return false;
    for (size_t i : {CachedAttentionOp::kQ, CachedAttentionOp::kK, CachedAttentionOp::kV})
      if (in[i] && in[i]->dtype() != DType::Float32) return false;
    return in[CachedAttentionOp::kQ]->dim(0) == 1 && !cl::on_device(*in[CachedAttentionOp::kMask]);
  }
  void run_device(RunContext& ctx) const override {
    auto& st = *static_cast<DeviceRingState*>(ctx.state);
    if (st.total_rows > 1)
      fail_unsupported(ctx.node.describe(), ": continuous batching of several sequences on the OpenCL device (serve with --parallel 1)");
    const bool packed = op_.packed(ctx);
    const Tensor& q = ctx.in(CachedAttentionOp::kQ);
    const Tensor& mask = ctx.in(CachedAttentionOp::kMask);
    const int64_t S = q.dim(1), D = op_.head_dim(q, packed), total = mask.dim(1), hq = a_.q_heads, hkv = a_.kv_heads;
    for (int64_t s = 0; s < S; ++s)
      if (mask.at_i64(total - S + s) == 0) fail_unsupported(ctx.node.describe(), ": padding tokens on the OpenCL device");
    const int64_t rot = op_.check_tables(ctx, op_.packed_tables(), D);
    auto& c = ctx.opencl->context();
    const int64_t kv_floats = hkv * D, elem = a_.storage == kernels::KvStorage::F16 ? 2 : 4;
    const int64_t W = a_.ring_capacity, sinks = std::min(a_.sinks, W - 1);
    // Slots grow as the CPU ring's (kernels/ring_slots.h).
    const int64_t need = std::min(W, st.seen + S);
    if (st.slots < need) {
      const int64_t slots = kernels::ring_slots_for(st.slots, need, W);
      for (Tensor* t : {&st.keys, &st.values}) {
        Tensor grown = cl::device_tensor(c, DType::UInt8, {slots * kv_floats * elem});
        if (t->defined()) c.copy(cl::mem_of(*t), cl::mem_of(grown), static_cast<size_t>(st.slots * kv_floats * elem));
        *t = grown;
      }
      st.slots = slots;
    }
    Tensor qd, kd, vd;
    const cl_mem qm = device_input(ctx, 0, qd), km = packed ? qm : device_input(ctx, 1, kd), vm = packed ? qm : device_input(ctx, 2, vd);
    const int q_row = static_cast<int>(q.dim(2)), k_row = static_cast<int>(packed ? q.dim(2) : kv_floats);
    const int k_at = static_cast<int>(packed ? hq * D : 0), v_at = static_cast<int>(packed ? (hq + hkv) * D : 0);
    const kernels::opencl::DeviceRope rope{cos_.mem(), sin_.mem(), static_cast<int>(rot), a_.interleaved};
    const bool half = a_.storage == kernels::KvStorage::F16;
    const cl_mem keys = cl::mem_of(st.keys), values = cl::mem_of(st.values), out = device_output(ctx, 0);
    const int64_t held_after = std::min(W, st.seen + S);
    if (!st.scores.defined() || st.scores.numel() < S * hq * held_after)
      st.scores = cl::device_tensor(c, DType::Float32, {S * hq * held_after});
    // A chunk attends at once while the window has room for all of it; else token by token.
    const int64_t step = st.seen + S <= W ? S : 1;
    for (int64_t s = 0; s < S; s += step) {
      ctx.opencl->ring_write(km, static_cast<int>(k_at + s * k_row), k_row, vm, static_cast<int>(v_at + s * k_row), k_row,
                             static_cast<int>(step), static_cast<int>(st.seen), static_cast<int>(W), static_cast<int>(sinks),
                             static_cast<int>(kv_floats), half, keys, values);
      st.seen += step;
      const int64_t held = std::min(W, st.seen);
      ctx.opencl->ring_attend(qm, static_cast<int>(s * q_row), q_row, static_cast<int>(step), static_cast<int>(hq), static_cast<int>(hkv),
                              static_cast<int>(D), static_cast<int>(held), static_cast<int>(st.seen), static_cast<int>(W),
                              static_cast<int>(sinks), half, keys, values, rope, op_.scale(D), cl::mem_of(st.scores), out,
                              static_cast<int>(s * hq * D), static_cast<int>(hq * D));
    }
  }

 private:
  const CachedAttentionOp& op_;
  const CachedAttentionOp::Attributes a_;
  DeviceCopy cos_, sin_;  // the RoPE tables (as float32) on the device
};

}  // namespace

void register_cached_attention_opencl(OpRegistry& r) {
  r.add_variant(DeviceKind::OpenCL, "tern", "CachedAttention", factory<CachedAttentionOpenCl>());
}

}  // namespace tern
