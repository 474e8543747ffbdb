#include "passes/fusions.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>
#include <optional>

#include "passes/matcher.h"
#include "passes/passes.h"

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
  float softcap = 0;                 // > 0: scores soft-capped (Gemma-2)
  int64_t local_window = 0;          // > 0: the layer attends to its last local_window keys (Mistral, Gemma)
  int mask_bias = -1, mask_gate = -1;  // decomposed: the mask, for reading its window off a long probe
  bool interleaved = false;
  int64_t rotary_dim = 0;            // 0: the head size
  std::string pattern;               // what matched, for `tern inspect --fusions`
  std::vector<int> heads_first;      // q/k/v values laid out [B, H, S, D] (the rewrite transposes them)
};

// Where and why one attempt to match stopped: the first reason recorded wins (the outer matcher
// records only what its helpers did not already explain).
struct Why {
  std::string node, reason;
  std::nullopt_t stop(const Node* n, std::string r) {
    if (reason.empty()) {
      node = n ? n->op_type + " '" + n->name + "'" : "";
      reason = std::move(r);
    }
    return std::nullopt;
  }
};

// Evaluates value `target` with graph inputs bound to tensors, by folding a copy of the nodes it depends
// on; nullopt when it depends on another input or does not fold (a binding whose shape the graph's
// folded constants contradict — a probe cache where the file's shapes are static — is one). A binding
// without data (Tensor(dtype, shape, nullptr)) gives its input a shape only: what reads its shape folds
// (Shape, and Shape of a Concat with it), what reads its data does not.
std::optional<Tensor> evaluate_with(const Graph& g, int target, const std::vector<std::pair<int, Tensor>>& bindings) {
  Graph h;
  h.values = g.values;
  h.opsets = g.opsets;
  std::vector<char> shaped(g.values.size(), 0);
  for (const auto& [input, bound] : bindings) {
    Value& in = h.values[static_cast<size_t>(input)];
    if (bound.buffer()) in.constant = bound;
    else shaped[static_cast<size_t>(input)] = 1;
    in.shape = sym_shape(bound.shape());
  }
  std::vector<char> needed(g.nodes.size(), 0);
  std::vector<int> stack{target};
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v < 0 || h.values[static_cast<size_t>(v)].constant) continue;
    if (shaped[static_cast<size_t>(v)]) continue;
    const int p = g.values[static_cast<size_t>(v)].producer;
    if (p < 0) return std::nullopt;  // another graph input
    if (needed[static_cast<size_t>(p)]) continue;
    needed[static_cast<size_t>(p)] = 1;
    stack.insert(stack.end(), g.nodes[static_cast<size_t>(p)].inputs.begin(), g.nodes[static_cast<size_t>(p)].inputs.end());
  }
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (needed[k]) h.nodes.push_back(g.nodes[k]);
  for (size_t i = 0; i < h.values.size(); ++i)
    if (!h.values[i].constant && !shaped[i]) h.values[i].shape.reset(), h.values[i].sym_value.reset();
  link_producers(h);
  try {
    infer_and_fold(h);
  } catch (const Error&) {
    return std::nullopt;
  }
  return h.values[static_cast<size_t>(target)].constant;
}

// The only consumer of `id`, when it is `op_type` (default domain) reading `id` as its first input.
const Node* only_consumer(const Matcher& m, int id, const char* op_type) {
  if (!m.single_use(id)) return nullptr;
  const Node& n = m.graph().nodes[static_cast<size_t>(m.consumers(id)[0])];
  return n.op_type == op_type && n.domain.empty() && n.inputs[0] == id ? &n : nullptr;
}

// The cache inputs of a graph: float inputs of rank 4 (past keys and values) or 5 (stacked past_N).
std::vector<int> cache_inputs(const Matcher& m) {
  std::vector<int> caches;
  for (int i : m.graph().inputs)
    if (is_float(m.value(i).dtype) && (m.rank(i) == 4 || m.rank(i) == 5)) caches.push_back(i);
  return caches;
}

// The one consumer of `id` other than Shape nodes, when it is `op_type` (default domain) reading `id` as
// its first input and `id` is no graph output.
const Node* data_consumer(const Matcher& m, int id, const char* op_type) {
  const Node* found = nullptr;
  for (int k : m.consumers(id)) {
    const Node& n = m.graph().nodes[static_cast<size_t>(k)];
    if (n.op_type == "Shape" && n.domain.empty()) continue;
    if (found) return nullptr;
    found = &n;
  }
  return found && !m.is_output(id) && found->op_type == op_type && found->domain.empty() && found->inputs[0] == id ? found : nullptr;
}

