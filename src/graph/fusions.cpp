#include "graph/fusions.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <optional>

#include "graph/matcher.h"
#include "graph/passes.h"

namespace tern {

namespace {

// What a CachedAttention node is made of.
struct CachedAttentionSpec {
  int attention_node = -1;           // the node the CachedAttention replaces (it keeps its output)
  int q = -1, k = -1, v = -1;        // [B, S, H·D] before RoPE; k = v = -1: q packs Q, K and V
  int cos = -1, sin = -1;            // [positions, rotary_dim / 2]
  int past_k = -1, past_v = -1, present_k = -1, present_v = -1;
  int64_t q_heads = 0, kv_heads = 0;
  std::optional<float> scale;
  bool interleaved = false;
  int64_t rotary_dim = 0;            // 0: the head size
  std::string pattern;               // what matched, for `tern inspect --fusions`
};

// Evaluates value `target` with graph inputs bound to tensors, by folding a copy of the nodes it depends
// on; nullopt when it depends on another input or does not fold.
std::optional<Tensor> evaluate_with(const Graph& g, int target, const std::vector<std::pair<int, Tensor>>& bindings) {
  Graph h;
  h.values = g.values;
  h.opsets = g.opsets;
  for (const auto& [input, bound] : bindings) {
    Value& in = h.values[static_cast<size_t>(input)];
    in.constant = bound;
    in.shape = sym_shape(bound.shape());
  }
  std::vector<char> needed(g.nodes.size(), 0);
  std::vector<int> stack{target};
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v < 0 || h.values[static_cast<size_t>(v)].constant) continue;
    const int p = g.values[static_cast<size_t>(v)].producer;
    if (p < 0) return std::nullopt;  // another graph input
    if (needed[static_cast<size_t>(p)]) continue;
    needed[static_cast<size_t>(p)] = 1;
    stack.insert(stack.end(), g.nodes[static_cast<size_t>(p)].inputs.begin(), g.nodes[static_cast<size_t>(p)].inputs.end());
  }
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (needed[k]) h.nodes.push_back(g.nodes[k]);
  for (Value& v : h.values)
    if (!v.constant) v.shape.reset(), v.sym_value.reset();
  link_producers(h);
  infer_and_fold(h);
  return h.values[static_cast<size_t>(target)].constant;
}

// The only consumer of `id`, when it is `op_type` (default domain) reading `id` as its first input.
const Node* only_consumer(const Matcher& m, int id, const char* op_type) {
  if (!m.single_use(id)) return nullptr;
  const Node& n = m.graph().nodes[static_cast<size_t>(m.consumers(id)[0])];
  return n.op_type == op_type && n.domain.empty() && n.inputs[0] == id ? &n : nullptr;
}

// Probe for the masks and indices a graph derives from attention_mask and input_ids: one sequence with
// kProbeTotal positions whose first is padding, kProbeNew of them new (so kProbeTotal − kProbeNew cached).
constexpr int64_t kProbeTotal = 5, kProbeNew = 2;
std::vector<std::pair<int, Tensor>> probe_bindings(const Matcher& m, int mask, int ids) {
  std::vector<std::pair<int, Tensor>> b{
      {mask, cast_to(Tensor::from_vector<int64_t>({0, 1, 1, 1, 1}, {1, kProbeTotal}), m.value(mask).dtype)}};
  if (ids >= 0) b.emplace_back(ids, cast_to(Tensor::from_vector<int64_t>({0, 0}, {1, kProbeNew}), m.value(ids).dtype));
  return b;
}

