#include "ops/cached_attention.h"

#include "kernels/cpu/gemv.h"

#include <cmath>
#include <cstring>

#include "ops/register_all.h"

namespace tern {

std::vector<int64_t> KvRingState::held_tokens() const {
  std::vector<int64_t> held;
  for (int64_t b = 0; ring && b < ring->config().batch; ++b) held.push_back(ring->held(b));
  return held;
}

int64_t KvRingState::bytes_per_token() const {
  if (!ring) return 0;
  const auto& c = ring->config();
  int64_t held = 0;
  for (int64_t h : held_tokens()) held += h;
  return (held + c.batch) * 2 * c.kv_heads * kernels::kv_storage_bytes(c.storage, c.head_dim);
}

namespace {
kernels::KvStorage storage_of(const Node& n) {
  const std::string name = n.attr_string("storage", "fp32");
  const auto s = kernels::kv_storage_named(name);
  if (!s) fail(n.describe(), ": storage '", name, "' is none of ", kernels::kv_storage_names());
  return *s;
}
}  // namespace

CachedAttentionOp::CachedAttentionOp(const Node& n)
    : hq_(n.attr_int("q_num_heads", 0)),
      hkv_(n.attr_int("kv_num_heads", 0)),
      ring_capacity_(n.attr_int("ring_capacity", 0)),
      sinks_(n.attr_int("sinks", 0)),
      interleaved_(n.attr_int("interleaved", 0) != 0),
      rot_dim_(n.attr_int("rotary_embedding_dim", 0)),
      has_scale_(n.has_attr("scale")),
      scale_(n.attr_float("scale", 1)),
      softcap_(n.attr_float("softcap", 0)),
      storage_(storage_of(n)) {
  if (hq_ <= 0 || hkv_ <= 0 || hq_ % hkv_ != 0 || ring_capacity_ <= 0)
    fail(n.describe(), ": needs q_num_heads, kv_num_heads (dividing it) and a ring_capacity");
}

std::vector<int> CachedAttentionOp::prepare(const std::vector<const Tensor*>& constants, const PackTarget& options,
                                            PackedRopeTables& into) const {
  if (constants.size() > kSin && constants[kCos] && constants[kSin]) {
    // (A float32 table is read where it lies — cast_to's view — so only another type's conversion is kept.)
    const auto float32 = [&](const Tensor& t) {
      return t.dtype() == DType::Float32 && is_aligned(t)
                 ? t
                 : options.kept(DType::Float32, t.shape(), [&] { return cast_to(t, DType::Float32); });
    };
    into.tables = {float32(*constants[kCos]), float32(*constants[kSin])};
    into.from = constants[kCos]->raw();
  }
  return {};
}

int64_t CachedAttentionOp::state_bytes(int64_t rows, int64_t positions, const std::vector<const Value*>& inputs) const {
  const Value* q = inputs.empty() ? nullptr : inputs[kQ];
  if (!q || !q->shape || q->shape->size() != 3 || !(*q->shape)[2].is_known()) return 0;
  const bool packed = inputs.size() <= kK || !inputs[kK];
  const int64_t D = (*q->shape)[2].value / (packed ? hq_ + 2 * hkv_ : hq_);
  return kernels::KvRingBuffer::bytes_for({rows, hkv_, D, ring_capacity_, std::min(sinks_, ring_capacity_ - 1), storage_}, positions);
}

OpCost CachedAttentionOp::cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState* state) const {
  const bool packed = in.size() <= kK || !in[kK];
  const int64_t S = in[kQ]->dim(1), D = head_dim(*in[kQ], packed);
  const double elem = static_cast<double>(kernels::kv_storage_bytes(storage_, D)) / static_cast<double>(D);
  double flops = 0, bytes = static_cast<double>(in[kQ]->nbytes() + out[0].nbytes());
  if (state)
    for (int64_t held : static_cast<const KvRingState*>(state)->held_tokens()) {
      const double seen_by_new = std::max(static_cast<double>(held) - static_cast<double>(S - 1) / 2.0, 1.0);
      flops += 4.0 * static_cast<double>(S) * seen_by_new * static_cast<double>(hq_ * D);
      bytes += static_cast<double>(S) * seen_by_new * 2.0 * static_cast<double>(hkv_ * D) * elem;
    }
  return {flops, bytes};
}

