// Block fusions of decoder layers: decomposed RMSNorm → RMSNormalization, SiLU(gate)·up → SwiGLU, and
// MatMuls sharing an input → one MatMul over concatenated weights (TVM's qkv_proj / gate_up_proj).
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "graph/weight_pack.h"
#include "passes/fuse_blocks.h"
#include "passes/matcher.h"

namespace tern {
namespace {

Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.i = v;
  return a;
}

Attribute string_attr(const std::string& v) {
  Attribute a;
  a.kind = Attribute::Kind::String;
  a.s = v;
  return a;
}

Attribute float_attr(float v) {
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.f = v;
  return a;
}

bool is_op(const Node* n, const char* op) { return n && n->op_type == op && n->domain.empty(); }

// The operand of a binary node that is not `x`, or -1 when `x` is not an operand.
int other_operand(const Node& n, int x) {
  if (n.inputs.size() != 2) return -1;
  return n.inputs[0] == x ? n.inputs[1] : n.inputs[1] == x ? n.inputs[0] : -1;
}

// The only consumer of `id`, when it has exactly one and `id` is no graph output.
const Node* sole_consumer(const Matcher& m, int id) {
  return m.single_use(id) ? &m.graph().nodes[static_cast<size_t>(m.consumers(id)[0])] : nullptr;
}

// Puts each new node where the node it replaces was (the last of its pattern, so its inputs come
// before it); the rest of each pattern is left for remove_dead_nodes.
std::vector<Fusion> replace_nodes(Graph& g, std::vector<std::pair<int, Node>>& rewrites, const char* pattern) {
  std::vector<Fusion> fused;
  for (auto& [k, n] : rewrites) {
    fused.push_back({pattern, n.name});
    g.nodes[static_cast<size_t>(k)] = std::move(n);
  }
  link_producers(g);
  return fused;
}

}  // namespace

// x · 1/√(mean(x²) + ε) · w, as torch exports LlamaRMSNorm: Pow(x, 2) → ReduceMean(last axis) → Add ε →
// Sqrt → Div(1, ·) or Reciprocal → Mul x → Mul w. Also Div(x, Sqrt(·)).
std::vector<Fusion> fuse_rms_norm(Graph& g) {
  link_producers(g);
  const Matcher m(g);
  std::vector<std::pair<int, Node>> rewrites;  // node index → its replacement
  for (const Node& mean : g.nodes) {
    if (!is_op(&mean, "ReduceMean") || mean.attr_int("keepdims", 1) != 1) continue;
    const Node* sq = m.producer(mean.inputs[0]);
    int x = -1;
    if (is_op(sq, "Pow") && m.scalar(sq->inputs[1]) == 2.0) x = sq->inputs[0];
    else if (is_op(sq, "Mul") && sq->inputs[0] == sq->inputs[1]) x = sq->inputs[0];
    const int64_t r = m.rank(x);
    const auto axes = mean.inputs.size() > 1 ? m.ints(mean.inputs[1]) : std::optional(mean.attr_ints("axes"));
    if (x < 0 || r <= 0 || !axes || axes->size() != 1 || ((*axes)[0] != -1 && (*axes)[0] != r - 1) || !m.single_use(sq->outputs[0]))
      continue;
    const Node* add = sole_consumer(m, mean.outputs[0]);
    const auto eps = is_op(add, "Add") ? m.scalar(other_operand(*add, mean.outputs[0])) : std::nullopt;
    const Node* sqrt = eps ? sole_consumer(m, add->outputs[0]) : nullptr;
    if (!is_op(sqrt, "Sqrt")) continue;
    const Node* inv = sole_consumer(m, sqrt->outputs[0]);
    const Node* normed = nullptr;  // x / √(…)
    if (is_op(inv, "Div") && inv->inputs[1] == sqrt->outputs[0] && inv->inputs[0] == x) {
      normed = inv;
    } else if ((is_op(inv, "Div") && inv->inputs[1] == sqrt->outputs[0] && m.scalar(inv->inputs[0]) == 1.0) || is_op(inv, "Reciprocal")) {
      normed = sole_consumer(m, inv->outputs[0]);
      if (!is_op(normed, "Mul") || other_operand(*normed, inv->outputs[0]) != x) continue;
    } else {
      continue;
    }
    const Node* scaled = sole_consumer(m, normed->outputs[0]);
    const int w = is_op(scaled, "Mul") ? other_operand(*scaled, normed->outputs[0]) : -1;
    const Value* wv = w >= 0 ? &m.value(w) : nullptr;
    if (!wv || !wv->constant || wv->constant->rank() != 1 || wv->constant->dim(0) != m.dim(x, -1) || wv->dtype != m.value(x).dtype)
      continue;
    Node n;
    n.name = scaled->name + "/rms_norm";
    n.op_type = "RMSNormalization";
    n.inputs = {x, w};
    n.outputs = {scaled->outputs[0]};
    n.attrs["epsilon"] = float_attr(static_cast<float>(*eps));
    n.attrs["axis"] = int_attr(-1);
    rewrites.emplace_back(m.index_of(scaled), std::move(n));
  }
  return replace_nodes(g, rewrites, "Pow → ReduceMean → Add → Sqrt → Div → Mul → Mul(weight) → RMSNormalization");
}