// Bindings for one sequence of `past` cached and `n` new tokens, as the generator feeds it:
// attention_mask `mask` (past + n entries; empty: all ones), input_ids zeros, position_ids as Hugging
// Face computes them (cumsum(mask) − 1) for the new tokens, and the rank-4 cache inputs holding `past`
// positions where their length is symbolic (a fixed-size static cache keeps its size) — as zeros
// (CacheBinding::Zeros), or, for sequences as long as a window, as shapes without data
// (CacheBinding::Shapes; see evaluate_with): bound as zeros, a default window of 131,072 positions would
// take 2 × layers × kv heads × head size × 4 bytes per position (8.6 GB for a Llama-3.2-1B shape).
enum class CacheBinding { Zeros, Shapes };
std::vector<std::pair<int, Tensor>> sequence_bindings(const Matcher& m, int64_t past, int64_t n, std::vector<int64_t> mask = {},
                                                      CacheBinding caches = CacheBinding::Zeros) {
  const Graph& g = m.graph();
  if (mask.empty()) mask.assign(static_cast<size_t>(past + n), 1);
  std::vector<std::pair<int, Tensor>> b;
  auto bind = [&](int id, const std::vector<int64_t>& v) {
    if (id >= 0 && m.is_input(id)) b.emplace_back(id, cast_to(Tensor::from_vector<int64_t>(v, {1, static_cast<int64_t>(v.size())}), m.value(id).dtype));
  };
  std::vector<int64_t> positions;
  for (int64_t i = 0, p = -1; i < past + n; ++i)
    if ((p += mask[static_cast<size_t>(i)]), i >= past) positions.push_back(std::max<int64_t>(p, 0));
  bind(g.find_value("attention_mask"), mask);
  bind(g.find_value("input_ids"), std::vector<int64_t>(static_cast<size_t>(n), 0));
  bind(g.find_value("position_ids"), positions);
  for (int c : cache_inputs(m)) {
    if (m.rank(c) != 4) continue;
    const Shape dims{1, std::max<int64_t>(m.dim(c, 1), 1), m.dim(c, 2) >= 0 ? m.dim(c, 2) : past, std::max<int64_t>(m.dim(c, 3), 1)};
    if (caches == CacheBinding::Shapes) {
      b.emplace_back(c, Tensor(m.value(c).dtype, dims, nullptr));
      continue;
    }
    Tensor zeros(m.value(c).dtype, dims);
    std::fill_n(static_cast<char*>(zeros.raw()), zeros.nbytes(), 0);
    b.emplace_back(c, zeros);
  }
  return b;
}

// The probe for what a graph derives from attention_mask (masks, indices, cache lengths): one sequence of
// kProbeTotal positions whose first is padding, kProbeNew of them new — mask 0 1 1 1 1, positions 2 3.
constexpr int64_t kProbeTotal = 5, kProbeNew = 2;
std::vector<std::pair<int, Tensor>> probe_bindings(const Matcher& m) {
  return sequence_bindings(m, kProbeTotal - kProbeNew, kProbeNew, {0, 1, 1, 1, 1});
}

// True when `bias` (an attention mask: bool, or additive float) — combined with a causal frontier when
// `causal` — lets new token i see exactly the unpadded positions up to its own on the probe: the
// causal + padding mask CachedAttention applies from attention_mask. Columns past the probe's length
// are not looked at (the callers mask them by length).
// `gate` (optional, bool) also shuts what it is false for: a mask applied by Where(gate, scores, min).
bool is_causal_padding_mask(const Matcher& m, int bias, bool causal, int gate = -1) {
  if (bias < 0) return false;
  const auto probe = probe_bindings(m);
  const auto t = evaluate_with(m.graph(), bias, probe);
  auto probe_shape_ok = [](const std::optional<Tensor>& x) {
    return x && x->rank() >= 2 && x->dim(-2) == kProbeNew && x->dim(-1) >= kProbeTotal && x->numel() == kProbeNew * x->dim(-1);
  };
  if (!probe_shape_ok(t)) return false;
  std::optional<Tensor> open_gate;
  if (gate >= 0 && !probe_shape_ok(open_gate = evaluate_with(m.graph(), gate, probe))) return false;
  const Tensor gf = open_gate ? cast_to(*open_gate, DType::Float32) : Tensor();
  const Tensor f = cast_to(*t, DType::Float32);  // bool: 1 = attend
  for (int64_t i = 0; i < kProbeNew; ++i)
    for (int64_t j = 0; j < kProbeTotal; ++j) {
      const bool want = j > 0 && j <= kProbeTotal - kProbeNew + i;
      const float v = f.data<float>()[i * t->dim(-1) + j];
      bool open = t->dtype() == DType::Bool ? v != 0 : v == 0;
      const bool shut = t->dtype() == DType::Bool ? v == 0 : v < -1e4f;
      if (!open && !shut) return false;
      if (causal && j > kProbeTotal - kProbeNew + i) open = false;
      if (open_gate && gf.data<float>()[i * open_gate->dim(-1) + j] == 0) open = false;
      if (open != want) return false;
    }
  return true;
}

// `id` evaluates on the probe to one integer per sequence equal to `expected`.
// ONNX Attention's masking (attn_mask input `bias`, is_causal) is CachedAttention's: causal, plus padding
// when a mask is given (an unpadded batch needs none).
bool attention_masks_like_cache(const Matcher& m, const Node& attention) {
  const int bias = input_of(attention, 3);
  const bool causal = attention.attr_int("is_causal", 0) != 0;
  return bias < 0 ? causal : is_causal_padding_mask(m, bias, causal);
}

