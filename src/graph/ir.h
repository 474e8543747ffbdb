// tern's own graph: values (named edges) and nodes in topological order. Built from ONNX by the loader,
// rewritten by passes, executed by the runtime. Nothing here depends on protobuf.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace tern {

// A dimension that is a known size, a named symbol ("batch_size"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // set when unknown but named

  static Dim known(int64_t v) { return Dim{v, {}}; }
  static Dim named(std::string s) { return Dim{-1, std::move(s)}; }
  bool is_known() const { return value >= 0; }
  bool operator==(const Dim& o) const { return is_known() ? value == o.value : (!symbol.empty() && symbol == o.symbol); }
  std::string str() const { return is_known() ? std::to_string(value) : (symbol.empty() ? "?" : symbol); }
};
using SymShape = std::vector<Dim>;
// Among a shape-like vector's symbolic elements (Value::sym_value): a -1, which Reshape reads as "the
// dim the others leave" (Reshape(x, Concat(Shape(x)[0:2], [-1, 16])) is how exporters split heads).
inline constexpr const char* kInferredDim = "(-1)";

SymShape sym_shape(const Shape& s);
// a + b: known sizes add, 0 adds nothing, two named dims give the symbol "a + b" — how exporters name
// a total length (Optimum's attention_mask is [batch_size, past_sequence_length + sequence_length]), so a
// Concat of past and new keys gets the mask's own dim. Anything else is unknown.
Dim dim_sum(const Dim& a, const Dim& b);
// The terms of a symbol dim_sum made ("a + b" → {"a", "b"}; "a" → {"a"}); a parenthesized sum inside a
// product ("2*(a + b)") is one term.
std::vector<std::string> symbol_terms(const std::string& symbol);
// a x b: known sizes multiply, 1 takes nothing, 0 gives 0, symbols make a product "2*batch*sequence_length"
// (the coefficient first, the factors in order, a sum as one factor in parentheses) — how exporters flatten
// [batch, seq, hidden] to [batch*seq, hidden] and grouped attention reads [batch, kv, groups*seq, head].
// Anything else is unknown.
Dim dim_product(const Dim& a, const Dim& b);
// a / b when it divides exactly: the coefficient divides and b's factors are among a's ("2*seq" / 2 is "seq");
// else unknown. What Reshape's -1 takes from a symbolic input.
Dim dim_quotient(const Dim& a, const Dim& b);
// A dim as dim_product writes it: coefficient x factors (sorted; a sum is one factor, "(a + b)"); a known size
// has no factors. nullopt for an unnamed or -1 dim.
struct DimProduct {
  int64_t coefficient = 1;
  std::vector<std::string> factors;
};
std::optional<DimProduct> dim_as_product(const Dim& d);
// The terms of one such factor: a parenthesized sum's ("(a + b)" → {"a", "b"}), else the factor itself.
std::vector<std::string> factor_terms(const std::string& factor);
// a - b: known sizes subtract, 0 takes nothing, a sum loses the terms of b it has ("past + seq" - "past" is
// "seq": the length of Range(past, past + seq), how exporters number a step's positions). Anything else is unknown.
Dim dim_difference(const Dim& a, const Dim& b);
// The concrete shape, if every dim is known.
std::optional<Shape> concrete(const SymShape& s);
std::string sym_shape_str(const SymShape& s);

struct Graph;

struct Attribute {
  enum class Kind { Float, Int, String, Tensor, Graph, Floats, Ints, Strings, Tensors, Graphs, TypeProto };
  Kind kind = Kind::Int;
  float f = 0;
  int64_t i = 0;
  std::string s;
  tern::Tensor t;
  std::shared_ptr<tern::Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<tern::Tensor> tensors;
  std::vector<std::shared_ptr<tern::Graph>> graphs;
  std::string unsupported;  // set when the value could not be decoded (a string tensor…)
};