// True when `bias` (an attention mask: bool, or additive float) — combined with a causal frontier when
// `causal` — lets new token i see exactly the unpadded positions up to its own on the probe: the
// causal + padding mask CachedAttention applies from attention_mask. Columns past the probe's length
// are not looked at (the callers mask them by length).
bool is_causal_padding_mask(const Matcher& m, int bias, bool causal, int mask, int ids) {
  if (bias < 0) return false;
  const auto t = evaluate_with(m.graph(), bias, probe_bindings(m, mask, ids));
  if (!t || t->rank() < 2 || t->dim(-2) != kProbeNew || t->dim(-1) < kProbeTotal || t->numel() != kProbeNew * t->dim(-1))
    return false;
  const Tensor f = cast_to(*t, DType::Float32);  // bool: 1 = attend
  for (int64_t i = 0; i < kProbeNew; ++i)
    for (int64_t j = 0; j < kProbeTotal; ++j) {
      const bool want = j > 0 && j <= kProbeTotal - kProbeNew + i;
      const float v = f.data<float>()[i * t->dim(-1) + j];
      bool open = t->dtype() == DType::Bool ? v != 0 : v == 0;
      const bool shut = t->dtype() == DType::Bool ? v == 0 : v < -1e4f;
      if (!open && !shut) return false;
      if (causal && j > kProbeTotal - kProbeNew + i) open = false;
      if (open != want) return false;
    }
  return true;
}

// `id` evaluates on the probe to one integer per sequence equal to `expected`.
// ONNX Attention's masking (attn_mask input `bias`, is_causal) is CachedAttention's: causal, plus padding
// when a mask is given (an unpadded batch needs none).
bool attention_masks_like_cache(const Matcher& m, const Node& attention, int mask, int ids) {
  const int bias = input_of(attention, 3);
  const bool causal = attention.attr_int("is_causal", 0) != 0;
  return bias < 0 ? causal : is_causal_padding_mask(m, bias, causal, mask, ids);
}

bool probes_to(const Matcher& m, int id, int64_t expected, int mask, int ids) {
  const auto t = id >= 0 ? evaluate_with(m.graph(), id, probe_bindings(m, mask, ids)) : std::nullopt;
  return t && is_integer(t->dtype()) && t->numel() == 1 && t->at_i64(0) == expected;
}

// ---- attention ops with their RoPE visible (ONNX Attention, com.microsoft MHA / GQA) ----

// Where the operands of one fused-op attention pattern sit. RoPE inputs are (x, cos, sin) indices.
struct OpPattern {
  const char* attention_domain;
  const char* attention_op;
  int past_key, past_value;        // attention inputs
  int rope_x, rope_cos, rope_sin;  // RotaryEmbedding inputs (same domain as the attention)
  std::vector<int> must_be_absent; // attention inputs this rewrite cannot honour
};

// ONNX: RotaryEmbedding(x, cos, sin, pos) → Attention(q, k, v, mask, past_k, past_v).
// ONNX Runtime: RotaryEmbedding(x, pos, cos, sin) → MultiHeadAttention(q, k, v, bias, key_padding_mask,
// attention_bias, past_k, past_v) or GroupQueryAttention(q, k, v, past_k, past_v, seqlens_k, total_len,
// cos, sin, position_ids, attention_bias, head_sink).
const OpPattern kOpPatterns[] = {
    {"", "Attention", 4, 5, 0, 1, 2, {}},
    {"com.microsoft", "MultiHeadAttention", 6, 7, 0, 2, 3, {3}},
    {"com.microsoft", "GroupQueryAttention", 3, 4, 0, 2, 3, {10, 11}},
};

// q and k both come out of RotaryEmbedding with the same tables and attributes: records their inputs,
// the tables and the rotary layout in `s`.
bool match_rope_pair(const Matcher& m, int q, int k, const OpPattern& pat, CachedAttentionSpec& s) {
  const Node* rq = m.op(q, "RotaryEmbedding", pat.attention_domain);
  const Node* rk = m.op(k, "RotaryEmbedding", pat.attention_domain);
  if (!rq || !rk || input_of(*rq, pat.rope_cos) != input_of(*rk, pat.rope_cos) ||
      input_of(*rq, pat.rope_sin) != input_of(*rk, pat.rope_sin) ||
      rq->attr_int("interleaved", 0) != rk->attr_int("interleaved", 0) ||
      rq->attr_int("rotary_embedding_dim", 0) != rk->attr_int("rotary_embedding_dim", 0))
    return false;
  s.q = input_of(*rq, pat.rope_x);
  s.k = input_of(*rk, pat.rope_x);
  s.cos = input_of(*rq, pat.rope_cos);
  s.sin = input_of(*rq, pat.rope_sin);
  s.interleaved = rq->attr_int("interleaved", 0) != 0;
  s.rotary_dim = rq->attr_int("rotary_embedding_dim", 0);
  return true;
}