// Add(a, b) → RMSNormalization: one SkipSimplifiedLayerNormalization (com.microsoft, as ONNX Runtime's
// builder writes it) that outputs the sum too, for the next residual Add. The fused node takes the Add's
// place (its operands are ready there; the norm's readers come later) and the norm is dropped.
std::vector<Fusion> fuse_skip_rms_norm(Graph& g) {
  link_producers(g);
  const Matcher m(g);
  std::vector<std::pair<int, Node>> rewrites;
  std::vector<int> drop;
  std::set<const Node*> taken;  // an Add read by two norms fuses with the first
  for (const Node& norm : g.nodes) {
    if (!is_op(&norm, "RMSNormalization") && !is_op(&norm, "SimplifiedLayerNormalization")) continue;
    const int x = norm.inputs[0];
    const Node* add = m.producer(x);
    const int64_t r = m.rank(x);
    // The skip form normalizes the last axis of a sum of two same-shape operands, and has no InvStdDev
    // output to give (ONNX's RMSNormalization has none; the contrib op's is Mean/InvStdDev).
    if (!is_op(add, "Add") || r < 1 || norm.inputs.size() < 2 || norm.outputs.size() != 1 ||
        (norm.attr_int("axis", -1) != -1 && norm.attr_int("axis", -1) != r - 1))
      continue;
    const int a = add->inputs[0], b = add->inputs[1];
    const auto &sa = m.value(a).shape, &sb = m.value(b).shape;
    if (!sa || !sb || *sa != *sb || m.value(a).dtype != m.value(b).dtype || !taken.insert(add).second) continue;
    Node n;
    n.name = norm.name + "/skip";
    n.op_type = "SkipSimplifiedLayerNormalization";
    n.domain = "com.microsoft";
    n.inputs = {a, b, norm.inputs[1]};
    n.outputs = {norm.outputs[0], -1, -1, x};
    n.attrs["epsilon"] = float_attr(norm.attr_float("epsilon", 1e-5f));
    rewrites.emplace_back(m.index_of(add), std::move(n));
    drop.push_back(m.index_of(&norm));
  }
  std::vector<Fusion> fused = replace_nodes(g, rewrites, "Add → RMSNormalization → SkipSimplifiedLayerNormalization");
  std::sort(drop.rbegin(), drop.rend());
  for (int k : drop) g.nodes.erase(g.nodes.begin() + k);
  link_producers(g);
  return fused;
}

// gate · Sigmoid(gate) · up → SwiGLU(gate, up) (domain "tern"), and Gelu(gate, tanh) · up → the same op with
// activation "gelu_tanh" (GeGLU: one pass over gate and up instead of three, and a vectorized GELU).
std::vector<Fusion> fuse_swiglu(Graph& g) {
  link_producers(g);
  const Matcher m(g);
  std::vector<std::pair<int, Node>> rewrites;
  for (const Node& act : g.nodes) {
    const bool gelu = is_op(&act, "Gelu") && act.attr_string("approximate", "none") == "tanh";
    if (!gelu && !is_op(&act, "Sigmoid")) continue;
    const int gate = act.inputs[0];
    const Node* gated = sole_consumer(m, act.outputs[0]);  // gate · sigmoid(gate), or Gelu's own output
    if (!gelu && (!is_op(gated, "Mul") || other_operand(*gated, act.outputs[0]) != gate)) continue;
    if (gelu) gated = &act;
    const Node* prod = sole_consumer(m, gated->outputs[0]);
    const int up = is_op(prod, "Mul") ? other_operand(*prod, gated->outputs[0]) : -1;
    // Same shape on both sides: a broadcast product is not a gated linear unit.
    if (up < 0 || !m.value(gate).shape || !m.value(up).shape || m.rank(gate) != m.rank(up) || m.dim(gate, -1) < 0 ||
        m.dim(gate, -1) != m.dim(up, -1) || m.value(gate).dtype != m.value(up).dtype)
      continue;
    Node n;
    n.name = prod->name + "/swiglu";
    n.op_type = "SwiGLU";
    n.domain = "tern";
    n.inputs = {gate, up};
    n.outputs = {prod->outputs[0]};
    if (gelu) n.attrs["activation"] = string_attr("gelu_tanh");
    rewrites.emplace_back(m.index_of(prod), std::move(n));
  }
  return replace_nodes(g, rewrites, "Sigmoid → Mul(gate) → Mul(up), or Gelu(tanh) → Mul(up) → SwiGLU");
}