bool probes_to(const Matcher& m, int id, int64_t expected) {
  const auto t = id >= 0 ? evaluate_with(m.graph(), id, probe_bindings(m)) : std::nullopt;
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

const OpPattern* op_pattern(const Node& n) {
  for (const auto& p : kOpPatterns)
    if (n.op_type == p.attention_op && n.domain == p.attention_domain) return &p;
  return nullptr;
}

std::optional<CachedAttentionSpec> match_attention_op(const Matcher& m, const Node& n, int mask, Why& why) {
  const OpPattern* pat = op_pattern(n);
  if (!pat) return std::nullopt;
  if (n.outputs.size() < 3) return why.stop(&n, "no present key/value outputs (the cache is not this node's)");
  CachedAttentionSpec s;
  s.attention_node = m.index_of(&n);
  s.past_k = input_of(n, pat->past_key);
  s.past_v = input_of(n, pat->past_value);
  s.present_k = n.outputs[1];
  s.present_v = n.outputs[2];
  for (int i : pat->must_be_absent)
    if (input_of(n, i) >= 0) return why.stop(&n, "input " + std::to_string(i) + " is set (an attention bias the ring cannot apply)");
  s.softcap = n.attr_float("softcap", 0);
  if (n.attr_int("smooth_softmax", 0) != 0) return why.stop(&n, "smooth_softmax attribute");
  s.local_window = std::max<int64_t>(n.attr_int("local_window_size", -1), 0);  // GQA: keys j > position − W
  const bool gqa = n.op_type == "GroupQueryAttention";
  if (gqa && !m.depends_only_on(input_of(n, 5), {mask}))  // seqlens_k from attention_mask
    return why.stop(&n, "seqlens_k is not computed from attention_mask alone");
  if (gqa && n.attr_int("do_rotary", 0) != 0) {
    s.q = input_of(n, 0);
    s.k = input_of(n, 1);
    s.v = input_of(n, 2);
    if ((s.k < 0) != (s.v < 0)) return why.stop(&n, "key given without value (or value without key)");
    s.cos = input_of(n, 7);
    s.sin = input_of(n, 8);
    s.interleaved = n.attr_int("rotary_interleaved", 0) != 0;
    if (input_of(n, 9) >= 0) return why.stop(&n, "explicit position_ids (positions that are not the mask's)");
    s.pattern = std::string(s.k < 0 ? "packed-QKV " : "") + "GroupQueryAttention with do_rotary → CachedAttention";
  } else {
    if (!match_rope_pair(m, input_of(n, 0), input_of(n, 1), *pat, s))
      return why.stop(&n, "query and key do not both come from RotaryEmbedding with the same tables (tern stores keys before RoPE)");
    s.v = input_of(n, 2);
    s.pattern = (n.domain.empty() ? "RotaryEmbedding → " : "com.microsoft RotaryEmbedding → ") + n.op_type + " → CachedAttention";
  }
  if (n.op_type == "Attention") {
    if (!attention_masks_like_cache(m, n))
      return why.stop(&n, "its mask is not causal + padding from attention_mask on a probe sequence");
    s.q_heads = n.attr_int("q_num_heads", 0);
    s.kv_heads = n.attr_int("kv_num_heads", 0);
  } else {
    s.q_heads = n.attr_int("num_heads", 0);
    s.kv_heads = gqa ? n.attr_int("kv_num_heads", 0) : s.q_heads;
  }
  if (s.q_heads <= 0 || s.kv_heads <= 0) return why.stop(&n, "no head counts (a 4-D layout; not a cache this pattern reads)");
  if (n.has_attr("scale")) s.scale = n.attr_float("scale", 1);
  return s;
}

// ---- decomposed attention (torch.onnx.export, the dynamo exporter, Optimum) ----

// Collects the nodes a decomposed match consumed (they die once the attention is replaced).
struct Decomposed {
  const Matcher& m;
  Why& why;
  std::vector<int> nodes;
  std::vector<int> heads_first;  // see CachedAttentionSpec
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
  int64_t rotary_dim = 0;  // 0: the whole head
};
std::optional<RotateHalf> match_rotate_half(Decomposed& d, int y) {
  const Matcher& m = d.m;
  const Node* add = m.op(y, "Add");
  if (!add) return d.why.stop(m.producer(y), "expected RoPE's Add(x·cos, rotate_half(x)·sin) here (keys are stored before RoPE)");
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
  return d.why.stop(add, "an Add that is not x·cos + Concat(−x[D/2:], x[:D/2])·sin over the whole head (rotate-half RoPE)");
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
  return RotateHalf{x, rope->cos, rope->sin, r < D ? r : 0};
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

// Data-movement nodes (any spelling of repeat_kv and of a transpose of the last two axes) read back from
// an attention operand: `chain` from the operand up, and `source`, the value they read.
struct MovesBack {
  std::vector<const Node*> chain;
  int source = -1;
};
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

// Whether `operand`, computed from the [B, kv_heads, T, D] value `source`, is repeat_kv of it to `heads`
// heads — each query head h reads KV head h / (heads / kv_heads) — with, for `keys`, the last two axes
// swapped. Checked by running the nodes between on a probe whose every element is distinct.
bool reads_as_repeat_kv(const Matcher& m, int operand, int source, bool keys, int64_t heads) {
  const int64_t kv_heads = m.dim(source, 1), D = m.dim(source, 3);
  if (m.rank(source) != 4 || kv_heads <= 0 || D <= 0 || heads % kv_heads) return false;
  constexpr int64_t T = kProbeTotal;
  Tensor probe(DType::Float32, {1, kv_heads, T, D});
  for (int64_t i = 0; i < probe.numel(); ++i) probe.data<float>()[i] = static_cast<float>(i);
  auto bindings = probe_bindings(m);
  std::erase_if(bindings, [&](const auto& b) { return b.first == source; });
  bindings.emplace_back(source, cast_to(probe, m.value(source).dtype));
  const auto got = evaluate_with(m.graph(), operand, bindings);
  const std::vector<int64_t> want_shape = keys ? std::vector<int64_t>{1, heads, D, T} : std::vector<int64_t>{1, heads, T, D};
  if (!got || got->shape() != want_shape) return false;
  const Tensor f = cast_to(*got, DType::Float32);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < D; ++e) {
        const int64_t at = keys ? (h * D + e) * T + t : (h * T + t) * D + e;
        if (f.data<float>()[at] != static_cast<float>(((h / (heads / kv_heads)) * T + t) * D + e)) return false;
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
    return d.why.stop(w.chain.empty() ? cat : w.chain.front(),
                      std::string("the ") + what + " are not read as repeat_kv of the cache" + (keys ? " with the last two axes swapped" : "") +
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
  if (q_rope->cos != k_rope->cos || q_rope->sin != k_rope->sin || q_rope->rotary_dim != k_rope->rotary_dim)
    return why.stop(qk, "queries and keys rotate with different cos/sin");
  s.rotary_dim = q_rope->rotary_dim;
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
  s.pattern = no_rope ? "decomposed attention (no RoPE, scale, mask, Softmax) → CachedAttention"
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

// ---- ONNX opset-24 static cache ----
// Fixed-size past buffers [B, KV, capacity, D] that TensorScatter updates at write index = past length,
// read whole by a 4-D Attention-24 whose nonpad_kv_seqlen = past + new tokens:
//   q = RotaryEmbedding(Transpose(Reshape(q_proj)));  present.k = TensorScatter(past.k, RotaryEmbedding(k), idx)
//   present.v = TensorScatter(past.v, Transpose(Reshape(v_proj)), idx)
//   out = Reshape(Transpose(Attention(q, present.k, present.v, mask, nonpad_kv_seqlen)))
// The write index, lengths and mask are checked on a probe sequence.
// Only reached for an Attention-24 that reads no past inputs (match_attention_op takes those).
std::optional<CachedAttentionSpec> match_static_cache_attention(const Matcher& m, const Node& n, Why& why) {
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] >= 0 && (!m.consumers(n.outputs[k]).empty() || m.is_output(n.outputs[k])))
      return why.stop(&n, "its present outputs are read (expected a static cache written by TensorScatter)");
  const Node* kc = m.op(input_of(n, 1), "TensorScatter");
  const Node* vc = m.op(input_of(n, 2), "TensorScatter");
  if (!kc || !vc || m.rank(kc->outputs[0]) != 4)
    return why.stop(&n, "keys and values are neither past inputs nor 4-D TensorScatter static caches");
  for (const Node* c : {kc, vc}) {
    const int64_t axis = c->attr_int("axis", -2);
    if ((axis != -2 && axis != 2) || input_of(*c, 2) != input_of(*kc, 2))
      return why.stop(c, "the static caches are not written on the sequence axis at one shared index");
  }
  constexpr int64_t kCached = kProbeTotal - kProbeNew;
  if (!probes_to(m, input_of(*kc, 2), kCached)) return why.stop(kc, "the write index is not the past length on a probe");
  if (!probes_to(m, input_of(n, 6), kProbeTotal)) return why.stop(&n, "nonpad_kv_seqlen is not the total length on a probe");
  if (!attention_masks_like_cache(m, n)) return why.stop(&n, "its mask is not causal + padding from attention_mask on a probe");
  CachedAttentionSpec s;
  if (!match_rope_pair(m, input_of(n, 0), kc->inputs[1], kOpPatterns[0], s))
    return why.stop(&n, "query and key do not both come from RotaryEmbedding with the same tables (tern stores keys before RoPE)");
  s.q_heads = m.dim(s.q, 1);
  s.kv_heads = m.dim(s.k, 1);
  const int64_t D = m.dim(s.q, 3);
  Decomposed d{m, why, {}, {}};  // the nodes they leave behind die with the Attention
  s.q = match_split_heads(d, s.q);
  s.k = s.q >= 0 ? match_split_heads(d, s.k) : -1;
  s.v = s.k >= 0 ? match_split_heads(d, vc->inputs[1]) : -1;
  if (s.q < 0 || s.k < 0 || s.v < 0) return std::nullopt;
  const Node* out = match_merge_heads(m, n.outputs[0], s.q_heads * D);
  if (!out || s.q_heads <= 0 || s.kv_heads <= 0 || D <= 0)
    return why.stop(&n, "its output is not merged back to [B, S, H, D] by Transpose(0, 2, 1, 3)");
  s.past_k = kc->inputs[0];
  s.past_v = vc->inputs[0];
  s.present_k = kc->outputs[0];
  s.present_v = vc->outputs[0];
  if (n.has_attr("scale")) s.scale = n.attr_float("scale", 1);
  s.softcap = n.attr_float("softcap", 0);
  s.attention_node = m.index_of(out);
  s.pattern = "static cache (TensorScatter, RotaryEmbedding → Attention-24 nonpad_kv_seqlen) → CachedAttention";
  return s;
}

// cos/sin of the decomposed form ([.., W, D] with equal halves) as the [W, D/2] tables CachedAttention
// reads, by evaluating them for positions 0…W−1. They must come from position_ids, or — exports without
// them (Optimum's Gemma-2) — from the cache length: each chunk of kRopeChunk rows is evaluated as the
// generator feeds a chunk after `start` cached tokens, and its last row again as one token after all
// before it (a graph that ignored the cache length would fail there). In at most 64 chunks of at least
// 4096 rows, because a window of 10^6 positions evaluated whole took 2.3 GB of intermediates for a table
// of 256 MB (issue 53), and each chunk binds a mask as long as all rows before it. Fails (nullopt, with
// why) when they are not of that form.
std::optional<std::pair<Tensor, Tensor>> rope_tables(const Matcher& m, int cos, int sin, int64_t W, int64_t D, Why& why) {
  const int64_t kRopeChunk = std::max<int64_t>(4096, (W + 63) / 64);
  const Graph& g = m.graph();
  const int positions = g.find_value("position_ids");
  const std::vector<int> from = positions >= 0 && m.is_input(positions) ? std::vector<int>{positions} : std::vector<int>{};
  if (!m.depends_only_on(cos, from, true) || !m.depends_only_on(sin, from, true))
    return why.stop(m.producer(cos), "cos/sin are not computed from position_ids or the cache length (tern evaluates them for window positions)");
  std::pair<Tensor, Tensor> tables{Tensor(DType::Float32, {W, D / 2}), Tensor(DType::Float32, {W, D / 2})};
  for (int64_t start = 0; start < W; start += kRopeChunk) {
    const int64_t n = std::min(kRopeChunk, W - start);
    const auto chunk = sequence_bindings(m, start, n, {}, CacheBinding::Shapes);
    const auto last = sequence_bindings(m, start + n - 1, 1, {}, CacheBinding::Shapes);
    for (int which = 0; which < 2; ++which) {
      const int value = which ? sin : cos;
      const auto rows = evaluate_with(g, value, chunk);
      const auto one = evaluate_with(g, value, last);
      if (!rows || rows->numel() != n * D || rows->dim(-1) != D)
        return why.stop(m.producer(value), "cos/sin do not evaluate to [positions, head size] tables");
      const Tensor f = cast_to(*rows, DType::Float32);
      if (!one || one->numel() != D ||
          std::memcmp(cast_to(*one, DType::Float32).raw(), f.data<float>() + (n - 1) * D, static_cast<size_t>(D) * sizeof(float)) != 0)
        return why.stop(m.producer(value), "cos/sin for a token after all before it cached are not that position's row of the table");
      float* half = (which ? tables.second : tables.first).data<float>() + start * (D / 2);
      for (int64_t w = 0; w < n; ++w)
        for (int64_t j = 0; j < D / 2; ++j) {
          const float a = f.data<float>()[w * D + j], b = f.data<float>()[w * D + D / 2 + j];
          if (a != b) return why.stop(m.producer(value), "cos/sin halves differ (not the rotate-half layout)");
          half[w * (D / 2) + j] = a;
        }
    }
  }
  return tables;
}

// The first node, in graph order, that a layer's attention pattern starts from (a Softmax, or an
// attention op) and that a cache input flows into — or, for values, whose probabilities meet it in
// MatMul(P, V): where to look for why that layer did not fuse. Shape reads (mask lengths) do not count.
int attention_anchor(const Matcher& m, int cache) {
  std::vector<char> seen(m.graph().values.size(), 0);
  std::vector<int> stack{cache};
  int best = -1;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(v)]) continue;
    seen[static_cast<size_t>(v)] = 1;
    for (int k : m.consumers(v)) {
      const Node& n = m.graph().nodes[static_cast<size_t>(k)];
      if (n.op_type == "Shape") continue;
      if ((n.op_type == "Softmax" && n.domain.empty()) || op_pattern(n)) {
        if (best < 0 || k < best) best = k;
        continue;
      }
      if (n.op_type == "MatMul")  // P·V: the Softmax a few nodes up the other operand (Cast, Where(IsNaN)…)
        for (int in : n.inputs) {
          std::vector<std::pair<int, int>> up{{in, 0}};
          while (!up.empty()) {
            const auto [u, depth] = up.back();
            up.pop_back();
            const Node* p = m.producer(u);
            if (!p || depth > 3) continue;
            if (p->op_type == "Softmax") {
              if (best < 0 || m.index_of(p) < best) best = m.index_of(p);
              continue;
            }
            for (int x : p->inputs) up.emplace_back(x, depth + 1);
          }
        }
      for (int o : n.outputs)
        if (o >= 0) stack.push_back(o);
    }
  }
  return best;
}

