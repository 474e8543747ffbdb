// Evaluating parts of a graph on probe sequences: what a matcher checks a pattern computes.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "passes/attention/match.h"
#include "passes/passes.h"

namespace tern::attention {

namespace {

// A copy of the nodes `targets` depend on, with graph inputs (or any values) bound, folded. With `shapes`, the
// data inputs of Shape nodes are not followed: each is bound to its shape from `shapes` instead.
std::optional<Graph> fold_needed(const Graph& g, const std::vector<int>& targets, const std::vector<std::pair<int, Tensor>>& bindings,
                                 const std::vector<std::pair<int, Shape>>* shapes) {
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
  if (shapes)
    for (const auto& [v, shape] : *shapes) {
      shaped[static_cast<size_t>(v)] = 1;
      h.values[static_cast<size_t>(v)].shape = sym_shape(shape);
    }
  std::vector<char> needed(g.nodes.size(), 0);
  std::vector<int> stack(targets);
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
  return h;
}

// The values the nodes `target` depends on read for their shape alone (the data input of a Shape node and
// of no other node on the way).
std::vector<int> read_for_shape(const Graph& g, int target, const std::vector<std::pair<int, Tensor>>& bindings) {
  std::vector<char> seen(g.values.size(), 0), visited(g.nodes.size(), 0), data_read(g.values.size(), 0);
  for (const auto& b : bindings) seen[static_cast<size_t>(b.first)] = 1;
  std::vector<int> found, stack{target};
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v < 0 || seen[static_cast<size_t>(v)] || g.values[static_cast<size_t>(v)].constant) continue;
    seen[static_cast<size_t>(v)] = 1;
    const int p = g.values[static_cast<size_t>(v)].producer;
    if (p < 0 || visited[static_cast<size_t>(p)]) continue;
    visited[static_cast<size_t>(p)] = 1;
    const Node& n = g.nodes[static_cast<size_t>(p)];
    if (n.op_type == "Shape" && n.domain.empty() && !n.inputs.empty()) {
      const int in = n.inputs[0];
      if (in >= 0 && !g.values[static_cast<size_t>(in)].constant && std::find(found.begin(), found.end(), in) == found.end())
        found.push_back(in);
      continue;
    }
    for (int in : n.inputs)
      if (in >= 0) data_read[static_cast<size_t>(in)] = 1, stack.push_back(in);
  }
  // (A value some node of the cone reads for its data too is evaluated.)
  found.erase(std::remove_if(found.begin(), found.end(), [&](int v) { return data_read[static_cast<size_t>(v)]; }), found.end());
  return found;
}

}  // namespace