namespace {

// A product of x with constant weights that can join others reading the same x: MatMul with a 2-D float
// weight, or com.microsoft MatMulNBits with constant B, scales and zero points (no g_idx, no bias),
// whose rows (N) concatenate as bytes.
bool joinable_product(const Graph& g, const Node& n) {
  auto constant = [&](size_t i) { return i < n.inputs.size() && n.inputs[i] >= 0 && g.values[static_cast<size_t>(n.inputs[i])].constant; };
  if (is_op(&n, "MatMul")) {
    const Value& w = g.values[static_cast<size_t>(n.inputs[1])];
    return w.constant && w.constant->rank() == 2 && is_float(w.dtype);
  }
  if (n.op_type != "MatMulNBits" || n.domain != "com.microsoft" || n.inputs.size() > 4) return false;
  return constant(1) && constant(2) && (n.inputs.size() < 4 || n.inputs[3] < 0 || constant(3));
}

// What must agree for two products to share one concatenated weight.
std::string join_key(const Graph& g, const Node& n) {
  auto dtype_of = [&](size_t i) -> std::string {
    return i < n.inputs.size() && n.inputs[i] >= 0 ? dtype_name(g.values[static_cast<size_t>(n.inputs[i])].dtype) : "-";
  };
  if (n.op_type == "MatMul")
    return "MatMul " + dtype_of(1) + " " + std::to_string(g.values[static_cast<size_t>(n.inputs[1])].constant->dim(0));
  std::string key = "MatMulNBits";
  for (const auto& [a, dflt] : {std::pair<const char*, int64_t>{"K", 0}, {"bits", 4}, {"block_size", 0}, {"accuracy_level", 0}})
    key += " " + std::to_string(n.attr_int(a, dflt));
  return key + " " + dtype_of(2) + " " + dtype_of(3);
}

// Output columns of a joinable product.
int64_t product_columns(const Graph& g, const Node& n) {
  return n.op_type == "MatMul" ? g.values[static_cast<size_t>(n.inputs[1])].constant->dim(1) : n.attr_int("N", 0);
}

}  // namespace

