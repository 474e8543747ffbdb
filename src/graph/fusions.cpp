#include "graph/fusions.h"

#include <algorithm>

namespace tern {

namespace {

// Where the operands of one attention pattern sit. RoPE inputs are (x, cos, sin) input indices.
struct AttentionPattern {
  const char* attention_domain;
  const char* attention_op;
  const char* rope_domain;
  int past_key, past_value;       // attention inputs
  int rope_x, rope_cos, rope_sin; // RotaryEmbedding inputs
  int must_be_absent;             // an attention input this rewrite cannot honour (-1: none)
};

// ONNX opset 23: RotaryEmbedding(x, cos, sin, pos) → Attention(q, k, v, mask, past_k, past_v).
// ONNX Runtime: RotaryEmbedding(x, pos, cos, sin) → MultiHeadAttention(q, k, v, bias, key_padding_mask,
// attention_bias, past_k, past_v); a packed bias is not supported here.
constexpr AttentionPattern kPatterns[] = {
    {"", "Attention", "", 4, 5, 0, 1, 2, -1},
    {"com.microsoft", "MultiHeadAttention", "com.microsoft", 6, 7, 0, 2, 3, 3},
};

}  // namespace

int fuse_cached_attention(Graph& g, const CachedAttentionOptions& opt) {
  link_producers(g);
  const int mask_id = g.find_value("attention_mask");
  if (mask_id < 0 || opt.window <= 0) return 0;
  auto is_input = [&](int id) { return std::find(g.inputs.begin(), g.inputs.end(), id) != g.inputs.end(); };
  auto is_output = [&](int id) { return std::find(g.outputs.begin(), g.outputs.end(), id) != g.outputs.end(); };
  auto producer = [&](int id) -> const Node* {
    const int p = id >= 0 ? g.values[static_cast<size_t>(id)].producer : -1;
    return p >= 0 ? &g.nodes[static_cast<size_t>(p)] : nullptr;
  };
  auto input = [](const Node& n, int i) { return i < static_cast<int>(n.inputs.size()) ? n.inputs[static_cast<size_t>(i)] : -1; };
  std::vector<int> drop_inputs, drop_outputs;
  int fused = 0;
  for (Node& n : g.nodes) {
    const AttentionPattern* pat = nullptr;
    for (const auto& p : kPatterns)
      if (n.op_type == p.attention_op && n.domain == p.attention_domain) pat = &p;
    if (!pat || n.outputs.size() != 3) continue;
    const Node* rq = producer(input(n, 0));
    const Node* rk = producer(input(n, 1));
    if (!rq || !rk || rq->op_type != "RotaryEmbedding" || rk->op_type != "RotaryEmbedding" || rq->domain != pat->rope_domain ||
        rk->domain != pat->rope_domain)
      continue;
    const int past_k = input(n, pat->past_key), past_v = input(n, pat->past_value);
    const int present_k = n.outputs[1], present_v = n.outputs[2];
    if (past_k < 0 || past_v < 0 || !is_input(past_k) || !is_input(past_v) || present_k < 0 || present_v < 0 ||
        !is_output(present_k) || !is_output(present_v))
      continue;
    if ((pat->must_be_absent >= 0 && input(n, pat->must_be_absent) >= 0) || n.attr_float("softcap", 0) != 0 ||
        input(*rq, pat->rope_cos) != input(*rk, pat->rope_cos) ||
        rq->attr_int("interleaved", 0) != rk->attr_int("interleaved", 0))
      continue;
    const int64_t heads = n.op_type == "Attention" ? n.attr_int("q_num_heads", 0) : n.attr_int("num_heads", 0);
    const int64_t kv_heads = n.op_type == "Attention" ? n.attr_int("kv_num_heads", 0) : heads;
    if (heads <= 0 || kv_heads <= 0) continue;  // 4-D layouts carry no head counts: not this pattern
    Node c;
    c.name = n.name + "/cached";
    c.op_type = "CachedAttention";
    c.domain = "tern";
    c.inputs = {input(*rq, pat->rope_x), input(*rk, pat->rope_x), input(n, 2), input(*rq, pat->rope_cos),
                input(*rq, pat->rope_sin), mask_id};
    c.outputs = {n.outputs[0]};
    auto set = [&](const char* k, int64_t v) { Attribute a; a.i = v; c.attrs[k] = a; };
    set("q_num_heads", heads);
    set("kv_num_heads", kv_heads);
    set("window", opt.window);
    set("sinks", opt.sinks);
    set("storage", static_cast<int64_t>(opt.storage));
    if (const Attribute* at = n.attr("scale")) c.attrs["scale"] = *at;
    for (const char* a : {"interleaved", "rotary_embedding_dim"})
      if (const Attribute* at = rq->attr(a)) c.attrs[a] = *at;
    drop_inputs.insert(drop_inputs.end(), {past_k, past_v});
    drop_outputs.insert(drop_outputs.end(), {present_k, present_v});
    n = std::move(c);
    ++fused;
  }
  auto drop = [](std::vector<int>& list, const std::vector<int>& ids) {
    list.erase(std::remove_if(list.begin(), list.end(), [&](int id) { return std::count(ids.begin(), ids.end(), id) > 0; }), list.end());
  };
  drop(g.inputs, drop_inputs);
  drop(g.outputs, drop_outputs);
  link_producers(g);
  return fused;
}

}  // namespace tern
