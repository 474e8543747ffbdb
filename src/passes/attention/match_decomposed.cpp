// Decomposed attention as torch.onnx (TorchScript and dynamo) and Optimum write it.
#include <algorithm>
#include <cmath>

#include "passes/attention/match.h"

namespace tern::attention {

// Slice(x, [begin], [end], [last axis], [step]): x[..., begin:end:step] (an end past D counts as D).
bool slices_last_axis(const Matcher& m, const Node& s, int64_t begin, int64_t end, int64_t step = 1) {
  const int64_t r = m.rank(s.inputs[0]), D = m.dim(s.inputs[0], -1);
  const auto starts = m.ints(input_of(s, 1)), ends = m.ints(input_of(s, 2)), axes = m.ints(input_of(s, 3));
  const auto steps = m.ints(input_of(s, 4));
  if (r <= 0 || D <= 0 || !starts || !ends || !axes || starts->size() != 1 || ends->size() != 1 || axes->size() != 1) return false;
  if ((*axes)[0] != -1 && (*axes)[0] != r - 1) return false;
  if (input_of(s, 4) >= 0 ? !steps || steps->size() != 1 || (*steps)[0] != step : step != 1) return false;
  return (*starts)[0] == begin && std::min((*ends)[0], D) == end;
}

bool concat_on_axis(const Matcher& m, const Node& c, int64_t axis) {
  const int64_t r = m.rank(c.outputs[0]), a = c.attr_int("axis", 0);
  return r > 0 && (a == axis || a + r == axis || a == axis + r);
}

// rotate_half(x) = Concat(−x[..., D/2:], x[..., :D/2]) (Llama, GPT-NeoX): returns x, or -1. Takes its nodes.
int rotated_halves(Decomposed& d, int r) {
  const Matcher& m = d.m;
  const Node* cat = m.op(r, "Concat");
  if (!cat || cat->inputs.size() != 2 || !concat_on_axis(m, *cat, -1)) return -1;
  const Node* neg = m.op(cat->inputs[0], "Neg");
  const Node* lo = m.op(cat->inputs[1], "Slice");
  const Node* hi = neg ? m.op(neg->inputs[0], "Slice") : nullptr;
  if (!hi || !lo || hi->inputs[0] != lo->inputs[0]) return -1;
  const int x = lo->inputs[0];
  const int64_t D = m.dim(x, -1);
  if (D <= 0 || D % 2 || !slices_last_axis(m, *lo, 0, D / 2) || !slices_last_axis(m, *hi, D / 2, D)) return -1;
  for (const Node* n : {cat, neg, lo, hi}) d.take(n);
  return x;
}

// The interleaved (GPT-J, Cohere) rotation: pairs (x[2j], x[2j+1]) → (−x[2j+1], x[2j]), written
// stack([−x[..., 1::2], x[..., ::2]], −1).flatten(−2) — Reshape(Concat(Unsqueeze(Neg(odd), −1),
// Unsqueeze(even, −1)) on a new last axis) back to x's shape. Returns x, or -1. Takes its nodes.
int rotated_pairs(Decomposed& d, int r) {
  const Matcher& m = d.m;
  const Node* flat = m.op(r, "Reshape");
  const Node* stack = flat ? m.op(flat->inputs[0], "Concat") : nullptr;
  if (!stack || stack->inputs.size() != 2) return -1;
  const Node* u_odd = m.op(stack->inputs[0], "Unsqueeze");
  const Node* u_even = m.op(stack->inputs[1], "Unsqueeze");
  const Node* neg = u_odd ? m.op(u_odd->inputs[0], "Neg") : nullptr;
  const Node* odd = neg ? m.op(neg->inputs[0], "Slice") : nullptr;
  const Node* even = u_even ? m.op(u_even->inputs[0], "Slice") : nullptr;
  if (!odd || !even || odd->inputs[0] != even->inputs[0]) return -1;
  const int x = even->inputs[0];
  const int64_t rank = m.rank(x), D = m.dim(x, -1);
  if (rank <= 0 || D <= 0 || D % 2 || !slices_last_axis(m, *even, 0, D, 2) || !slices_last_axis(m, *odd, 1, D, 2)) return -1;
  for (const Node* u : {u_odd, u_even}) {
    const auto axes = m.ints(input_of(*u, 1));
    if (!axes || axes->size() != 1 || ((*axes)[0] != -1 && (*axes)[0] != rank)) return -1;
  }
  if (!concat_on_axis(m, *stack, rank) || m.rank(r) != rank || m.dim(r, -1) != D) return -1;
  for (const Node* n : {flat, stack, u_odd, u_even, neg, odd, even}) d.take(n);
  return x;
}

// y = x·cos + rotate(x)·sin (operands in any order), rotate_half or the interleaved rotation.
std::optional<RotateHalf> match_rotate_half(Decomposed& d, int y) {
  const Matcher& m = d.m;
  const Node* add = m.op(y, "Add");
  if (!add) return d.why.stop(m.producer(y), "expected RoPE's Add(x·cos, rotate_half(x)·sin) here (keys are stored before RoPE)");
  for (int a = 0; a < 2; ++a) {
    const Node* mul_cos = m.op(add->inputs[static_cast<size_t>(a)], "Mul");
    const Node* mul_sin = m.op(add->inputs[static_cast<size_t>(1 - a)], "Mul");
    if (!mul_cos || !mul_sin) continue;
    for (int b = 0; b < 2; ++b) {
      const int r = mul_sin->inputs[static_cast<size_t>(b)];
      const size_t taken = d.nodes.size();
      int x = rotated_halves(d, r);
      const bool interleaved = x < 0;
      if (interleaved) x = rotated_pairs(d, r);
      const int cos = x < 0 ? -1 : mul_cos->inputs[0] == x ? mul_cos->inputs[1] : mul_cos->inputs[1] == x ? mul_cos->inputs[0] : -1;
      if (cos < 0) {
        d.nodes.resize(taken);
        continue;
      }
      for (const Node* n : {add, mul_cos, mul_sin}) d.take(n);
      return RotateHalf{x, cos, mul_sin->inputs[static_cast<size_t>(1 - b)], 0, interleaved};
    }
  }
  return d.why.stop(add,
                    "an Add that is not x·cos + rotate(x)·sin over the whole head (rotate-half Concat(−x[D/2:], x[:D/2]) or "
                    "interleaved stack(−x[1::2], x[::2]))");
}

// Partial rotary: Concat(RoPE(x[..., :r]), x[..., r:]) on the last axis (GPT-NeoX, StableLM, Phi; Phi-3
// writes it with r = D and an empty pass-through), else RoPE over the whole head.
std::optional<RotateHalf> match_rope(Decomposed& d, int y) {
  const Matcher& m = d.m;
  const Node* cat = m.op(y, "Concat");
  const Node* pass = cat && cat->inputs.size() == 2 && concat_on_axis(m, *cat, -1) ? m.op(cat->inputs[1], "Slice") : nullptr;
  if (!pass) return match_rotate_half(d, y);
  auto rope = match_rotate_half(d, cat->inputs[0]);
  const Node* rot = rope ? m.op(rope->x, "Slice") : nullptr;
  const int x = pass->inputs[0];
  const int64_t r = m.dim(rope ? rope->x : -1, -1), D = m.dim(x, -1);
  if (!rot || rot->inputs[0] != x || r <= 0 || D < r || !slices_last_axis(m, *rot, 0, r) || !slices_last_axis(m, *pass, r, D))
    return rope ? d.why.stop(cat, "a Concat that is not Concat(RoPE(x[..., :r]), x[..., r:]) (partial rotary)") : std::nullopt;
  for (const Node* n : {cat, pass, rot}) d.take(n);
  return RotateHalf{x, rope->cos, rope->sin, r < D ? r : 0, rope->interleaved};
}

// The heads x [B, H, S, D] before RoPE, as CachedAttention reads them: p when x = Transpose(Reshape(p
// [B, S, H·D]), perm 0,2,1,3) (a projection split into heads); y when x = Transpose(y [B, S, H, D]) —
// heads normalized after the split (Qwen3's QK-norm), which the rewrite flattens; else x itself, which
// the rewrite transposes back (GPT-NeoX slices q, k and v out of [B, H, S, 3·D] after the transpose).
int match_split_heads(Decomposed& d, int x) {
  const Matcher& m = d.m;
  const int64_t H = m.dim(x, 1), D = m.dim(x, 3);
  if (m.rank(x) != 4 || H <= 0 || D <= 0) {
    d.why.stop(m.producer(x), "expected heads [B, H, S, D] with a fixed head count and size");
    return -1;
  }
  const Node* t = m.op(x, "Transpose");
  if (!t || t->attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3}) {
    d.heads_first.push_back(x);
    return x;
  }
  d.take(t);
  const Node* r = m.op(t->inputs[0], "Reshape");
  if (r && m.rank(r->inputs[0]) == 3 && m.dim(r->inputs[0], 2) == H * D) {
    d.take(r);
    return r->inputs[0];
  }
  return t->inputs[0];
}