// MatMul(x, W1), MatMul(x, W2)… with constant 2-D weights of one dtype → MatMul(x, [W1 | W2 | …]), and
// MatMulNBits sharing x and their quantization → one MatMulNBits over the concatenated rows (SmolLM2's
// GGUF import: q/k/v and gate/up, 211 products a token → 121). The output is split back, or read packed by
// the consumer when it takes packed operands: SwiGLU(gate, up) and CachedAttention(q, k, v) whose operands
// are exactly the split's outputs, in order. Each output column is computed as before, bit for bit.
std::vector<Fusion> fuse_shared_input_matmuls(Graph& g, WeightPack* pack) {
  link_producers(g);
  std::map<int, std::vector<int>> by_input;  // x → products reading it with constant weights
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (joinable_product(g, g.nodes[k])) by_input[g.nodes[k].inputs[0]].push_back(static_cast<int>(k));
  std::vector<Fusion> fused;
  std::map<int, Node> replace;    // first product of a group → the concatenated one
  std::map<int, Node> add_after;  // … → the Split after it (when needed)
  std::vector<char> drop(g.nodes.size(), 0);
  const Matcher m(g);
  // Weights copied into a concatenation are released as soon as they are when nothing else reads them (a mapped
  // weight's pages then leave the process: SmolLM2's peak RSS went 145 → 196 MB while they stayed). (What a
  // subgraph reads is among its node's inputs: graph/ir.h outer_values_read.)
  std::vector<int> uses(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (int in : n.inputs)
      if (in >= 0) ++uses[static_cast<size_t>(in)];
  for (int o : g.outputs) ++uses[static_cast<size_t>(o)];
  for (auto& [x, group] : by_input) {
    if (group.size() < 2) continue;
    const std::string key = join_key(g, g.nodes[static_cast<size_t>(group[0])]);
    std::vector<int> same;  // the members that join the first one
    for (int k : group)
      if (join_key(g, g.nodes[static_cast<size_t>(k)]) == key) same.push_back(k);
    if (same.size() < 2) continue;
    std::vector<int64_t> sizes;
    std::vector<const Node*> members;
    for (int k : same) {
      members.push_back(&g.nodes[static_cast<size_t>(k)]);
      sizes.push_back(product_columns(g, *members.back()));
    }
    int64_t N = 0;
    for (int64_t s : sizes) N += s;
    const Node& first = g.nodes[static_cast<size_t>(same[0])];
    Node mm;
    mm.name = first.name + "/concat";
    mm.op_type = first.op_type;
    mm.domain = first.domain;
    // The constant `input` of each member, concatenated along `axis` of `shape`: left as its parts for the reader
    // to prepare from (graph/ir.h ConstantParts), or — with the session's pack — through it: a later load takes
    // the concatenation from it, or, when the pack recorded it as dropped (its reader repacked it), makes none.
    auto concatenation = [&](const std::string& name, size_t input, int64_t axis, Shape shape) {
      ConstantParts parts{axis, std::move(shape), {}};
      for (const Node* n : members) parts.tensors.push_back(*g.values[static_cast<size_t>(n->inputs[input])].constant);
      if (!pack) return g.add_concatenation(name, std::move(parts));
      const DType dtype = parts.tensors[0].dtype();
      return g.add_constant(name, pack->derived(name, dtype, parts.shape, [&] { return parts.whole(); }));
    };
    if (first.op_type == "MatMul") {
      const int64_t K = g.values[static_cast<size_t>(first.inputs[1])].constant->dim(0);
      mm.inputs = {x, concatenation(first.name + "/concat_weight", 1, 1, {K, N})};
    } else {  // B [N, k_blocks, blob], scales and zero points: all N-major, their bytes one after another
      mm.attrs = first.attrs;
      mm.attrs["N"] = int_attr(N);
      mm.inputs = {x};
      const char* names[] = {"", "/concat_B", "/concat_scales", "/concat_zero_points"};
      for (size_t i = 1; i < first.inputs.size() && first.inputs[i] >= 0; ++i) {
        int64_t total = 0;
        for (const Node* n : members) total += g.values[static_cast<size_t>(n->inputs[i])].constant->numel();
        mm.inputs.push_back(concatenation(first.name + names[i], i, 0, {total}));
      }
    }
    const int yid = g.add_value(first.name + "/concat_out");
    g.values[static_cast<size_t>(yid)].dtype = g.values[static_cast<size_t>(first.outputs[0])].dtype;
    mm.outputs = {yid};
    std::vector<int> parts;
    for (int k : same) parts.push_back(g.nodes[static_cast<size_t>(k)].outputs[0]);
    // A consumer that reads the parts packed, in order, each part read by it alone.
    const Node* reader = nullptr;
    bool packed = true;
    for (size_t i = 0; i < parts.size(); ++i) {
      const Node* c = m.single_use(parts[i]) ? &g.nodes[static_cast<size_t>(m.consumers(parts[i])[0])] : nullptr;
      if (!c || (reader && c != reader) || c->inputs.size() <= i || c->inputs[i] != parts[i]) packed = false;
      reader = c;
    }
    if (packed && reader->op_type == "SwiGLU" && reader->domain == "tern" && parts.size() == 2 && sizes[0] == sizes[1]) {
      Node& r = g.nodes[static_cast<size_t>(m.index_of(reader))];
      r.inputs = {yid};
    } else if (packed && reader->op_type == "CachedAttention" && reader->domain == "tern" && parts.size() == 3 && sizes[1] == sizes[2] &&
               sizes[0] * reader->attr_int("kv_num_heads", 0) == sizes[1] * reader->attr_int("q_num_heads", 0)) {
      Node& r = g.nodes[static_cast<size_t>(m.index_of(reader))];
      r.inputs[0] = yid;
      r.inputs[1] = r.inputs[2] = -1;
    } else {
      Node split;
      split.name = first.name + "/split";
      split.op_type = "Split";
      split.attrs["axis"] = int_attr(-1);
      Attribute s;
      s.kind = Attribute::Kind::Ints;
      s.ints = sizes;
      split.attrs["split"] = s;
      split.inputs = {yid};
      split.outputs = parts;
      add_after[same[0]] = std::move(split);
    }
    const std::string plural = first.op_type == "MatMul" ? "MatMuls" : first.op_type;
    fused.push_back(
        {std::to_string(same.size()) + " " + plural + " sharing an input → one " + first.op_type + " over concatenated weights", mm.name});
    replace[same[0]] = std::move(mm);
    for (size_t i = 1; i < same.size(); ++i) drop[static_cast<size_t>(same[i])] = 1;
    // At once, group by group: the 1B-shape model's gate|up copies otherwise sat beside 2.4 GB of source pages.
    for (const Node* n : members)
      for (auto v = n->inputs.begin() + 1; v != n->inputs.end(); ++v)
        if (*v >= 0 && uses[static_cast<size_t>(*v)] == 1) g.values[static_cast<size_t>(*v)].constant.reset();
  }
  std::vector<Node> nodes;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (drop[k]) continue;
    auto r = replace.find(static_cast<int>(k));
    nodes.push_back(r != replace.end() ? std::move(r->second) : std::move(g.nodes[k]));
    auto s = add_after.find(static_cast<int>(k));
    if (s != add_after.end()) nodes.push_back(std::move(s->second));
  }
  g.nodes = std::move(nodes);
  link_producers(g);
  return fused;
}