// The keys a decomposed mask lets the last of W tokens see: all W (0 returned), or only the last w < W —
// a sliding window (Mistral, Gemma's local layers) — read off one unpadded sequence of W tokens whose
// last is new. nullopt when the visible keys are not such a suffix.
std::optional<int64_t> mask_window(const Matcher& m, int bias, int gate, int64_t W) {
  const auto bindings = sequence_bindings(m, W - 1, 1, {}, CacheBinding::Shapes);
  const auto t = evaluate_with(m.graph(), bias, bindings);
  const auto gt = gate >= 0 ? evaluate_with(m.graph(), gate, bindings) : std::nullopt;
  if (!t || t->numel() < W || (gate >= 0 && (!gt || gt->numel() < W))) return std::nullopt;
  const Tensor f = cast_to(*t, DType::Float32), gf = gt ? cast_to(*gt, DType::Float32) : Tensor();
  int64_t visible = 0;
  bool suffix = true;
  for (int64_t j = W - 1; j >= 0; --j) {
    const float v = f.data<float>()[j];
    bool open = t->dtype() == DType::Bool ? v != 0 : v == 0;
    if (gt && gf.data<float>()[j] == 0) open = false;
    if (open && !suffix) return std::nullopt;  // a hole: not a window
    if (open) ++visible;
    else suffix = false;
  }
  return visible == W ? 0 : visible;
}