// y [B, H, S, D] → Transpose(0, 2, 1, 3) → Reshape [B, S, H·D] (H·D = `width`): returns the Reshape.
// y [B, H, S, D] → Transpose(0, 2, 1, 3), then usually Reshape to [B, S, H·D] (H·D = `width`): returns
// the node CachedAttention replaces — that Reshape, or the Transpose itself when its [B, S, H, D] goes on
// otherwise (GPT-2's dynamo export flattens it to [B·S, H·D] for a Gemm), which the rewrite rebuilds from
// CachedAttention's output. Shape nodes reading the Transpose do not count: they die with the match.
const Node* match_merge_heads(const Matcher& m, int y, int64_t width) {
  const Node* merge = data_consumer(m, y, "Transpose");
  if (!merge || merge->attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3}) return nullptr;
  const Node* out = data_consumer(m, merge->outputs[0], "Reshape");
  if (out && m.rank(out->outputs[0]) == 3 && m.dim(out->outputs[0], 2) == width) return out;
  return merge;
}

// The data-movement chain above an attention operand (MovesBack).
MovesBack walk_moves_back(const Matcher& m, int operand) {
  static const char* const kMoves[] = {"Transpose", "Reshape", "Expand", "Unsqueeze", "Squeeze", "Tile", "Gather", "Identity"};
  MovesBack w{{}, operand};
  const Node* n = nullptr;
  while ((n = m.producer(w.source)) && n->domain.empty() &&
         std::any_of(std::begin(kMoves), std::end(kMoves), [&](const char* op) { return n->op_type == op; })) {
    w.chain.push_back(n);
    w.source = n->inputs[0];
  }
  return w;
}