std::optional<CachedAttentionSpec> match_attention_op(const Matcher& m, const Node& n, int mask) {
  const OpPattern* pat = nullptr;
  for (const auto& p : kOpPatterns)
    if (n.op_type == p.attention_op && n.domain == p.attention_domain) pat = &p;
  if (!pat || n.outputs.size() < 3) return std::nullopt;
  CachedAttentionSpec s;
  s.attention_node = m.index_of(&n);
  s.past_k = input_of(n, pat->past_key);
  s.past_v = input_of(n, pat->past_value);
  s.present_k = n.outputs[1];
  s.present_v = n.outputs[2];
  for (int i : pat->must_be_absent)
    if (input_of(n, i) >= 0) return std::nullopt;
  if (n.attr_float("softcap", 0) != 0 || n.attr_int("smooth_softmax", 0) != 0 || n.attr_int("local_window_size", -1) != -1)
    return std::nullopt;
  const bool gqa = n.op_type == "GroupQueryAttention";
  if (gqa && !m.depends_only_on(input_of(n, 5), {mask})) return std::nullopt;  // seqlens_k from attention_mask
  if (gqa && n.attr_int("do_rotary", 0) != 0) {
    s.q = input_of(n, 0);
    s.k = input_of(n, 1);
    s.v = input_of(n, 2);
    if ((s.k < 0) != (s.v < 0)) return std::nullopt;
    s.cos = input_of(n, 7);
    s.sin = input_of(n, 8);
    s.interleaved = n.attr_int("rotary_interleaved", 0) != 0;
    if (input_of(n, 9) >= 0) return std::nullopt;  // explicit position_ids: positions are not the mask's
    s.pattern = std::string(s.k < 0 ? "packed-QKV " : "") + "GroupQueryAttention with do_rotary → CachedAttention";
  } else {
    if (!match_rope_pair(m, input_of(n, 0), input_of(n, 1), *pat, s)) return std::nullopt;
    s.v = input_of(n, 2);
    s.pattern = (n.domain.empty() ? "RotaryEmbedding → " : "com.microsoft RotaryEmbedding → ") + n.op_type + " → CachedAttention";
  }
  if (n.op_type == "Attention") {
    if (!attention_masks_like_cache(m, n, mask, m.graph().find_value("input_ids"))) return std::nullopt;
    s.q_heads = n.attr_int("q_num_heads", 0);
    s.kv_heads = n.attr_int("kv_num_heads", 0);
  } else {
    s.q_heads = n.attr_int("num_heads", 0);
    s.kv_heads = gqa ? n.attr_int("kv_num_heads", 0) : s.q_heads;
  }
  if (s.q_heads <= 0 || s.kv_heads <= 0) return std::nullopt;  // 4-D layouts carry no head counts: not this pattern
  if (n.has_attr("scale")) s.scale = n.attr_float("scale", 1);
  return s;
}

// ---- decomposed attention (torch.onnx.export of Hugging Face / Optimum Llama-family models) ----

// Collects the nodes a decomposed match consumed (they die once the attention is replaced).
struct Decomposed {
  const Matcher& m;
  std::vector<int> nodes;
  const Node* take(const Node* n) {
    if (n) nodes.push_back(m.index_of(n));
    return n;
  }
};

// Slice(x, [begin], [end], [last axis], [1]): x[..., begin:end].
bool slices_last_axis(const Matcher& m, const Node& s, int64_t begin, int64_t end) {
  const int64_t r = m.rank(s.inputs[0]), D = m.dim(s.inputs[0], -1);
  const auto starts = m.ints(input_of(s, 1)), ends = m.ints(input_of(s, 2)), axes = m.ints(input_of(s, 3));
  const auto steps = m.ints(input_of(s, 4));
  if (r <= 0 || D <= 0 || !starts || !ends || !axes || starts->size() != 1 || ends->size() != 1 || axes->size() != 1) return false;
  if ((*axes)[0] != -1 && (*axes)[0] != r - 1) return false;
  if (input_of(s, 4) >= 0 && (!steps || steps->size() != 1 || (*steps)[0] != 1)) return false;
  return (*starts)[0] == begin && std::min((*ends)[0], D) == end;
}