// onnxruntime.quantization's dynamic IntegerOps spelling of x · W (transformers.js's q8 files):
// DynamicQuantizeLinear(x) → (q, s, z); MatMulInteger(q, W, z, W_zp) → Cast(float) → Mul by Mul(s, W_scale) →
// com.microsoft DynamicQuantizeMatMul(x, W, W_scale, W_zp), what ONNX Runtime fuses it into too: the same integer
// sums and the same float(sum) · (s · W_scale), one node instead of four, W packed once at load. A quantization
// several products share (q, k and v of one input) is made again by each: it costs one pass over x.
// Where A comes quantized already with constant parameters (OLMo-2's first layer reads the quantized embedding
// table's rows), the scales' product is a folded constant: → MatMulIntegerToFloat(q, W, 1, product, z, W_zp), whose
// float(sum) · (1 · product) is the same float.
std::vector<Fusion> fuse_dynamic_quantized_matmuls(Graph& g) {
  link_producers(g);
  const Matcher m(g);
  std::vector<std::pair<int, Node>> rewrites;
  int one = -1;  // the constant 1.0 a_scale of MatMulIntegerToFloat
  for (const Node& mm : g.nodes) {
    if (!is_op(&mm, "MatMulInteger") || mm.inputs.size() < 3) continue;
    const Value& w = m.value(mm.inputs[1]);
    const int w_zp = mm.inputs.size() > 3 ? mm.inputs[3] : -1;
    if (!w.constant || w.constant->rank() != 2 || (w_zp >= 0 && !m.value(w_zp).constant)) continue;
    const Node* cast = sole_consumer(m, mm.outputs[0]);
    if (!is_op(cast, "Cast") || static_cast<DType>(cast->attr_int("to", 0)) != DType::Float32) continue;
    const Node* scaled = sole_consumer(m, cast->outputs[0]);
    const int scales = is_op(scaled, "Mul") ? other_operand(*scaled, cast->outputs[0]) : -1;
    if (scales < 0 || m.value(scales).dtype != DType::Float32) continue;
    Node n;
    n.domain = "com.microsoft";
    n.outputs = {scaled->outputs[0]};
    const Node* dq = m.producer(mm.inputs[0]);
    const Node* product = m.producer(scales);
    const int w_scale = is_op(product, "Mul") && is_op(dq, "DynamicQuantizeLinear") && dq->outputs.size() >= 3
                            ? other_operand(*product, dq->outputs[1])
                            : -1;
    if (w_scale >= 0 && dq->outputs[0] == mm.inputs[0] && dq->outputs[2] == mm.inputs[2] && m.value(w_scale).constant) {
      n.name = scaled->name + "/dynamic_quantize_matmul";
      n.op_type = "DynamicQuantizeMatMul";
      n.inputs = {dq->inputs[0], mm.inputs[1], w_scale, w_zp};
    } else if (m.value(scales).constant && (mm.inputs[2] < 0 || m.value(mm.inputs[2]).constant)) {
      if (one < 0) one = g.add_constant(mm.name + "/unit_scale", Tensor::scalar(1.0f));
      n.name = scaled->name + "/matmul_integer_to_float";
      n.op_type = "MatMulIntegerToFloat";
      n.inputs = {mm.inputs[0], mm.inputs[1], one, scales, mm.inputs[2], w_zp};
    } else {
      continue;
    }
    rewrites.emplace_back(m.index_of(scaled), std::move(n));
  }
  return replace_nodes(g, rewrites,
                       "(DynamicQuantizeLinear →) MatMulInteger → Cast → Mul(scales) → DynamicQuantizeMatMul or MatMulIntegerToFloat");
}

namespace {

bool is_last_position(const Node& n) { return n.op_type == "LastPosition" && n.domain == "tern"; }

// A tern LastPosition node named `name` reading value `x`, its output a new value of x's type (the shape is left
// to infer_and_fold).
Node last_position_of(Graph& g, int x, const std::string& name) {
  const DType dtype = g.values[static_cast<size_t>(x)].dtype;  // add_value below may move the values
  Node slice;
  slice.name = name;
  slice.op_type = "LastPosition";
  slice.domain = "tern";
  slice.inputs = {x};
  slice.outputs = {g.add_value(name)};
  g.values[static_cast<size_t>(slice.outputs[0])].dtype = dtype;
  return slice;
}

}  // namespace