// A probe of `dtype` whose element i is told apart from every other after data movement: the value i in float32
// (exact to 2^24); in a 16-bit float, whose integers are exact only to 2048 (a 1B shape's cache probe holds 8192), the
// i-th finite bit pattern — moves keep bits. `index_at` reads an element back as its i (-1: none). Undefined when
// the dtype has too few finite patterns for n.
struct DistinctProbe {
  Tensor tensor;
  DType dtype = DType::Float32;
  int64_t index_at(const Tensor& t, int64_t at) const {
    if (dtype == DType::Float32) return static_cast<int64_t>(t.data<float>()[at]);
    const uint16_t bits = static_cast<const uint16_t*>(t.raw())[at], inf = dtype == DType::Float16 ? 0x7C00 : 0x7F80;
    return (bits & 0x7FFF) >= inf ? -1 : bits < 0x8000 ? bits : bits - 0x8000 + inf;
  }
};
DistinctProbe distinct_probe(DType dtype, const Shape& shape) {
  DistinctProbe p;
  const int64_t n = numel_of(shape);
  if (dtype == DType::Float16 || dtype == DType::BFloat16) {
    const int64_t inf = dtype == DType::Float16 ? 0x7C00 : 0x7F80;  // finite patterns: [0, inf) and 0x8000 + [0, inf)
    if (n > 2 * inf) return p;
    p.dtype = dtype;
    p.tensor = Tensor(dtype, shape);
    for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(p.tensor.raw())[i] = static_cast<uint16_t>(i < inf ? i : 0x8000 + i - inf);
    return p;
  }
  if (dtype != DType::Float32 || n > (int64_t{1} << 24)) return p;
  p.tensor = Tensor(DType::Float32, shape);
  for (int64_t i = 0; i < n; ++i) p.tensor.data<float>()[i] = static_cast<float>(i);
  return p;
}

