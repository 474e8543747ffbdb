// Attention ops whose RoPE is visible: ONNX Attention-23/24 (and the opset-24 static cache), com.microsoft
// MultiHeadAttention and GroupQueryAttention.
#include "passes/attention/match.h"

namespace tern::attention {

// ---- attention ops with their RoPE visible (ONNX Attention, com.microsoft MHA / GQA) ----

// Where the operands of one fused-op attention pattern sit. RoPE inputs are (x, cos, sin) indices.
struct OpPattern {
  const char* attention_domain;
  const char* attention_op;
  int past_key, past_value;         // attention inputs
  int rope_x, rope_cos, rope_sin;   // RotaryEmbedding inputs (same domain as the attention)
  std::vector<int> must_be_absent;  // attention inputs this rewrite cannot honour
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
      input_of(*rq, pat.rope_sin) != input_of(*rk, pat.rope_sin) || rq->attr_int("interleaved", 0) != rk->attr_int("interleaved", 0) ||
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
    // GroupQueryAttention rotates the first 2 × cos_cache columns of each head: partial rotary (Phi-2) when that
    // is less than the head size.
    if (m.rank(s.cos) == 2 && m.dim(s.cos, 1) > 0) s.rotary_dim = 2 * m.dim(s.cos, 1);
    if (input_of(n, 9) >= 0) return why.stop(&n, "explicit position_ids (positions that are not the mask's)");
    s.pattern = std::string(s.k < 0 ? "packed-QKV " : "") + "GroupQueryAttention with do_rotary → CachedAttention";
  } else {
    if (!match_rope_pair(m, input_of(n, 0), input_of(n, 1), *pat, s))
      return why.stop(&n, "query and key do not both come from RotaryEmbedding with the same tables (tern stores keys before RoPE)");
    s.v = input_of(n, 2);
    s.pattern = (n.domain.empty() ? "RotaryEmbedding → " : "com.microsoft RotaryEmbedding → ") + n.op_type + " → CachedAttention";
  }
  if (n.op_type == "Attention") {
    if (!attention_masks_like_cache(m, n)) return why.stop(&n, "its mask is not causal + padding from attention_mask on a probe sequence");
    s.mask_bias = input_of(n, 3);  // past the probe's length it may hide keys beyond a sliding window (Gemma's local layers)
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

}  // namespace tern::attention