std::vector<Fusion> expose_hidden_state(Graph& g, const std::string& logits, const std::string& name) {
  link_producers(g);
  const int out = g.find_value(logits);
  if (out < 0 || std::count(g.outputs.begin(), g.outputs.end(), out) == 0)
    fail("the graph has no output '", logits, "' to find the hidden state behind");
  const int existing = g.find_value(name);
  if (existing >= 0 && std::count(g.outputs.begin(), g.outputs.end(), existing)) return {};  // exposed already
  if (existing >= 0) fail("the graph already has a value named '", name, "' that is not an output");
  // Back from the logits through what exporters put after the vocabulary projection — a bias (phi-2), a logit
  // scale (Cohere, Granite), soft-capping Div → Tanh → Mul (Gemma-2), a Cast — to the projection itself.
  static const std::set<std::string> unary = {"Cast", "Tanh", "Identity"}, binary = {"Add", "Sub", "Mul", "Div"};
  int v = out;
  for (int step = 0;; ++step) {
    const int p = g.values[static_cast<size_t>(v)].producer;
    const Node* n = p >= 0 ? &g.nodes[static_cast<size_t>(p)] : nullptr;
    const auto why_not = [&] { return n ? n->describe() : "graph input or constant '" + g.values[static_cast<size_t>(v)].name + "'"; };
    if (!n || step == 8) fail("output '", logits, "' comes from ", why_not(), ", not from a projection of the hidden state");
    const bool projection = (n->domain.empty() && (n->op_type == "MatMul" || n->op_type == "Gemm")) ||
                            (n->domain == "com.microsoft" && (n->op_type == "MatMulNBits" || n->op_type == "FusedMatMul" ||
                                                              n->op_type == "DynamicQuantizeMatMul" || n->op_type == "MatMulBnb4"));
    if (projection) {
      const int x = n->inputs[0];
      const Value& hidden = g.values[static_cast<size_t>(x)];
      if (!hidden.shape || hidden.shape->size() != 3)
        fail(n->describe(), " projects the hidden state to '", logits, "', but its input '", hidden.name,
             "' is not [batch, sequence, hidden]");
      // As float32 whatever the graph computes in (a float16 graph's hidden state widened exactly): what embeddings read.
      Node copy;
      copy.name = name + "/identity";
      copy.op_type = hidden.dtype == DType::Float32 ? "Identity" : "Cast";
      if (hidden.dtype != DType::Float32) copy.attrs["to"] = int_attr(static_cast<int64_t>(DType::Float32));
      copy.inputs = {x};
      copy.outputs = {g.add_value(name)};
      g.values[static_cast<size_t>(copy.outputs[0])].dtype = DType::Float32;
      const std::string what = "the input of " + n->describe() + " exposed as output '" + name + "'";
      g.nodes.insert(g.nodes.begin() + p + 1, std::move(copy));
      g.outputs.push_back(g.nodes[static_cast<size_t>(p + 1)].outputs[0]);
      link_producers(g);
      return {{what, name + "/identity"}};
    }
    int next = -1;
    if (n->domain.empty() && unary.count(n->op_type) && !n->inputs.empty()) next = n->inputs[0];
    if (n->domain.empty() && binary.count(n->op_type) && n->inputs.size() == 2) {
      const bool c0 = g.values[static_cast<size_t>(n->inputs[0])].constant.has_value();
      const bool c1 = g.values[static_cast<size_t>(n->inputs[1])].constant.has_value();
      if (c0 != c1) next = n->inputs[c0 ? 1 : 0];
    }
    if (next < 0) fail("output '", logits, "' comes from ", why_not(), ", not from a projection of the hidden state");
    v = next;
  }
}