std::string CachedAttentionOp::kernel(const std::vector<const Tensor*>& in, kernels::Isa) const {
  return in[kQ]->dim(1) > 1 ? "ring attend_chunk" : "ring attend";  // (a chunk the window slides in goes token by token)
}

void CachedAttentionOp::infer(InferContext& ctx) const {
  SymShape s = ctx.shape(0);
  if (s.size() != 3) ctx.fail("q must be [batch, sequence, hidden], got ", sym_shape_str(s));
  if (!ctx.has(kK) && s[2].is_known()) s[2] = Dim::known(s[2].value / (hq_ + 2 * hkv_) * hq_);
  ctx.set(0, ctx.dtype(kQ), s);
}

const CachedAttentionOp::Tables& CachedAttentionOp::tables(const RunContext& ctx, Tables& scratch) const {
  if (ctx.has(kCos) && ctx.in(kCos).raw() == prepared().from) return prepared().tables;
  if (ctx.has(kCos)) scratch = {cast_to(ctx.in(kCos), DType::Float32), cast_to(ctx.in(kSin), DType::Float32)};
  return scratch;
}

int64_t CachedAttentionOp::check_tables(const RunContext& ctx, const Tables& t, int64_t D) const {
  if (!t.cos.defined()) return 0;
  const int64_t rot = rot_dim_ ? rot_dim_ : D;
  if (t.cos.dim(1) * 2 != rot) fail(ctx.node.describe(), ": cos_cache has ", t.cos.dim(1), " columns for rotary dim ", rot);
  if (t.cos.dim(0) < ring_capacity_)
    fail(ctx.node.describe(), ": the ring capacity (", ring_capacity_, ") exceeds the ", t.cos.dim(0), " positions the RoPE tables cover");
  return rot;
}

float CachedAttentionOp::scale(int64_t D) const { return has_scale_ ? scale_ : 1.0f / std::sqrt(static_cast<float>(D)); }

