// The body of a control-flow op — If's branches, Loop's and Scan's body — run node by node as constant folding
// runs one (ops/execute.h): each node's shape rule on the actual tensors, its kernel on heap memory, nothing
// prepacked. Control flow is rare in the graphs tern runs (a merged decoder's If is folded away at load:
// passes/canonicalize.h inline_merged_decoder), so the body runs plainly rather than through a session of its own.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ops/op.h"

namespace tern {

class Subgraph {
 public:
  // `owner` carries `body` as an attribute; its inputs past `explicit_inputs` are the values its subgraphs read
  // from enclosing scopes (graph/ir.h outer_values_read), which this body reads some of.
  Subgraph(const Node& owner, std::shared_ptr<const Graph> body, size_t explicit_inputs);
  const Graph& graph() const { return *body_; }
  size_t num_inputs() const { return body_->inputs.size(); }
  size_t num_outputs() const { return body_->outputs.size(); }
  // The body's outputs for its formal `inputs` (in order); `owner_inputs`: all of the owner's (RunContext::inputs),
  // the outer values among them. Outputs may share memory with the inputs (a branch returning an outer value).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<const Tensor*>& owner_inputs,
                          const kernels::Context& cpu) const;

 private:
  std::string owner_;  // how errors name the owner (Node::describe)
  std::shared_ptr<const Graph> body_;
  std::vector<std::unique_ptr<Op>> ops_;
  std::vector<std::pair<int, size_t>> outer_;    // body value id ← owner input index
  std::vector<std::vector<int>> release_after_;  // per body node, the values whose last reader it is
};

// Scan's and Loop's slicing: slice `t` of x along `axis` (that axis gone), and slices stacked along a new `axis`
// (each the same shape and dtype; none gives [0] of the dtype the body declares for them, float32 where it declares
// none). `who` names the node in errors.
Tensor slice_along(const Tensor& x, int64_t axis, int64_t t);
Tensor stack_along(const std::vector<Tensor>& slices, int64_t axis, const std::string& who, const Value& declared);
// The one element of a control value (If's cond; Loop's M and conditions) of `dtype`, as int64; fails naming `what`.
int64_t control_value(const std::string& who, const Tensor& t, DType dtype, const char* what);

// The graph attribute `name` of `node`; fails naming the node when it has none.
std::shared_ptr<const Graph> subgraph_attr(const Node& node, const std::string& name);

}  // namespace tern