// Evaluates value `target` with graph inputs bound to tensors, by folding a copy of the nodes it depends
// on; nullopt when it depends on another input or does not fold (a binding whose shape the graph's
// folded constants contradict — a probe cache where the file's shapes are static — is one). A binding
// without data (Tensor(dtype, shape, nullptr)) gives its input a shape only: what reads its shape folds
// (Shape, and Shape of a Concat with it), what reads its data does not.
//
// What a Shape node reads is bound to its shape alone — its declared shape with the probe's sizes for its
// symbols, or else inferred with every binding's data left out: a mask sliced to a layer's key length otherwise evaluated that layer and
// every one before it on the probe — SmolLM2-135M's Optimum export ran each layer's projections ~58 times at load (1.2-1.8 s of its 1.8-2.4
// s load). Where shape inference alone does not give the whole shape, the data is evaluated.
std::optional<Tensor> evaluate_with(const Graph& g, int target, const std::vector<std::pair<int, Tensor>>& bindings) {
  // Each symbol of the bound inputs' declared shapes at its size in this probe ("a + b" adds two).
  std::map<std::string, int64_t> sizes;
  std::set<std::string> clashing;
  for (const auto& [v, t] : bindings) {
    const std::optional<SymShape>& declared = g.values[static_cast<size_t>(v)].shape;
    if (declared && static_cast<int64_t>(declared->size()) == t.rank())
      for (size_t i = 0; i < declared->size(); ++i) {
        const Dim& d = (*declared)[i];
        if (d.is_known() || d.symbol.empty()) continue;
        const auto [at, fresh] = sizes.emplace(d.symbol, t.dim(static_cast<int64_t>(i)));
        if (!fresh && at->second != t.dim(static_cast<int64_t>(i))) clashing.insert(d.symbol);
      }
  }
  auto size_of = [&](const Dim& d) -> std::optional<int64_t> {
    if (d.is_known()) return d.value;
    int64_t total = 0;
    for (size_t from = 0; !d.symbol.empty();) {
      const size_t plus = d.symbol.find(" + ", from);
      const std::string name = d.symbol.substr(from, plus == std::string::npos ? std::string::npos : plus - from);
      const auto it = sizes.find(name);
      if (it == sizes.end() || clashing.count(name)) return std::nullopt;
      total += it->second;
      if (plus == std::string::npos) return total;
      from = plus + 3;
    }
    return std::nullopt;
  };
  std::vector<std::pair<int, Shape>> shapes;
  std::vector<int> to_infer;
  for (int v : read_for_shape(g, target, bindings)) {
    const std::optional<SymShape>& declared = g.values[static_cast<size_t>(v)].shape;
    Shape shape;
    for (size_t i = 0; declared && i < declared->size(); ++i)
      if (const std::optional<int64_t> n = size_of((*declared)[i])) shape.push_back(*n);
    if (declared && shape.size() == declared->size()) shapes.emplace_back(v, shape);
    else to_infer.push_back(v);
  }
  if (!to_infer.empty()) {  // shape inference over the values' cone, every binding without its data
    std::vector<std::pair<int, Tensor>> shapes_only;
    for (const auto& [v, t] : bindings) shapes_only.emplace_back(v, Tensor(t.dtype(), t.shape(), nullptr));
    const std::optional<Graph> inferred = fold_needed(g, to_infer, shapes_only, nullptr);
    for (int v : to_infer) {
      const std::optional<SymShape>& shape = inferred ? inferred->values[static_cast<size_t>(v)].shape : std::nullopt;
      if (const std::optional<Shape> known = shape ? concrete(*shape) : std::nullopt) shapes.emplace_back(v, *known);
    }
  }
  std::optional<Graph> h = fold_needed(g, {target}, bindings, &shapes);
  if (!shapes.empty() && (!h || !h->values[static_cast<size_t>(target)].constant)) h = fold_needed(g, {target}, bindings, nullptr);
  if (!h) return std::nullopt;
  return h->values[static_cast<size_t>(target)].constant;
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
std::vector<std::pair<int, Tensor>> sequence_bindings(const Matcher& m, int64_t past, int64_t n, std::vector<int64_t> mask,
                                                      CacheBinding caches) {
  const Graph& g = m.graph();
  if (mask.empty()) mask.assign(static_cast<size_t>(past + n), 1);
  std::vector<std::pair<int, Tensor>> b;
  auto bind = [&](int id, const std::vector<int64_t>& v) {
    if (id >= 0 && m.is_input(id))
      b.emplace_back(id, cast_to(Tensor::from_vector<int64_t>(v, {1, static_cast<int64_t>(v.size())}), m.value(id).dtype));
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

// (kProbeTotal, kProbeNew: match.h)
std::vector<std::pair<int, Tensor>> probe_bindings(const Matcher& m) {
  return sequence_bindings(m, kProbeTotal - kProbeNew, kProbeNew, {0, 1, 1, 1, 1});
}

// True when `bias` (an attention mask: bool, or additive float) — combined with a causal frontier when
// `causal` — lets new token i see exactly the unpadded positions up to its own on the probe: the
// causal + padding mask CachedAttention applies from attention_mask. Columns past the probe's length
// are not looked at (the callers mask them by length).
// `gate` (optional, bool) also shuts what it is false for: a mask applied by Where(gate, scores, min).
bool is_causal_padding_mask(const Matcher& m, int bias, bool causal, int gate) {
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

// ONNX Attention's masking (attn_mask input `bias`, is_causal) is CachedAttention's: causal, plus padding
// when a mask is given (an unpadded batch needs none).
bool attention_masks_like_cache(const Matcher& m, const Node& attention) {
  const int bias = input_of(attention, 3);
  const bool causal = attention.attr_int("is_causal", 0) != 0;
  return bias < 0 ? causal : is_causal_padding_mask(m, bias, causal);
}

// `id` evaluates on the probe to one integer per sequence equal to `expected`.
bool probes_to(const Matcher& m, int id, int64_t expected) {
  const auto t = id >= 0 ? evaluate_with(m.graph(), id, probe_bindings(m)) : std::nullopt;
  return t && is_integer(t->dtype()) && t->numel() == 1 && t->at_i64(0) == expected;
}

// cos/sin of the decomposed form ([.., W, D] with equal halves, or equal pairs when `interleaved`) as the [W, D/2] tables CachedAttention
// reads, by evaluating them for positions 0…W−1. They must come from position_ids, or — exports without
// them (Optimum's Gemma-2) — from the cache length: each chunk of kRopeChunk rows is evaluated as the
// generator feeds a chunk after `start` cached tokens, and its last row again as one token after all
// before it (a graph that ignored the cache length would fail there). In at most 64 chunks of at least
// 4096 rows, because a window of 10^6 positions evaluated whole took 2.3 GB of intermediates for a table
// of 256 MB (issue 53), and each chunk binds a mask as long as all rows before it. Fails (nullopt, with
// why) when they are not of that form.
std::optional<std::pair<Tensor, Tensor>> rope_tables(const Matcher& m, int cos, int sin, int64_t W, int64_t D, bool interleaved, Why& why) {
  const int64_t kRopeChunk = std::max<int64_t>(4096, (W + 63) / 64);
  const Graph& g = m.graph();
  const int positions = g.find_value("position_ids");
  const std::vector<int> from = positions >= 0 && m.is_input(positions) ? std::vector<int>{positions} : std::vector<int>{};
  if (!m.depends_only_on(cos, from, true) || !m.depends_only_on(sin, from, true))
    return why.stop(m.producer(cos),
                    "cos/sin are not computed from position_ids or the cache length (tern evaluates them for window positions)");
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
          const float* row = f.data<float>() + w * D;
          const float a = interleaved ? row[2 * j] : row[j], b = interleaved ? row[2 * j + 1] : row[D / 2 + j];
          if (a != b)
            return why.stop(m.producer(value), interleaved ? "cos/sin pairs differ (not the interleaved layout)"
                                                           : "cos/sin halves differ (not the rotate-half layout)");
          half[w * (D / 2) + j] = a;
        }
    }
  }
  return tables;
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

}  // namespace tern::attention
