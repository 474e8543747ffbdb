#include "graph/fusions.h"

#include <algorithm>

namespace tern {

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
  std::vector<int> drop_inputs, drop_outputs;
  int fused = 0;
  for (Node& n : g.nodes) {
    if (n.op_type != "Attention" || !n.domain.empty() || n.inputs.size() < 6 || n.outputs.size() < 3) continue;
    const Node* rq = producer(n.inputs[0]);
    const Node* rk = producer(n.inputs[1]);
    if (!rq || !rk || rq->op_type != "RotaryEmbedding" || rk->op_type != "RotaryEmbedding" || !rq->domain.empty() ||
        !rk->domain.empty())
      continue;
    const int past_k = n.inputs[4], past_v = n.inputs[5], present_k = n.outputs[1], present_v = n.outputs[2];
    if (past_k < 0 || past_v < 0 || !is_input(past_k) || !is_input(past_v) || present_k < 0 || present_v < 0 ||
        !is_output(present_k) || !is_output(present_v))
      continue;
    if (n.attr_int("q_num_heads", 0) <= 0 || n.attr_float("softcap", 0) != 0 || n.outputs.size() > 3 ||
        rq->inputs[1] != rk->inputs[1] || rq->attr_int("interleaved", 0) != rk->attr_int("interleaved", 0))
      continue;
    Node c;
    c.name = n.name + "/cached";
    c.op_type = "CachedAttention";
    c.domain = "tern";
    c.inputs = {rq->inputs[0], rk->inputs[0], n.inputs[2], rq->inputs[1], rq->inputs[2], mask_id};
    c.outputs = {n.outputs[0]};
    for (const char* a : {"q_num_heads", "kv_num_heads", "scale"})
      if (const Attribute* at = n.attr(a)) c.attrs[a] = *at;
    for (const char* a : {"interleaved", "rotary_embedding_dim"})
      if (const Attribute* at = rq->attr(a)) c.attrs[a] = *at;
    Attribute w, s;
    w.i = opt.window;
    s.i = opt.sinks;
    c.attrs["window"] = w;
    c.attrs["sinks"] = s;
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