// A new constant value of `g` holding `t`.
int add_constant(Graph& g, const std::string& name, const Tensor& t) {
  const int id = g.add_value(name);
  Value& v = g.values[static_cast<size_t>(id)];
  v.dtype = t.dtype();
  v.shape = sym_shape(t.shape());
  v.constant = t;
  return id;
}

// A Reshape of `in` to constant `dims` (0 copies a dim) writing `out` (a new value when -1).
Node reshape_node(Graph& g, const std::string& name, int in, std::vector<int64_t> dims, int out = -1) {
  Node r;
  r.name = name;
  r.op_type = "Reshape";
  const int64_t rank = static_cast<int64_t>(dims.size());
  r.inputs = {in, add_constant(g, name + "/shape", Tensor::from_vector<int64_t>(std::move(dims), {rank}))};
  r.outputs = {out >= 0 ? out : g.add_value(name)};
  return r;
}

// Puts each rewrite's nodes where the node it replaces was (ascending node indices; the rest of each
// pattern is left for remove_dead_nodes).
void replace_with(Graph& g, std::vector<std::pair<size_t, std::vector<Node>>>& rewrites) {
  if (rewrites.empty()) return;
  std::vector<Node> nodes;
  size_t next = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (next < rewrites.size() && rewrites[next].first == k) {
      for (Node& n : rewrites[next].second) nodes.push_back(std::move(n));
      ++next;
    } else {
      nodes.push_back(std::move(g.nodes[k]));
    }
  }
  g.nodes = std::move(nodes);
  link_producers(g);
}

}  // namespace