std::vector<Fusion> slice_logits_to_last_position(Graph& g, const std::string& output) {
  link_producers(g);
  const int out = g.find_value(output);
  if (out < 0 || std::count(g.outputs.begin(), g.outputs.end(), out) == 0) return {};
  int p = g.values[static_cast<size_t>(out)].producer;
  // Through a Cast of the product alone (a float16 graph's logits widened to the float32 output it declares).
  for (int step = 0; step < 2 && p >= 0; ++step) {
    const Node& cast = g.nodes[static_cast<size_t>(p)];
    const int x = cast.op_type == "Cast" && cast.domain.empty() && !cast.inputs.empty() ? cast.inputs[0] : -1;
    if (x < 0 || std::count(g.outputs.begin(), g.outputs.end(), x) || std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
                                                                        return std::count(n.inputs.begin(), n.inputs.end(), x) > 0;
                                                                      }) != 1)
      break;
    p = g.values[static_cast<size_t>(x)].producer;
  }
  if (p < 0) return {};
  Node& proj = g.nodes[static_cast<size_t>(p)];
  const bool matmul = (proj.op_type == "MatMul" && proj.domain.empty()) ||
                      ((proj.op_type == "MatMulNBits" || proj.op_type == "MatMulBnb4") && proj.domain == "com.microsoft") ||
                      (proj.op_type == "FusedMatMul" && proj.domain == "com.microsoft" && !proj.attr_int("transA", 0));
  const bool dynamic = proj.op_type == "DynamicQuantizeMatMul" && proj.domain == "com.microsoft";
  const Value& x = g.values[static_cast<size_t>(proj.inputs[0])];
  if (!(matmul || dynamic) || !x.shape || x.shape->size() != 3) return {};
  if (g.find_value(kLogitsPositionsInput) >= 0) fail("the model already has a value named '", kLogitsPositionsInput, "'");
  std::vector<Node> before;  // (inserted before the projection, in order)
#ifndef TERN_MINIMAL         // (no integer products in that build)
  if (dynamic) {
    // DynamicQuantizeMatMul quantizes A with one scale for all of its rows, so a row's codes depend on the others:
    // the codes are made from every position (DynamicQuantizeLinear) and only the sliced positions' are multiplied
    // (MatMulIntegerToFloat: the same float(sum) · (a_scale · b_scale) + bias). The same logits, from one row of the
    // LM head instead of the prompt's: transformers.js's q8 file of Llama-3.2-1B's shape spent 43 of a 64-token
    // prefill's 229 ms on its 64 rows (tern profile --steps prefill, Zen 5).
    Node quantize;
    quantize.name = proj.name + "/quantize";
    quantize.op_type = "DynamicQuantizeLinear";
    quantize.inputs = {proj.inputs[0]};
    for (const auto& [suffix, dtype] :
         {std::pair<const char*, DType>{"/codes", DType::UInt8}, {"/scale", DType::Float32}, {"/zero_point", DType::UInt8}}) {
      quantize.outputs.push_back(g.add_value(proj.name + suffix));
      g.values[static_cast<size_t>(quantize.outputs.back())].dtype = dtype;
    }
    const std::vector<int> in = proj.inputs;  // A, B, b_scale, [b_zero_point, [bias]]
    const auto optional = [&](size_t i) { return i < in.size() ? in[i] : -1; };
    proj.op_type = "MatMulIntegerToFloat";
    proj.inputs = {quantize.outputs[0], in[1], quantize.outputs[1], in[2], quantize.outputs[2], optional(3), optional(4)};
    while (proj.inputs.back() < 0) proj.inputs.pop_back();
    before.push_back(std::move(quantize));
  }
#endif
  Node slice = last_position_of(g, proj.inputs[0], proj.name + "/last_position");
  const int positions = g.add_value(kLogitsPositionsInput);
  g.values[static_cast<size_t>(positions)].dtype = DType::Int64;
  g.values[static_cast<size_t>(positions)].shape = SymShape{Dim::named(kLogitsPositionsInput)};
  g.inputs.push_back(positions);
  g.input_defaults[positions] = Tensor::from_vector<int64_t>({-1}, {1});  // (the last position)
  slice.inputs.push_back(positions);
  proj.inputs[0] = slice.outputs[0];
  const std::string name = slice.name;
  before.push_back(std::move(slice));
  g.nodes.insert(g.nodes.begin() + p, std::make_move_iterator(before.begin()), std::make_move_iterator(before.end()));
  link_producers(g);
  return {{"logits of the positions generation reads only (the last; a speculative step's few)", name}};
}

namespace {

// True when position s of each output of `n` reads position s of its activations alone (axis 1 of [B, S, ·]),
// weights and other constants aside: products with constant weights, last-axis norms, SwiGLU, element-wise
// ops, a last-axis Split. Attention, which mixes positions, is not.
bool position_wise(const Graph& g, const Node& n) {
  const auto constant = [&](size_t i) {
    return i < n.inputs.size() && n.inputs[i] >= 0 && g.values[static_cast<size_t>(n.inputs[i])].constant;
  };
  const auto constant_matrix = [&](size_t i) { return constant(i) && g.values[static_cast<size_t>(n.inputs[i])].constant->rank() == 2; };
  const auto last_axis = [&] {
    const int64_t a = n.attr_int("axis", -1);
    return a == -1 || a == 2;
  };
  static const std::set<std::string> elementwise = {"Add", "Sub", "Mul", "Div", "Sigmoid", "Tanh", "Relu", "Erf", "Gelu", "Cast"};
  if (n.domain.empty()) {
    if (n.op_type == "MatMul") return constant_matrix(1);
    if (n.op_type == "LayerNormalization" || n.op_type == "RMSNormalization" || n.op_type == "SimplifiedLayerNormalization")
      return last_axis();
    if (n.op_type == "Split") return n.has_attr("axis") && last_axis();
    return elementwise.count(n.op_type) > 0;
  }
  if (n.domain == "com.microsoft") {
    if (n.op_type == "MatMulNBits" || n.op_type == "MatMulBnb4") return constant(1);
    if (n.op_type == "FusedMatMul")
      return !n.attr_int("transA", 0) && !n.attr_int("transBatchA", 0) && !n.attr_int("transBatchB", 0) && constant_matrix(1);
    if (n.op_type == "SimplifiedLayerNormalization") return last_axis();
    return n.op_type == "SkipSimplifiedLayerNormalization" || n.op_type == "SkipLayerNormalization" || n.op_type == "FastGelu" ||
           n.op_type == "Gelu" || n.op_type == "QuickGelu" || n.op_type == "BiasGelu";
  }
  return n.domain == "tern" && n.op_type == "SwiGLU";
}

}  // namespace