bool concat_on_axis(const Matcher& m, const Node& c, int64_t axis) {
  const int64_t r = m.rank(c.outputs[0]), a = c.attr_int("axis", 0);
  return r > 0 && (a == axis || a + r == axis || a == axis + r);
}

// y = x·cos + rotate_half(x)·sin, rotate_half(x) = Concat(−x[..., D/2:], x[..., :D/2]) (operands in any order).
struct RotateHalf {
  int x = -1, cos = -1, sin = -1;
};
std::optional<RotateHalf> match_rotate_half(Decomposed& d, int y) {
  const Matcher& m = d.m;
  const Node* add = m.op(y, "Add");
  if (!add) return std::nullopt;
  for (int a = 0; a < 2; ++a) {
    const Node* mul_cos = m.op(add->inputs[static_cast<size_t>(a)], "Mul");
    const Node* mul_sin = m.op(add->inputs[static_cast<size_t>(1 - a)], "Mul");
    if (!mul_cos || !mul_sin) continue;
    for (int b = 0; b < 2; ++b) {
      const Node* cat = m.op(mul_sin->inputs[static_cast<size_t>(b)], "Concat");
      if (!cat || cat->inputs.size() != 2 || !concat_on_axis(m, *cat, -1)) continue;
      const Node* neg = m.op(cat->inputs[0], "Neg");
      const Node* lo = m.op(cat->inputs[1], "Slice");
      const Node* hi = neg ? m.op(neg->inputs[0], "Slice") : nullptr;
      if (!hi || !lo || hi->inputs[0] != lo->inputs[0]) continue;
      const int x = lo->inputs[0];
      const int64_t D = m.dim(x, -1);
      if (D <= 0 || D % 2 || !slices_last_axis(m, *lo, 0, D / 2) || !slices_last_axis(m, *hi, D / 2, D)) continue;
      const int cos = mul_cos->inputs[0] == x ? mul_cos->inputs[1] : mul_cos->inputs[1] == x ? mul_cos->inputs[0] : -1;
      if (cos < 0) continue;
      for (const Node* n : {add, mul_cos, mul_sin, cat, neg, lo, hi}) d.take(n);
      return RotateHalf{x, cos, mul_sin->inputs[static_cast<size_t>(1 - b)]};
    }
  }
  return std::nullopt;
}

// x = Transpose(Reshape(p, [B, S, H, D]), perm 0,2,1,3) with p [B, S, H·D]: returns p.
int match_split_heads(Decomposed& d, int x) {
  const Matcher& m = d.m;
  const Node* t = m.op(x, "Transpose");
  const Node* r = t ? m.op(t->inputs[0], "Reshape") : nullptr;
  if (!r || t->attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3} || m.rank(r->inputs[0]) != 3 || m.rank(x) != 4) return -1;
  const int64_t H = m.dim(x, 1), D = m.dim(x, 3), HD = m.dim(r->inputs[0], 2);
  if (H <= 0 || D <= 0 || HD != H * D) return -1;
  d.take(t);
  d.take(r);
  return r->inputs[0];
}

// y [B, H, S, D] → Transpose(0, 2, 1, 3) → Reshape [B, S, H·D] (H·D = `width`): returns the Reshape.
const Node* match_merge_heads(const Matcher& m, int y, int64_t width) {
  const Node* merge = only_consumer(m, y, "Transpose");
  if (merge && merge->attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3}) merge = nullptr;
  const Node* out = merge ? only_consumer(m, merge->outputs[0], "Reshape") : nullptr;
  if (!out || m.rank(out->outputs[0]) != 3 || (m.dim(out->outputs[0], 2) >= 0 && m.dim(out->outputs[0], 2) != width)) return nullptr;
  return out;
}

