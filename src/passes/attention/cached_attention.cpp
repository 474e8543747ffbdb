// fuse_cached_attention: every layer's matched attention → one CachedAttention node over tern's KV ring.
#include <algorithm>
#include <map>
#include <tuple>

#include "passes/attention/attention.h"
#include "passes/attention/match.h"
#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace tern {
using namespace attention;

namespace {

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

}  // namespace

std::string FusionMiss::str() const { return layer + ": " + (node.empty() ? "" : node + ": ") + reason; }

CachedAttentionFusion fuse_cached_attention(Graph& graph, const CachedAttentionOptions& opt) {
  link_producers(graph);
  const int mask = graph.find_value("attention_mask");
  const int ids = graph.find_value("input_ids");
  if (opt.ring_capacity <= 0) return {};
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
  std::map<int, Why> why;                                     // anchor node → why its match stopped
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
          auto t = rope_tables(m, s->cos, s->sin, opt.ring_capacity, D, s->interleaved, why[k]);
          if (!t) continue;
          known = tables
                      .emplace(std::pair{s->cos, s->sin}, std::pair{g.add_constant(n.name + "/rope_cos_table", t->first),
                                                                    g.add_constant(n.name + "/rope_sin_table", t->second)})
                      .first;
        }
        std::tie(s->cos, s->sin) = known->second;
      }
    }
    if (!s) continue;
    if (s->mask_bias >= 0) {  // a decomposed mask may hide keys past a sliding window
      const auto w = mask_window(m, s->mask_bias, s->mask_gate, opt.ring_capacity);
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
    c.inputs = {s.q, s.k, s.v, s.cos, s.sin, mask};  // (CachedAttentionOp::Input)
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
    const bool local = s.local_window > 0 && s.local_window < opt.ring_capacity;
    set("ring_capacity", local ? s.local_window : opt.ring_capacity);
    set("sinks", local ? 0 : opt.sinks);
    Attribute storage;
    storage.kind = Attribute::Kind::String;
    storage.s = kernels::kv_storage_name(opt.storage);
    c.attrs["storage"] = storage;
    set("interleaved", s.interleaved);
    if (s.rotary_dim) set("rotary_embedding_dim", s.rotary_dim);
    for (const auto& [name, value] :
         {std::pair{"scale", s.scale}, std::pair{"softcap", s.softcap ? std::optional(s.softcap) : std::nullopt}})
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

}  // namespace tern