void CachedAttentionOp::run(RunContext& ctx) const {
  const bool packed = this->packed(ctx);
  Tensor q_scratch, k_scratch, v_scratch;  // float32 copies, only for float16 models
  const Tensor& q = as_dtype(ctx.in(kQ), DType::Float32, q_scratch);
  const Tensor& k = packed ? q : as_dtype(ctx.in(kK), DType::Float32, k_scratch);
  const Tensor& v = packed ? q : as_dtype(ctx.in(kV), DType::Float32, v_scratch);
  Tables scratch;
  const Tables& t = tables(ctx, scratch);
  const Tensor& mask = ctx.in(kMask);
  const int64_t B = q.dim(0), S = q.dim(1), D = head_dim(q, packed), total = mask.dim(1);
  // Row strides and where K and V start inside a row: packed rows are [Q | K | V].
  const int64_t q_row = q.dim(2), k_row = packed ? q_row : hkv_ * D, k_at = packed ? hq_ * D : 0;
  const int64_t v_at = packed ? (hq_ + hkv_) * D : 0;
  auto& state = *static_cast<KvRingState*>(ctx.state);
  auto& ring = state.ring;
  const std::vector<int64_t>& rows = state.batch_rows;  // batch index → ring row (continuous batching)
  if (!rows.empty() && static_cast<int64_t>(rows.size()) != B)
    fail(ctx.node.describe(), ": the run feeds ", B, " sequences but ", rows.size(), " ring rows were named");
  const int64_t R = rows.empty() ? B : state.total_rows;
  if (!ring || ring->config().batch != R) {
    const int64_t sinks = std::min(sinks_, ring_capacity_ - 1);
    ring = std::make_unique<kernels::KvRingBuffer>(kernels::KvRingConfig{R, hkv_, D, ring_capacity_, sinks, storage_});
  }
  const int64_t rot = check_tables(ctx, t, D);
  kernels::RopeTable rope{rot ? t.cos.data<float>() : nullptr, rot ? t.sin.data<float>() : nullptr, rot, interleaved_};
  const kernels::Scoring scoring{scale(D), softcap_};
  Tensor& y = ctx.out(0);
  Tensor y_scratch;
  Tensor& yf = y.dtype() == DType::Float32 ? y : (y_scratch = Tensor(DType::Float32, y.shape()));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t rb = rows.empty() ? b : rows[static_cast<size_t>(b)];
    // Real tokens after any left padding: a prompt chunk attends in one call (keys rotated once)
    // unless the window slides during it. A run of as few tokens as a decode batch's GEMV rows (a speculative
    // step's check) attends as decode does, each token over the keys up to its own (attend_rows: keys rotated once
    // for the rows, then token by token where the window slides): attend_chunk rounds differently (1e-6), which int8
    // activations downstream can turn into a whole code step (SmolLM2 Q4_1, `tern generate --prefill-chunk 1`
    // against 2: the first logit 17.490 against 17.336), and verification must give decode's logits bit for bit.
    // Keys rotated once a check, not once a token: SmolLM2-135M Q4_1, `bench/speculation.sh
    // models/smollm2-135m-instruct bench/prompts/copy.txt 200 2 7 ngram`, Zen 5, 2 threads: 1.40x → 1.81x plain
    // decode (rope_rotate's perf samples over the 200 tokens 536 → 276; plain decode's 600).
    int64_t first = 0;
    while (first < S && mask.at_i64(b * total + total - S + first) == 0) ++first;
    bool contiguous = true;
    for (int64_t s = first; s < S; ++s) contiguous &= mask.at_i64(b * total + total - S + s) != 0;
    const int64_t n = S - first;  // (the window must not slide during them for either path)
    const bool unslid = contiguous && ring->seen(rb) + n <= ring_capacity_;
    const bool chunk = unslid && n > kernels::kGemvMaxRows;
    const bool rows = unslid && !chunk && n > 1 && ring->takes_rows(rb, n);
    // A q4_0 ring keeps a sequence's keys less the mean of its first run's, each channel scaled by its first run's keys
    // and queries (KvRingBuffer::calibrate_keys).
    if (ring->seen(rb) == 0 && first < S)
      ring->calibrate_keys(rb, k.data<float>() + (b * S + first) * k_row + k_at, S - first, k_row,
                           q.data<float>() + (b * S + first) * q_row, q_row, hq_, interleaved_);
    for (int64_t s = 0; s < S; ++s) {
      float* out = yf.data<float>() + (b * S + s) * hq_ * D;
      if (mask.at_i64(b * total + total - S + s) == 0) {  // padding: not cached, no output
        std::memset(out, 0, static_cast<size_t>(hq_ * D) * sizeof(float));
        continue;
      }
      ring->append(rb, k.data<float>() + (b * S + s) * k_row + k_at, v.data<float>() + (b * S + s) * k_row + v_at);
      if (!chunk && !rows) ring->attend(ctx.cpu, rb, q.data<float>() + (b * S + s) * q_row, hq_, scoring, rope, out);
    }
    if (rows)
      ring->attend_rows(ctx.cpu, rb, q.data<float>() + (b * S + first) * q_row, q_row, S - first, hq_, scoring, rope,
                        yf.data<float>() + (b * S + first) * hq_ * D);
    if (chunk)
      ring->attend_chunk(ctx.cpu, rb, q.data<float>() + (b * S + first) * q_row, q_row, S - first, hq_, scoring, rope,
                         yf.data<float>() + (b * S + first) * hq_ * D, hq_ * D);
  }
  if (yf.raw() != y.raw()) convert_tensor(yf, y);
}

void register_cached_attention(OpRegistry& r) { r.add("tern", "CachedAttention", factory<CachedAttentionOp>()); }

}  // namespace tern