// Walks from an attention operand back to the Concat(past, new, axis 2) that makes `present`, through
// repeat_kv — Unsqueeze(axis 2) → Expand → Reshape to [B, heads, T, D] — and, for keys, the
// Transpose of the last two axes.
const Node* match_cache_read(Decomposed& d, int operand, bool keys, int64_t heads) {
  const Matcher& m = d.m;
  std::vector<const Node*> chain;  // operand back to the Concat
  int id = operand;
  const Node* n = nullptr;
  while ((n = m.producer(id)) && n->domain.empty() &&
         (n->op_type == "Transpose" || n->op_type == "Reshape" || n->op_type == "Expand" || n->op_type == "Unsqueeze")) {
    chain.push_back(n);
    id = n->inputs[0];
  }
  const Node* cat = m.op(id, "Concat");
  if (!cat || cat->inputs.size() != 2 || !concat_on_axis(m, *cat, 2) || m.rank(id) != 4) return nullptr;
  const int64_t kv_heads = m.dim(id, 1);
  if (keys) {  // exactly one Transpose swapping the last two axes, first or last in the chain
    auto is_t = [](const Node* x) { return x->op_type == "Transpose" && x->attr_ints("perm") == std::vector<int64_t>{0, 1, 3, 2}; };
    if (!chain.empty() && is_t(chain.front())) chain.erase(chain.begin());
    else if (!chain.empty() && is_t(chain.back())) chain.pop_back();
    else return nullptr;
  }
  if (chain.empty()) {
    if (kv_heads != heads) return nullptr;
  } else {  // chain (operand → Concat) is Reshape ← Expand ← Unsqueeze
    if (chain.size() != 3 || chain[0]->op_type != "Reshape" || chain[1]->op_type != "Expand" || chain[2]->op_type != "Unsqueeze")
      return nullptr;
    const auto axes = chain[2]->inputs.size() > 1 ? m.ints(chain[2]->inputs[1]) : std::optional(chain[2]->attr_ints("axes"));
    const int rep = chain[0]->outputs[0], expanded = chain[1]->outputs[0];
    if (!axes || *axes != std::vector<int64_t>{2} || kv_heads <= 0 || heads % kv_heads || m.rank(expanded) != 5 ||
        m.dim(expanded, 1) != kv_heads || m.rank(rep) != 4 || m.dim(rep, 1) != heads)
      return nullptr;
    const int64_t n_rep = m.dim(expanded, 2);
    if (n_rep != -1 && n_rep != heads / kv_heads) return nullptr;
  }
  // Every node between operand and Concat, including the key Transpose.
  id = operand;
  while (id != cat->outputs[0]) {
    const Node* p = m.producer(id);
    d.take(p);
    id = p->inputs[0];
  }
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

std::optional<CachedAttentionSpec> match_decomposed(const Matcher& m, const Node& softmax, int mask, int input_ids) {
  Decomposed d{m, {}};
  const int64_t sm_axis = softmax.attr_int("axis", -1);
  if (m.rank(softmax.outputs[0]) != 4 || (sm_axis != -1 && sm_axis != 3)) return std::nullopt;
  d.take(&softmax);
  // Softmax(scale · (Q·Kᵀ) + bias(attention_mask))
  const Node* add = m.op(softmax.inputs[0], "Add");
  if (!add) return std::nullopt;
  d.take(add);
  int scores = -1;
  for (int a = 0; a < 2 && scores < 0; ++a)
    if (m.depends_only_on(add->inputs[static_cast<size_t>(1 - a)], {mask, input_ids}) &&
        !m.depends_only_on(add->inputs[static_cast<size_t>(a)], {mask, input_ids}))
      scores = add->inputs[static_cast<size_t>(a)];
  if (scores < 0) return std::nullopt;
  double scale = 1;
  const Node* qk = m.op(strip_scalar_scale(m, scores, scale, d), "MatMul");
  if (!qk) return std::nullopt;
  d.take(qk);
  const int q_rot = strip_scalar_scale(m, qk->inputs[0], scale, d);
  const int k_operand = strip_scalar_scale(m, qk->inputs[1], scale, d);
  const int64_t heads = m.dim(q_rot, 1), D = m.dim(q_rot, 3);
  if (m.rank(q_rot) != 4 || heads <= 0 || D <= 0) return std::nullopt;
  // → MatMul(P, V) → Transpose(0, 2, 1, 3) → Reshape [B, S, H·D]: the node CachedAttention replaces
  const auto& g = m.graph();
  const Node* pv = only_consumer(m, softmax.outputs[0], "MatMul");
  const Node* out = pv ? match_merge_heads(m, pv->outputs[0], heads * D) : nullptr;
  if (!out) return std::nullopt;
  d.take(pv);
  d.take(m.producer(out->inputs[0]));
  d.take(out);

  const Node* k_cat = match_cache_read(d, k_operand, true, heads);
  const Node* v_cat = match_cache_read(d, pv->inputs[1], false, heads);
  if (!k_cat || !v_cat) return std::nullopt;
  CachedAttentionSpec s;
  s.past_k = k_cat->inputs[0];
  s.past_v = v_cat->inputs[0];
  s.present_k = k_cat->outputs[0];
  s.present_v = v_cat->outputs[0];
  const auto q_rope = match_rotate_half(d, q_rot);
  const auto k_rope = match_rotate_half(d, k_cat->inputs[1]);
  if (!q_rope || !k_rope || q_rope->cos != k_rope->cos || q_rope->sin != k_rope->sin) return std::nullopt;
  s.q = match_split_heads(d, q_rope->x);
  s.k = match_split_heads(d, k_rope->x);
  s.v = match_split_heads(d, k_cat == v_cat ? -1 : v_cat->inputs[1]);
  if (s.q < 0 || s.k < 0 || s.v < 0) return std::nullopt;
  s.cos = q_rope->cos;  // [.., positions, D] in rotate-half layout; made into tables by the caller
  s.sin = q_rope->sin;
  s.q_heads = heads;
  s.kv_heads = m.dim(k_rope->x, 1);
  if (s.kv_heads <= 0 || m.dim(s.v, 2) != s.kv_heads * D) return std::nullopt;
  s.scale = static_cast<float>(scale);
  s.attention_node = m.index_of(out);
  s.pattern = "decomposed attention (rotate-half RoPE, repeat_kv, scale, mask, Softmax) → CachedAttention";
  // Nothing outside the match may read what it computes, except the caches it writes.
  std::sort(d.nodes.begin(), d.nodes.end());
  for (int k : d.nodes)
    for (int o : g.nodes[static_cast<size_t>(k)].outputs) {
      if (o < 0 || o == out->outputs[0]) continue;
      if (m.is_output(o) && o != s.present_k && o != s.present_v) return std::nullopt;
    }
  return s;
}

// ---- ONNX opset-24 static cache ----
// Fixed-size past buffers [B, KV, capacity, D] that TensorScatter updates at write index = past length,
// read whole by a 4-D Attention-24 whose nonpad_kv_seqlen = past + new tokens:
//   q = RotaryEmbedding(Transpose(Reshape(q_proj)));  present.k = TensorScatter(past.k, RotaryEmbedding(k), idx)
//   present.v = TensorScatter(past.v, Transpose(Reshape(v_proj)), idx)
//   out = Reshape(Transpose(Attention(q, present.k, present.v, mask, nonpad_kv_seqlen)))
// The write index, lengths and mask are checked on a probe sequence.
std::optional<CachedAttentionSpec> match_static_cache_attention(const Matcher& m, const Node& n, int mask, int ids) {
  if (n.op_type != "Attention" || !n.domain.empty() || input_of(n, 4) >= 0 || input_of(n, 5) >= 0) return std::nullopt;
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] >= 0 && (!m.consumers(n.outputs[k]).empty() || m.is_output(n.outputs[k]))) return std::nullopt;
  if (n.attr_float("softcap", 0) != 0) return std::nullopt;
  const Node* kc = m.op(input_of(n, 1), "TensorScatter");
  const Node* vc = m.op(input_of(n, 2), "TensorScatter");
  if (!kc || !vc || m.rank(kc->outputs[0]) != 4) return std::nullopt;
  for (const Node* c : {kc, vc}) {
    const int64_t axis = c->attr_int("axis", -2);
    if ((axis != -2 && axis != 2) || input_of(*c, 2) != input_of(*kc, 2)) return std::nullopt;
  }
  constexpr int64_t kCached = kProbeTotal - kProbeNew;
  if (!probes_to(m, input_of(*kc, 2), kCached, mask, ids) || !probes_to(m, input_of(n, 6), kProbeTotal, mask, ids) ||
      !attention_masks_like_cache(m, n, mask, ids))
    return std::nullopt;
  CachedAttentionSpec s;
  if (!match_rope_pair(m, input_of(n, 0), kc->inputs[1], kOpPatterns[0], s)) return std::nullopt;
  s.q_heads = m.dim(s.q, 1);
  s.kv_heads = m.dim(s.k, 1);
  const int64_t D = m.dim(s.q, 3);
  Decomposed d{m, {}};  // the nodes they leave behind die with the Attention
  s.q = match_split_heads(d, s.q);
  s.k = match_split_heads(d, s.k);
  s.v = match_split_heads(d, vc->inputs[1]);
  const Node* out = match_merge_heads(m, n.outputs[0], s.q_heads * D);
  if (s.q < 0 || s.k < 0 || s.v < 0 || !out || s.q_heads <= 0 || s.kv_heads <= 0 || D <= 0) return std::nullopt;
  s.past_k = kc->inputs[0];
  s.past_v = vc->inputs[0];
  s.present_k = kc->outputs[0];
  s.present_v = vc->outputs[0];
  if (n.has_attr("scale")) s.scale = n.attr_float("scale", 1);
  s.attention_node = m.index_of(out);
  s.pattern = "static cache (TensorScatter, RotaryEmbedding → Attention-24 nonpad_kv_seqlen) → CachedAttention";
  return s;
}