// Whether `operand`, computed from the [B, kv_heads, T, D] value `source`, is repeat_kv of it to `heads`
// heads — each query head h reads KV head h / (heads / kv_heads) — with, for `keys`, the last two axes
// swapped. Checked by running the nodes between on a probe whose every element is distinct.
bool reads_as_repeat_kv(const Matcher& m, int operand, int source, bool keys, int64_t heads) {
  const int64_t kv_heads = m.dim(source, 1), D = m.dim(source, 3);
  if (m.rank(source) != 4 || kv_heads <= 0 || D <= 0 || heads % kv_heads) return false;
  constexpr int64_t T = kProbeTotal;
  const DistinctProbe probe = distinct_probe(m.value(source).dtype, {1, kv_heads, T, D});
  if (!probe.tensor.defined()) return false;
  auto bindings = probe_bindings(m);
  std::erase_if(bindings, [&](const auto& b) { return b.first == source; });
  bindings.emplace_back(source, probe.tensor);
  const auto got = evaluate_with(m.graph(), operand, bindings);
  const std::vector<int64_t> want_shape = keys ? std::vector<int64_t>{1, heads, D, T} : std::vector<int64_t>{1, heads, T, D};
  if (!got || got->shape() != want_shape || got->dtype() != probe.tensor.dtype()) return false;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < D; ++e) {
        const int64_t at = keys ? (h * D + e) * T + t : (h * T + t) * D + e;
        if (probe.index_at(*got, at) != ((h / (heads / kv_heads)) * T + t) * D + e) return false;
      }
  return true;
}

// Walks from an attention operand back to the Concat(past, new, axis 2) that makes `present`, through
// data-movement nodes only, and checks on a probe that they compute repeat_kv (and, for keys, swap the
// last two axes). Any spelling passes: Unsqueeze → Expand → Reshape, Tile, Gather, 3-D Reshape/Transpose pairs.
const Node* match_cache_read(Decomposed& d, int operand, bool keys, int64_t heads) {
  const Matcher& m = d.m;
  const MovesBack w = walk_moves_back(m, operand);
  const Node* cat = m.op(w.source, "Concat");
  const char* what = keys ? "keys" : "values";
  if (!cat || cat->inputs.size() != 2 || !concat_on_axis(m, *cat, 2) || m.rank(w.source) != 4)
    return d.why.stop(m.producer(w.source) ? m.producer(w.source) : m.producer(operand),
                      std::string("expected the ") + what + " read from Concat(past, new, axis 2) through reshapes and transposes"),
           nullptr;
  const int64_t kv_heads = m.dim(w.source, 1), D = m.dim(w.source, 3);
  if (kv_heads <= 0 || D <= 0 || heads % kv_heads)
    return d.why.stop(cat, std::string("the cached ") + what + " have no fixed head count and size dividing the query heads"), nullptr;
  if (!reads_as_repeat_kv(m, operand, w.source, keys, heads))
    return d.why.stop(w.chain.empty() ? cat : w.chain.front(), std::string("the ") + what + " are not read as repeat_kv of the cache" +
                                                                   (keys ? " with the last two axes swapped" : "") +
                                                                   " (checked on a probe)"),
           nullptr;
  for (const Node* c : w.chain) d.take(c);
  d.take(cat);
  return cat;
}