std::vector<Fusion> hoist_last_position(Graph& g) {
  std::vector<Fusion> moved;
  for (bool again = true; again;) {
    again = false;
    link_producers(g);
    const Matcher m(g);
    for (const Node& last : g.nodes) {
      if (!is_last_position(last) || !m.value(last.inputs[0]).shape || m.rank(last.inputs[0]) != 3) continue;
      const SymShape xs = *m.value(last.inputs[0]).shape;
      const Node* p = m.producer(last.inputs[0]);
      if (!p || !position_wise(g, *p)) continue;
      // Every output read by LastPosition alone (whose own output is no graph output, keeping that name).
      bool only_last = true;
      for (int o : p->outputs) {
        if (o < 0) continue;
        if (m.is_output(o)) only_last = false;
        for (int c : m.consumers(o)) {
          const Node& reader = g.nodes[static_cast<size_t>(c)];
          only_last = only_last && is_last_position(reader) && !m.is_output(reader.outputs[0]);
        }
      }
      // Each operand a constant or activations [B, S, ·] of the same B and S, which get the slice instead.
      std::vector<size_t> rows;
      for (size_t i = 0; i < p->inputs.size() && only_last; ++i) {
        const int in = p->inputs[i];
        if (in < 0 || m.value(in).constant) continue;
        const auto& s = m.value(in).shape;
        if (s && s->size() == 3 && (*s)[0] == xs[0] && (*s)[1] == xs[1]) rows.push_back(i);
        else only_last = false;
      }
      if (!only_last || rows.empty()) continue;
      const int k = m.index_of(p);
      std::vector<int> bypassed;  // the LastPosition nodes after p
      for (int o : p->outputs)
        if (o >= 0) bypassed.insert(bypassed.end(), m.consumers(o).begin(), m.consumers(o).end());
      Node moved_node = g.nodes[static_cast<size_t>(k)];
      // (each new slice reads the positions the first one read, if any)
      const auto& first_slice = g.nodes[static_cast<size_t>(bypassed.front())].inputs;
      const std::vector<int> positions(first_slice.begin() + 1, first_slice.end());
      std::vector<Node> slices;
      for (size_t i : rows) {  // (the shapes as long as the positions kept: infer_and_fold, after this pass)
        slices.push_back(last_position_of(g, moved_node.inputs[i], moved_node.name + "/last_position_" + std::to_string(i)));
        slices.back().inputs.insert(slices.back().inputs.end(), positions.begin(), positions.end());
        moved_node.inputs[i] = slices.back().outputs[0];
      }
      // Readers of the bypassed slices read p's outputs, now as long as the positions kept.
      for (int b : bypassed) {
        const int from = g.nodes[static_cast<size_t>(b)].outputs[0], to = g.nodes[static_cast<size_t>(b)].inputs[0];
        for (Node& n : g.nodes)
          for (int& in : n.inputs)
            if (in == from) in = to;
      }
      moved.push_back(
          {"last position taken before " + moved_node.op_type + " (position-wise; generation reads no other)", moved_node.name});
      std::vector<Node> nodes;
      for (size_t n = 0; n < g.nodes.size(); ++n) {
        if (std::count(bypassed.begin(), bypassed.end(), static_cast<int>(n))) continue;
        if (static_cast<int>(n) == k) {
          for (Node& slice : slices) nodes.push_back(std::move(slice));
          nodes.push_back(std::move(moved_node));
        } else {
          nodes.push_back(std::move(g.nodes[n]));
        }
      }
      g.nodes = std::move(nodes);
      again = true;
      break;
    }
  }
  link_producers(g);
  return moved;
}

}  // namespace tern