// cos/sin of the decomposed form ([.., W, D] with equal halves, computed from position_ids) as the
// [W, D/2] tables CachedAttention reads. Fails (nullopt) when they are not of that form.
std::optional<std::pair<Tensor, Tensor>> rope_tables(const Graph& g, const Matcher& m, int cos, int sin, int positions, int64_t W,
                                                     int64_t D) {
  if (positions < 0 || !m.depends_only_on(cos, {positions}) || !m.depends_only_on(sin, {positions})) return std::nullopt;
  std::vector<int64_t> p(static_cast<size_t>(W));
  for (int64_t i = 0; i < W; ++i) p[static_cast<size_t>(i)] = i;
  const Tensor bound = cast_to(Tensor::from_vector<int64_t>(p, {1, W}), m.value(positions).dtype);
  std::pair<Tensor, Tensor> tables;
  for (int which = 0; which < 2; ++which) {
    const auto full = evaluate_with(g, which ? sin : cos, {{positions, bound}});
    if (!full || full->numel() != W * D || full->dim(-1) != D) return std::nullopt;
    const Tensor f = cast_to(*full, DType::Float32);
    Tensor half(DType::Float32, {W, D / 2});
    for (int64_t w = 0; w < W; ++w)
      for (int64_t j = 0; j < D / 2; ++j) {
        const float a = f.data<float>()[w * D + j], b = f.data<float>()[w * D + D / 2 + j];
        if (a != b) return std::nullopt;  // not the rotate-half layout
        half.data<float>()[w * (D / 2) + j] = a;
      }
    (which ? tables.second : tables.first) = half;
  }
  return tables;
}

}  // namespace