std::string FusionMiss::str() const {
  return layer + ": " + (node.empty() ? "" : node + ": ") + reason;
}

CachedAttentionFusion fuse_cached_attention(Graph& graph, const CachedAttentionOptions& opt) {
  link_producers(graph);
  const int mask = graph.find_value("attention_mask");
  const int ids = graph.find_value("input_ids");
  if (opt.window <= 0) return {};
  const Matcher m(graph);
  const std::vector<int> caches = cache_inputs(m);
  if (caches.empty()) return {};  // nothing to take over
  CachedAttentionFusion result;
  if (mask < 0) {
    result.missed.push_back({"all layers", "", "the graph has no attention_mask input (tern's cache reads its positions from it)"});
    return result;
  }
  Graph g = graph;  // rewritten on a copy: kept only if every layer fuses
  std::vector<CachedAttentionSpec> specs;
  std::map<int, Why> why;  // anchor node → why its match stopped
  std::map<std::pair<int, int>, std::pair<int, int>> tables;  // graph cos/sin → table values
  for (const Node& n : graph.nodes) {
    const int k = m.index_of(&n);
    std::optional<CachedAttentionSpec> s;
    if (op_pattern(n)) {
      const bool static24 = n.op_type == "Attention" && input_of(n, 4) < 0 && input_of(n, 5) < 0;
      s = static24 ? match_static_cache_attention(m, n, why[k]) : match_attention_op(m, n, mask, why[k]);
    } else if (n.op_type == "Softmax" && n.domain.empty()) {
      s = match_decomposed(m, n, mask, ids, why[k]);
      if (s && s->cos >= 0) {
        auto known = tables.find({s->cos, s->sin});  // layers share one cos/sin: one pair of tables
        if (known == tables.end()) {
          const int64_t D = s->rotary_dim ? s->rotary_dim : m.rank(s->q) == 4 ? m.dim(s->q, 3) : m.dim(s->q, 2) / s->q_heads;
          auto t = rope_tables(m, s->cos, s->sin, opt.window, D, why[k]);
          if (!t) continue;
          known = tables.emplace(std::pair{s->cos, s->sin}, std::pair{add_constant(g, n.name + "/rope_cos_table", t->first),
                                                                       add_constant(g, n.name + "/rope_sin_table", t->second)}).first;
        }
        std::tie(s->cos, s->sin) = known->second;
      }
    }
    if (!s) continue;
    if (s->mask_bias >= 0) {  // a decomposed mask may hide keys past a sliding window
      const auto w = mask_window(m, s->mask_bias, s->mask_gate, opt.window);
      if (!w) {
        why[k].stop(&n, "its mask hides keys other than those past a sliding window (checked over the window)");
        continue;
      }
      s->local_window = *w;
    }
    // Only layers whose cache the graph takes in and gives out: the ring replaces exactly that.
    if (s->past_k < 0 || s->past_v < 0 || !m.is_input(s->past_k) || !m.is_input(s->past_v) || !m.is_output(s->present_k) ||
        !m.is_output(s->present_v)) {
      why[k].stop(&n, "its past keys/values are not graph inputs, or its present ones not graph outputs");
      continue;
    }
    specs.push_back(*s);
  }
  // Every cache input must belong to a match: the generator runs one cache kind for all layers.
  std::map<int, std::string> unmatched;  // anchor → the cache inputs that reach it
  for (int c : caches) {
    if (std::any_of(specs.begin(), specs.end(), [&](const CachedAttentionSpec& s) { return s.past_k == c || s.past_v == c; })) continue;
    std::string& names = unmatched[attention_anchor(m, c)];
    names += (names.empty() ? "" : ", ") + m.value(c).name;
  }
  for (const auto& [anchor, names] : unmatched) {
    if (anchor < 0) {
      result.missed.push_back({names, "", "no Softmax or attention op reads it"});
      continue;
    }
    const Why& w = why[anchor];
    const Node& a = graph.nodes[static_cast<size_t>(anchor)];
    result.missed.push_back({names, w.reason.empty() ? a.op_type + " '" + a.name + "'" : w.node,
                             w.reason.empty() ? "matched no ring-buffer pattern" : w.reason});
  }
  if (!result.missed.empty()) return result;

  std::vector<int> drop_inputs, drop_outputs;
  std::map<int, std::vector<Node>, std::greater<>> before;  // new nodes, in order, to go right before the node at each index
  // [B, S, H, D] → Reshape(·, [0, 0, −1]) → [B, S, H·D], the layout CachedAttention reads; heads-first
  // [B, H, S, D] are transposed to [B, S, H, D] first.
  auto flatten_heads = [&](int id, int at, const std::vector<int>& heads_first) {
    if (m.rank(id) != 4) return id;
    if (std::count(heads_first.begin(), heads_first.end(), id)) {
      Node t;
      t.name = m.value(id).name + "/seq_first";
      t.op_type = "Transpose";
      t.attrs["perm"].kind = Attribute::Kind::Ints;
      t.attrs["perm"].ints = {0, 2, 1, 3};
      t.inputs = {id};
      t.outputs = {g.add_value(t.name)};
      id = t.outputs[0];
      before[at].push_back(std::move(t));
    }
    Node r = reshape_node(g, g.values[static_cast<size_t>(id)].name + "/flatten_heads", id, {0, 0, -1});
    const int out = r.outputs[0];
    before[at].push_back(std::move(r));
    return out;
  };
  for (CachedAttentionSpec s : specs) {
    for (int* x : {&s.q, &s.k, &s.v}) *x = flatten_heads(*x, s.attention_node, s.heads_first);
    Node& n = g.nodes[static_cast<size_t>(s.attention_node)];
    Node c;
    c.name = n.name + "/cached";
    c.op_type = "CachedAttention";
    c.domain = "tern";
    c.inputs = {s.q, s.k, s.v, s.cos, s.sin, mask};
    c.outputs = {n.outputs[0]};
    if (n.op_type == "Transpose") {  // the heads go on as [B, S, H, D]: rebuilt from [B, S, H·D] after it
      c.outputs = {g.add_value(c.name)};
      before[s.attention_node + 1].push_back(
          reshape_node(g, c.name + "/split_heads", c.outputs[0], {0, 0, s.q_heads, m.dim(n.outputs[0], 3)}, n.outputs[0]));
    }
    auto set = [&](const char* k, int64_t v) {
      Attribute a;
      a.i = v;
      c.attrs[k] = a;
    };
    set("q_num_heads", s.q_heads);
    set("kv_num_heads", s.kv_heads);
    // A layer with a local window shorter than the ring's is exactly a ring of that many slots, no sinks.
    const bool local = s.local_window > 0 && s.local_window < opt.window;
    set("window", local ? s.local_window : opt.window);
    set("sinks", local ? 0 : opt.sinks);
    set("storage", static_cast<int64_t>(opt.storage));
    set("interleaved", s.interleaved);
    if (s.rotary_dim) set("rotary_embedding_dim", s.rotary_dim);
    for (const auto& [name, value] : {std::pair{"scale", s.scale}, std::pair{"softcap", s.softcap ? std::optional(s.softcap) : std::nullopt}})
      if (value) {
        Attribute a;
        a.kind = Attribute::Kind::Float;
        a.f = *value;
        c.attrs[name] = a;
      }
    drop_inputs.insert(drop_inputs.end(), {s.past_k, s.past_v});
    drop_outputs.insert(drop_outputs.end(), {s.present_k, s.present_v});
    result.fused.push_back({s.pattern + (local ? " (sliding window of " + std::to_string(s.local_window) + ", no sinks)" : ""), c.name});
    n = std::move(c);
  }
  for (auto& [at, nodes] : before) g.nodes.insert(g.nodes.begin() + at, nodes.begin(), nodes.end());
  auto drop = [](std::vector<int>& list, const std::vector<int>& ids) {
    list.erase(std::remove_if(list.begin(), list.end(), [&](int id) { return std::count(ids.begin(), ids.end(), id) > 0; }), list.end());
  };
  drop(g.inputs, drop_inputs);
  drop(g.outputs, drop_outputs);
  // Shape(past)[0:1] — the batch size, which the dynamo exporter reads from whichever input has it —
  // reads attention_mask instead: the same dim, and it stays.
  for (Node& n : g.nodes) {
    if (n.op_type != "Shape" || !n.domain.empty() || !std::count(drop_inputs.begin(), drop_inputs.end(), n.inputs[0])) continue;
    const auto& past = *g.values[static_cast<size_t>(n.inputs[0])].shape;
    const auto& mask_shape = g.values[static_cast<size_t>(mask)].shape;
    const int64_t r = static_cast<int64_t>(past.size()), start = n.attr_int("start", 0), end = n.attr_int("end", r);
    if ((start == 0 || start == -r) && (end == 1 || end == 1 - r) && mask_shape && !mask_shape->empty() && (*mask_shape)[0] == past[0])
      n.inputs[0] = mask;
  }
  // What still reaches an output must not read a removed input.
  Graph live = g;
  remove_dead_nodes(live);
  for (const Node& n : live.nodes)
    for (int in : n.inputs)
      if (in >= 0 && std::count(drop_inputs.begin(), drop_inputs.end(), in)) {
        result.missed.push_back({graph.values[static_cast<size_t>(in)].name, n.op_type + " '" + n.name + "'",
                                 "reads the cache, and something besides the attention still needs what it computes "
                                 "(another node or graph output)"});
        result.fused.clear();
        return result;
      }
  link_producers(g);
  graph = std::move(g);
  return result;
}

