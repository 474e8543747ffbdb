// Attention that stays decomposed (on the graph's own cache): its cache read without repeat_kv copies, its
// rotate-half RoPE as one node.
#include <algorithm>
#include <map>

#include "passes/attention/attention.h"
#include "passes/attention/match.h"
#include "passes/graph_edit.h"
#include "passes/passes.h"

namespace tern {
using namespace attention;

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
      fits = fits && ts && (r == 3 || (r == 4 && m.dim(table, 1) == 1)) && (*ts)[0] == xs[0] &&
             (*ts)[static_cast<size_t>(r - 2)] == xs[2] && m.dim(table, -1) == rot;
      if (fits) fits = halves_equal(table, rot);
    }
    if (!fits) continue;
    std::vector<Node> nodes;
    auto first_half = [&](int table, const char* what) {
      Node sl;
      sl.name = root.name + "/rope_" + what + "_half";
      sl.op_type = "Slice";
      sl.opset = 13;  // bounds as inputs
      sl.inputs = {table, g.add_constant(sl.name + "/starts", Tensor::from_vector<int64_t>({0}, {1})),
                   g.add_constant(sl.name + "/ends", Tensor::from_vector<int64_t>({rot / 2}, {1})),
                   g.add_constant(sl.name + "/axes", Tensor::from_vector<int64_t>({-1}, {1}))};
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
    fused.push_back(
        {std::string("rotate-half RoPE (Slice, Neg, Concat, Mul, Add") + (rope->rotary_dim ? ", partial" : "") + ") → RotaryEmbedding",
         root.name});
    rewrites.emplace_back(k, std::move(nodes));
  }
  std::reverse(rewrites.begin(), rewrites.end());
  replace_with(g, rewrites);
  return fused;
}

}  // namespace tern