// Strips Mul/Div by a scalar constant from `id`, folding the factor into `scale`.
int strip_scalar_scale(const Matcher& m, int id, double& scale, Decomposed& d) {
  for (;;) {
    const Node* n = m.producer(id);
    if (!n || !n->domain.empty() || (n->op_type != "Mul" && n->op_type != "Div")) return id;
    const auto c1 = m.scalar(n->inputs[1]);
    const auto c0 = n->op_type == "Mul" ? m.scalar(n->inputs[0]) : std::nullopt;
    if (c1) {
      scale *= n->op_type == "Mul" ? *c1 : 1.0 / *c1;
      id = n->inputs[0];
    } else if (c0) {
      scale *= *c0;
      id = n->inputs[1];
    } else {
      return id;
    }
    d.take(n);
  }
}

// cap·tanh(x / cap) (or tanh(x · 1/cap) · cap): Gemma-2's logit soft-capping. Returns x and sets
// `softcap`, or returns `id` untouched.
int strip_softcap(const Matcher& m, int id, float& softcap, Decomposed& d) {
  const Node* outer = m.op(id, "Mul");
  if (!outer) return id;
  for (int a = 0; a < 2; ++a) {
    const auto cap = m.scalar(outer->inputs[static_cast<size_t>(1 - a)]);
    const Node* tanh = m.op(outer->inputs[static_cast<size_t>(a)], "Tanh");
    const Node* inner = tanh ? m.producer(tanh->inputs[0]) : nullptr;
    if (!cap || *cap <= 0 || !inner || !inner->domain.empty() || (inner->op_type != "Div" && inner->op_type != "Mul")) continue;
    const auto c = m.scalar(inner->inputs[1]);
    const double want = inner->op_type == "Div" ? *cap : 1.0 / *cap;
    if (!c || std::abs(*c - want) > 1e-6 * want) continue;
    for (const Node* n : {outer, tanh, inner}) d.take(n);
    softcap = static_cast<float>(*cap);
    return inner->inputs[0];
  }
  return id;
}

// Float-to-float Casts around the softmax (`softmax(scores.float()).to(dtype)`): CachedAttention computes
// its softmax in fp32 whatever the graph's type, so it honours them. Steps over them from `id` upward.
int skip_float_casts(Decomposed& d, int id) {
  const Node* c;
  while ((c = d.m.op(id, "Cast")) && is_float(d.m.value(c->inputs[0]).dtype) && is_float(d.m.value(id).dtype)) {
    d.take(c);
    id = c->inputs[0];
  }
  return id;
}

// Where(IsNaN(p), 0, p) after the softmax: PyTorch's scaled_dot_product_attention gives rows whose every
// key is masked zeros instead of NaN. Only padding queries have such rows, and the ring gives them no NaN
// either. Returns the Where.
const Node* match_nan_guard(const Matcher& m, int probs) {
  const auto& readers = m.consumers(probs);
  if (readers.size() != 2 || m.is_output(probs)) return nullptr;
  for (int k : readers) {
    const Node& isnan = m.graph().nodes[static_cast<size_t>(k)];
    if (isnan.op_type != "IsNaN" || !m.single_use(isnan.outputs[0])) continue;
    const Node& where = m.graph().nodes[static_cast<size_t>(m.consumers(isnan.outputs[0])[0])];
    if (where.op_type == "Where" && where.inputs.size() == 3 && where.inputs[0] == isnan.outputs[0] && m.scalar(where.inputs[1]) == 0.0 &&
        where.inputs[2] == probs && std::count(readers.begin(), readers.end(), m.index_of(&where)))
      return &where;
  }
  return nullptr;
}