std::vector<Fusion> fuse_cached_attention(Graph& graph, const CachedAttentionOptions& opt) {
  link_producers(graph);
  const int mask = graph.find_value("attention_mask");
  if (mask < 0 || opt.window <= 0) return {};
  Graph g = graph;  // rewritten on a copy: kept only if consistent
  const Matcher m(graph);
  std::vector<CachedAttentionSpec> specs;
  std::map<std::pair<int, int>, std::pair<int, int>> tables;  // graph cos/sin → table values
  for (const Node& n : graph.nodes) {
    if (auto s = match_attention_op(m, n, mask)) {
      specs.push_back(*s);
    } else if (auto st = match_static_cache_attention(m, n, mask, graph.find_value("input_ids"))) {
      specs.push_back(*st);
    } else if (n.op_type == "Softmax" && n.domain.empty()) {
      if (auto d = match_decomposed(m, n, mask, graph.find_value("input_ids"))) {
        auto known = tables.find({d->cos, d->sin});  // layers share one cos/sin: one pair of tables
        if (known == tables.end()) {
          const int64_t D = m.dim(d->q, 2) / d->q_heads;
          auto t = rope_tables(graph, m, d->cos, d->sin, graph.find_value("position_ids"), opt.window, D);
          if (!t) continue;
          const int cos = g.add_value(n.name + "/rope_cos_table"), sin = g.add_value(n.name + "/rope_sin_table");
          for (auto [id, table] : {std::pair{cos, t->first}, std::pair{sin, t->second}}) {
            Value& v = g.values[static_cast<size_t>(id)];
            v.dtype = DType::Float32;
            v.shape = sym_shape(table.shape());
            v.constant = table;
          }
          known = tables.emplace(std::pair{d->cos, d->sin}, std::pair{cos, sin}).first;
        }
        std::tie(d->cos, d->sin) = known->second;
        specs.push_back(*d);
      }
    }
  }
  // Only layers whose cache the graph takes in and gives out: the ring replaces exactly that.
  for (size_t i = specs.size(); i-- > 0;) {
    const auto& s = specs[i];
    if (s.past_k < 0 || s.past_v < 0 || !m.is_input(s.past_k) || !m.is_input(s.past_v) || !m.is_output(s.present_k) ||
        !m.is_output(s.present_v)) {
      specs.erase(specs.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  std::vector<int> drop_inputs, drop_outputs;
  std::vector<Fusion> fused;
  for (const CachedAttentionSpec& s : specs) {
    Node& n = g.nodes[static_cast<size_t>(s.attention_node)];
    Node c;
    c.name = n.name + "/cached";
    c.op_type = "CachedAttention";
    c.domain = "tern";
    c.inputs = {s.q, s.k, s.v, s.cos, s.sin, mask};
    c.outputs = {n.outputs[0]};
    auto set = [&](const char* k, int64_t v) {
      Attribute a;
      a.i = v;
      c.attrs[k] = a;
    };
    set("q_num_heads", s.q_heads);
    set("kv_num_heads", s.kv_heads);
    set("window", opt.window);
    set("sinks", opt.sinks);
    set("storage", static_cast<int64_t>(opt.storage));
    set("interleaved", s.interleaved);
    if (s.rotary_dim) set("rotary_embedding_dim", s.rotary_dim);
    if (s.scale) {
      Attribute a;
      a.kind = Attribute::Kind::Float;
      a.f = *s.scale;
      c.attrs["scale"] = a;
    }
    drop_inputs.insert(drop_inputs.end(), {s.past_k, s.past_v});
    drop_outputs.insert(drop_outputs.end(), {s.present_k, s.present_v});
    fused.push_back({s.pattern, c.name});
    n = std::move(c);
  }
  auto drop = [](std::vector<int>& list, const std::vector<int>& ids) {
    list.erase(std::remove_if(list.begin(), list.end(), [&](int id) { return std::count(ids.begin(), ids.end(), id) > 0; }), list.end());
  };
  drop(g.inputs, drop_inputs);
  drop(g.outputs, drop_outputs);
  // What still reaches an output must not read a removed input.
  Graph live = g;
  remove_dead_nodes(live);
  for (const Node& n : live.nodes)
    for (int in : n.inputs)
      if (in >= 0 && std::count(drop_inputs.begin(), drop_inputs.end(), in)) return {};
  link_producers(g);
  graph = std::move(g);
  return fused;
}

}  // namespace tern
