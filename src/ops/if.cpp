// If: runs then_branch or else_branch as the one-element bool `cond` says; its outputs are that branch's. The
// branches read outer values by name, which the loader made the node's inputs past `cond` (graph/ir.h
// outer_values_read). Optimum's merged decoders are this op on `use_cache_branch`, folded away at load
// (passes/canonicalize.h inline_merged_decoder); what stays runs here, a branch node by node (ops/subgraph.h).
#include "ops/register_all.h"
#include "ops/subgraph.h"

namespace tern {
namespace {

bool read_cond(const std::string& who, const Tensor& c) { return control_value(who, c, DType::Bool, "cond") != 0; }

class IfOp : public Op {
 public:
  explicit IfOp(const Node& n)
      : who_(n.describe()),
        outputs_(n.outputs.size()),
        then_(n, subgraph_attr(n, "then_branch"), 1),
        else_(n, subgraph_attr(n, "else_branch"), 1) {
    for (const Subgraph* b : {&then_, &else_})
      if (b->num_outputs() != n.outputs.size() || b->num_inputs() != 0)
        fail(n.describe(), ": branch '", b->graph().name, "' takes ", b->num_inputs(), " inputs and makes ", b->num_outputs(),
             " outputs; If's branches take none and make its ", n.outputs.size());
  }
  OpTraits traits() const override { return {.shapes_from_run = true}; }
  void infer(InferContext& ctx) const override {
    ctx.check_dtype(0, {DType::Bool});
    const Tensor* c = ctx.value(0);
    const bool taken = c && read_cond(who_, *c);
    for (size_t i = 0; i < outputs_; ++i) {  // what the branches declare: the taken one's, else what both agree on
      const Value& a = then_.graph().values[static_cast<size_t>(then_.graph().outputs[i])];
      const Value& b = else_.graph().values[static_cast<size_t>(else_.graph().outputs[i])];
      const Value& one = taken ? a : b;
      if (c) {
        if (one.dtype != DType::Undefined && one.shape) ctx.set(static_cast<int>(i), one.dtype, *one.shape);
        continue;
      }
      if (a.dtype == DType::Undefined || a.dtype != b.dtype || !a.shape || !b.shape || a.shape->size() != b.shape->size()) continue;
      SymShape s = *a.shape;
      for (size_t d = 0; d < s.size(); ++d)
        if (!(s[d] == (*b.shape)[d])) s[d] = Dim{};
      ctx.set(static_cast<int>(i), a.dtype, s);
    }
  }
  void run(RunContext& ctx) const override {
    const Subgraph& branch = read_cond(who_, ctx.in(0)) ? then_ : else_;
    std::vector<Tensor> outs = branch.run({}, ctx.inputs, ctx.cpu);
    for (size_t i = 0; i < outs.size(); ++i) ctx.out(static_cast<int>(i)) = std::move(outs[i]);
  }

 private:
  std::string who_;  // Node::describe()
  size_t outputs_;
  Subgraph then_, else_;
};

}  // namespace

void register_if(OpRegistry& r) { r.add("", "If", factory<IfOp>()); }

}  // namespace tern