std::vector<Fusion> fuse_kv_matmuls(Graph& g) {
  link_producers(g);
  const Matcher m(g);
  std::vector<std::pair<size_t, std::vector<Node>>> rewrites;  // node index → the nodes that replace it
  std::vector<Fusion> fused;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node mm = g.nodes[k];
    if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2 || m.rank(mm.inputs[0]) != 4) continue;
    const int64_t heads = m.dim(mm.inputs[0], 1);
    int b = mm.inputs[1];
    double alpha = 1;  // a constant factor on the cache side (the √scale exporters put on both Q and Kᵀ)
    if (const Node* s = m.producer(b); s && s->domain.empty() && m.single_use(b) && (s->op_type == "Mul" || s->op_type == "Div")) {
      const auto c1 = m.scalar(s->inputs[1]), c0 = s->op_type == "Mul" ? m.scalar(s->inputs[0]) : std::nullopt;
      if (c1) alpha = s->op_type == "Mul" ? *c1 : 1.0 / *c1, b = s->inputs[0];
      else if (c0) alpha = *c0, b = s->inputs[1];
    }
    const MovesBack w = walk_moves_back(m, b);
    if (heads <= 0 || w.chain.empty() || m.rank(w.source) != 4 || !is_float(m.value(w.source).dtype)) continue;
    const bool keys = reads_as_repeat_kv(m, b, w.source, true, heads);
    if (!keys && !reads_as_repeat_kv(m, b, w.source, false, heads)) continue;
    const int64_t kv_heads = m.dim(w.source, 1);
    // [B, H, S, X] = [B, kv_heads, group·S, X] (query head h = kv_head · group + j): each KV head's group of
    // query rows is one matrix product over the cache as it lies, instead of one per query head over a copy.
    std::vector<Node> nodes;
    int a = mm.inputs[0];
    if (kv_heads != heads) {
      nodes.push_back(reshape_node(g, mm.name + "/kv_groups", a, {0, kv_heads, -1, 0}));
      a = nodes.back().outputs[0];
    }
    Node p;
    p.name = mm.name + "/kv_read";
    p.op_type = "MatMul";
    if (keys || alpha != 1) {
      p.op_type = "FusedMatMul";
      p.domain = "com.microsoft";
      Attribute t, f;
      t.i = keys ? 1 : 0;
      f.kind = Attribute::Kind::Float;
      f.f = static_cast<float>(alpha);
      p.attrs["transB"] = t;
      p.attrs["alpha"] = f;
    }
    p.inputs = {a, w.source};
    p.outputs = {kv_heads != heads ? g.add_value(p.name) : mm.outputs[0]};
    nodes.push_back(p);
    if (kv_heads != heads) nodes.push_back(reshape_node(g, mm.name + "/heads", p.outputs[0], {0, heads, -1, 0}, mm.outputs[0]));
    fused.push_back({std::string(keys ? "Q·Kᵀ" : "P·V") + " over repeat_kv" + (keys ? " and a transpose" : "") +
                         " → grouped product on the cache as stored",
                     mm.name});
    rewrites.emplace_back(k, std::move(nodes));
  }
  replace_with(g, rewrites);
  return fused;
}