// A constant a fusion leaves unmade: the tensors that, concatenated along `axis` of `shape`, make it
// (fuse_shared_input_matmuls' [W1 | W2 | …]: a MatMul weight's columns, MatMulNBits' rows as bytes). Its reader
// prepares from the parts where it can — no copy of the whole at load, the parts' file pages dropped as they
// are read (the 1B shape's gate|up: 134 MB beside its panels) — and SessionWeights::prepare makes the whole for
// any other. Along `axis` each part spans its bytes' share of each outer slice (the dims before it).
struct ConstantParts {
  int64_t axis = 0;
  Shape shape;  // the whole's
  std::vector<Tensor> tensors;
  // The concatenation, each part's file pages dropped once it is copied.
  Tensor whole() const;
  // How far `part` spans along the whole's axis (its elements over the whole's outer and inner dims).
  int64_t extent(const Tensor& part) const;
};

struct Value {
  std::string name;
  DType dtype = DType::Undefined;
  std::optional<SymShape> shape;   // nullopt: rank unknown
  bool shape_inferred = false;     // shape set by tern's shape rules (not just declared by the file)
  int producer = -1;               // node index, -1 for graph inputs / initializers
  std::optional<Tensor> constant;  // initializers and folded constants
  // With `constant` its shape-only placeholder (no data): what it concatenates, until its reader is prepared.
  std::shared_ptr<const ConstantParts> parts;
  // For shape-like integer tensors (outputs of Shape and what Gather/Concat/Unsqueeze… make of them):
  // the elements in row-major order as dims, known or symbolic. Lets Reshape(x, Concat(Shape(x)[0], 4))
  // infer [batch, 4] at load time.
  std::optional<SymShape> sym_value;
  std::string unsupported;  // why tern cannot hold this value (string/sequence/float8 type…)
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;        // "" for the default ONNX domain
  int opset = 0;             // opset version of `domain` imported by the model
  std::vector<int> inputs;   // value ids; -1 for an omitted optional input
  std::vector<int> outputs;  // value ids; -1 for an omitted optional output
  std::map<std::string, Attribute> attrs;

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  int64_t attr_int(const std::string& k, int64_t dflt) const;
  float attr_float(const std::string& k, float dflt) const;
  std::string attr_string(const std::string& k, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& k, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attr_floats(const std::string& k, std::vector<float> dflt = {}) const;
  const Attribute* attr(const std::string& k) const;
  const Attribute* attr(const std::string& k, Attribute::Kind kind) const;  // fails when of another kind
  // "Add node 'layer0/add' (domain ai.onnx)": how errors name a node.
  std::string describe() const;
};

struct Graph {
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;  // topologically sorted by the loader
  std::vector<int> inputs;  // runtime inputs (initializers excluded)
  // Inputs a run may leave out, and what it then reads: those a pass adds for callers that know them
  // (passes/fuse_blocks.h's kLogitsPositionsInput), so a run that feeds only the file's inputs still runs.
  std::map<int, Tensor> input_defaults;
  std::vector<int> outputs;
  // Each graph output's shape as the file declares it: what a session reports where its own inference leaves a
  // dim unknown (a Slice whose ends are inputs), as onnxruntime does. Reported only, never planned with.
  std::map<std::string, SymShape> declared_output_shapes;
  std::map<std::string, int> opsets;  // domain → version; "" is the default domain
  std::unordered_map<std::string, int> value_ids;

  int find_value(const std::string& name) const;        // -1 if absent
  int add_value(const std::string& name);               // returns existing id if present
  int add_constant(const std::string& name, Tensor t);  // a value holding `t` (add_value's id, made constant)
  // A value that is the concatenation `parts` describes, left unmade (ConstantParts).
  int add_concatenation(const std::string& name, ConstantParts parts);
};

// The values a node's subgraphs (If's branches, Loop's and Scan's body) read from enclosing scopes by name — ONNX
// Runtime's "implicit inputs": what a subgraph reads or outputs that none of its nodes, inputs or initializers makes,
// nested subgraphs' included, sorted. The loader appends them to the node's inputs in this order, so scheduling,
// liveness and the passes see the dependency, and a control-flow op binds input (explicit count + i) to name i.
std::vector<std::string> outer_values_read(const Node& n);
// Whether the node carries a subgraph.
bool has_subgraph(const Node& n);

// Reorders nodes so every node comes after the producers of its inputs; fails naming a node whose
// input nothing produces, or a cycle.
void topological_sort(Graph& g);
// Recomputes Value::producer from the node list.
void link_producers(Graph& g);

}  // namespace tern