std::optional<CachedAttentionSpec> match_decomposed(const Matcher& m, const Node& softmax, int mask, int input_ids, Why& why) {
  Decomposed d{m, why, {}, {}};
  const int64_t sm_axis = softmax.attr_int("axis", -1);
  if (m.rank(softmax.outputs[0]) != 4 || (sm_axis != -1 && sm_axis != 3))
    return why.stop(&softmax, "not a softmax over the last axis of [B, H, S, T] scores");
  d.take(&softmax);
  // Softmax(scale · (Q·Kᵀ) + bias(attention_mask))
  const int in = skip_float_casts(d, softmax.inputs[0]);
  const Node* add = m.op(in, "Add");
  if (!add) return why.stop(m.producer(in), "expected Add(scores, mask bias) before Softmax");
  d.take(add);
  int scores = -1;
  const std::vector<int> derived_from = {mask, input_ids};
  for (int a = 0; a < 2 && scores < 0; ++a)  // lengths may come from any tensor's shape
    if (m.depends_only_on(add->inputs[static_cast<size_t>(1 - a)], derived_from, true) &&
        !m.depends_only_on(add->inputs[static_cast<size_t>(a)], derived_from, true))
      scores = add->inputs[static_cast<size_t>(a)];
  if (scores < 0) return why.stop(add, "neither operand is a bias computed from attention_mask (and cache lengths) alone");
  const int bias = add->inputs[0] == scores ? add->inputs[1] : add->inputs[0];
  // Where(gate, x, very negative): a mask applied by selection (GPT-2's causal buffer), checked with the bias.
  int gate = -1;
  if (const Node* w = m.op(scores, "Where"); w && w->inputs.size() == 3 && m.scalar(w->inputs[2]) && *m.scalar(w->inputs[2]) < -1e4 &&
                                             m.depends_only_on(w->inputs[0], derived_from, true)) {
    d.take(w);
    gate = w->inputs[0];
    scores = w->inputs[1];
  }
  if (!is_causal_padding_mask(m, bias, false, gate))
    return why.stop(m.producer(bias), "the mask bias is not causal + padding from attention_mask on a probe sequence");
  float softcap = 0;
  scores = strip_softcap(m, scores, softcap, d);
  double scale = 1;
  const int unscaled = strip_scalar_scale(m, scores, scale, d);
  const Node* qk = m.op(unscaled, "MatMul");
  if (!qk) return why.stop(m.producer(unscaled), "expected the scores MatMul(Q, Kᵀ), scaled by constants");
  d.take(qk);
  const int q_rot = strip_scalar_scale(m, qk->inputs[0], scale, d);
  const int k_operand = strip_scalar_scale(m, qk->inputs[1], scale, d);
  const int64_t heads = m.dim(q_rot, 1), D = m.dim(q_rot, 3);
  if (m.rank(q_rot) != 4 || heads <= 0 || D <= 0) return why.stop(qk, "queries are not [B, H, S, D] with a fixed head count and size");
  // → MatMul(P, V) → Transpose(0, 2, 1, 3) → Reshape [B, S, H·D]: the node CachedAttention replaces
  const auto& g = m.graph();
  int probs = softmax.outputs[0];
  for (const Node* c; m.single_use(probs) && (c = only_consumer(m, probs, "Cast")) && is_float(m.value(c->outputs[0]).dtype);) {
    d.take(c);
    probs = c->outputs[0];
  }
  if (const Node* guard = match_nan_guard(m, probs)) {
    d.take(m.producer(guard->inputs[0]));
    d.take(guard);
    probs = guard->outputs[0];
  }
  const Node* pv = only_consumer(m, probs, "MatMul");
  if (!pv) return why.stop(&softmax, "its probabilities are not read by one MatMul with the values alone");
  const Node* out = match_merge_heads(m, pv->outputs[0], heads * D);
  if (!out) return why.stop(pv, "its output is not merged back to [B, S, H, D] by Transpose(0, 2, 1, 3)");
  d.take(pv);
  if (out->op_type == "Reshape") d.take(m.producer(out->inputs[0]));
  d.take(out);

  const Node* k_cat = match_cache_read(d, k_operand, true, heads);
  const Node* v_cat = k_cat ? match_cache_read(d, pv->inputs[1], false, heads) : nullptr;
  if (!k_cat || !v_cat) return std::nullopt;
  CachedAttentionSpec s;
  s.past_k = k_cat->inputs[0];
  s.past_v = v_cat->inputs[0];
  s.present_k = k_cat->outputs[0];
  s.present_v = v_cat->outputs[0];
  // No RoPE (GPT-2's learned positions): queries and new keys are the projections' heads as they are.
  auto projection_heads = [&](int x) {
    const Node* t = m.op(x, "Transpose");
    return t && t->attr_ints("perm") == std::vector<int64_t>{0, 2, 1, 3};
  };
  const bool no_rope = projection_heads(q_rot) && projection_heads(k_cat->inputs[1]);
  const auto q_rope = no_rope ? std::optional(RotateHalf{q_rot}) : match_rope(d, q_rot);
  const auto k_rope = no_rope ? std::optional(RotateHalf{k_cat->inputs[1]}) : q_rope ? match_rope(d, k_cat->inputs[1]) : std::nullopt;
  if (!q_rope || !k_rope) return std::nullopt;
  if (q_rope->cos != k_rope->cos || q_rope->sin != k_rope->sin || q_rope->rotary_dim != k_rope->rotary_dim ||
      q_rope->interleaved != k_rope->interleaved)
    return why.stop(qk, "queries and keys rotate with different cos/sin");
  s.rotary_dim = q_rope->rotary_dim;
  s.interleaved = q_rope->interleaved;
  s.q = match_split_heads(d, q_rope->x);
  s.k = s.q >= 0 ? match_split_heads(d, k_rope->x) : -1;
  s.v = s.k >= 0 ? match_split_heads(d, v_cat->inputs[1]) : -1;
  if (s.q < 0 || s.k < 0 || s.v < 0) return std::nullopt;
  s.heads_first = d.heads_first;
  s.cos = q_rope->cos;  // [.., positions, D] in rotate-half layout; made into tables by the caller
  s.sin = q_rope->sin;
  s.q_heads = heads;
  s.kv_heads = m.dim(k_rope->x, 1);
  const bool v_heads_first = std::count(s.heads_first.begin(), s.heads_first.end(), s.v) > 0;
  const int64_t v_width = m.rank(s.v) == 4 ? m.dim(s.v, v_heads_first ? 1 : 2) * m.dim(s.v, 3) : m.dim(s.v, 2);
  if (s.kv_heads <= 0 || v_width != s.kv_heads * D) return why.stop(v_cat, "values do not have the keys' head count and size");
  s.scale = static_cast<float>(scale);
  s.softcap = softcap;
  s.mask_bias = bias;
  s.mask_gate = gate;
  s.attention_node = m.index_of(out);
  s.pattern = no_rope         ? "decomposed attention (no RoPE, scale, mask, Softmax) → CachedAttention"
              : s.interleaved ? "decomposed attention (interleaved RoPE, repeat_kv, scale, mask, Softmax) → CachedAttention"
                              : "decomposed attention (rotate-half RoPE, repeat_kv, scale, mask, Softmax) → CachedAttention";
  // Nothing outside the match may read what it computes, except the caches it writes.
  std::sort(d.nodes.begin(), d.nodes.end());
  for (int k : d.nodes)
    for (int o : g.nodes[static_cast<size_t>(k)].outputs) {
      if (o < 0 || o == out->outputs[0]) continue;
      if (m.is_output(o) && o != s.present_k && o != s.present_v)
        return why.stop(&g.nodes[static_cast<size_t>(k)], "an intermediate of the attention is a graph output ('" + m.value(o).name + "')");
    }
  return s;
}

}  // namespace tern::attention