std::vector<Fusion> fuse_rotary_embedding(Graph& g) {
  link_producers(g);
  const Matcher m(g);
  std::vector<char> taken(g.nodes.size(), 0);
  std::vector<std::pair<size_t, std::vector<Node>>> rewrites;
  std::vector<Fusion> fused;
  const auto probe = probe_bindings(m);
  // Whether a table is cat(freqs, freqs) over its last `rot` elements, on the probe: every layer reads the
  // same two tables, so each is evaluated once.
  std::map<std::pair<int, int64_t>, bool> checked;
  auto halves_equal = [&](int table, int64_t rot) {
    auto [it, fresh] = checked.emplace(std::pair{table, rot}, false);
    if (!fresh) return it->second;
    const auto t = evaluate_with(g, table, probe);
    bool equal = t && t->numel() % rot == 0;
    const Tensor f = equal ? cast_to(*t, DType::Float32) : Tensor();
    for (int64_t i = 0; equal && i < t->numel(); ++i)
      equal = f.data<float>()[i] == f.data<float>()[i - i % rot + (i % rot + rot / 2) % rot];
    return it->second = equal;
  };
  for (size_t k = g.nodes.size(); k-- > 0;) {  // last first: a partial rotary's Concat before its inner Add
    const Node& root = g.nodes[k];
    if (taken[k] || !root.domain.empty() || (root.op_type != "Add" && root.op_type != "Concat") || root.outputs.size() != 1) continue;
    Why why;
    Decomposed d{m, why, {}, {}};
    const auto rope = match_rope(d, root.outputs[0]);
    if (!rope || m.rank(rope->x) != 4) continue;
    const int64_t D = m.dim(rope->x, 3), rot = rope->rotary_dim ? rope->rotary_dim : D;
    // The op reads cos/sin as [B, S, rot/2] rows: the graph's must be [B, 1, S, rot] (or [B, S, rot]) over
    // the same B and S as x, with equal halves (cat(freqs, freqs)) — the halves checked on a probe.
    const auto& xs = *m.value(rope->x).shape;
    bool fits = D > 0 && rot > 0 && rot % 2 == 0;
    for (int table : {rope->cos, rope->sin}) {
      const auto& ts = m.value(table).shape;
      const int64_t r = m.rank(table);
      fits = fits && ts && (r == 3 || (r == 4 && m.dim(table, 1) == 1)) && (*ts)[0] == xs[0] && (*ts)[static_cast<size_t>(r - 2)] == xs[2] &&
             m.dim(table, -1) == rot;
      if (fits) fits = halves_equal(table, rot);
    }
    if (!fits) continue;
    std::vector<Node> nodes;
    auto first_half = [&](int table, const char* what) {
      Node sl;
      sl.name = root.name + "/rope_" + what + "_half";
      sl.op_type = "Slice";
      sl.opset = 13;  // bounds as inputs
      sl.inputs = {table, add_constant(g, sl.name + "/starts", Tensor::from_vector<int64_t>({0}, {1})),
                   add_constant(g, sl.name + "/ends", Tensor::from_vector<int64_t>({rot / 2}, {1})),
                   add_constant(g, sl.name + "/axes", Tensor::from_vector<int64_t>({-1}, {1}))};
      sl.outputs = {g.add_value(sl.name)};
      nodes.push_back(sl);
      return sl.outputs[0];
    };
    Node r;
    r.name = root.name + "/rotary_embedding";
    r.op_type = "RotaryEmbedding";
    r.inputs = {rope->x, first_half(rope->cos, "cos"), first_half(rope->sin, "sin")};
    r.outputs = root.outputs;
    if (rope->rotary_dim) {
      Attribute a;
      a.i = rot;
      r.attrs["rotary_embedding_dim"] = a;
    }
    nodes.push_back(r);
    for (int n : d.nodes) taken[static_cast<size_t>(n)] = 1;
    fused.push_back({std::string("rotate-half RoPE (Slice, Neg, Concat, Mul, Add") + (rope->rotary_dim ? ", partial" : "") + ") → RotaryEmbedding", root.name});
    rewrites.emplace_back(k, std::move(nodes));
  }
  std::reverse(rewrites.begin(), rewrites.end());
  replace_with(g, rewrites);
  return fused;
}

}  // namespace tern
