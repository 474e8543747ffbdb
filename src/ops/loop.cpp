// Loop: runs `body` while the trip count M (optional) and the condition (optional) allow, carrying N values
// from one iteration to the next; each iteration's K scan outputs are stacked along a new first axis. The body
// takes (iteration number, condition, N carried values) and makes (condition, N carried values, K scan outputs).
// Sequence- and optional-typed carried values are not supported (tern's tensors only). ONNX's own expansions use
// it (Range as a function); LLM exports do not. A Loop that can never end — no trip count, and a body that hands its
// condition back unchanged (directly or through Identity) — is refused when it would start, not run forever.
#include <limits>

#include "ops/register_all.h"
#include "ops/subgraph.h"

namespace tern {
namespace {

class LoopOp : public Op {
 public:
  explicit LoopOp(const Node& n) : who_(n.describe()), body_(n, subgraph_attr(n, "body"), subgraph_attr(n, "body")->inputs.size()) {
    carried_ = static_cast<int64_t>(body_.num_inputs()) - 2;
    scans_ = static_cast<int64_t>(body_.num_outputs()) - 1 - carried_;
    if (carried_ < 0 || scans_ < 0 || static_cast<int64_t>(n.outputs.size()) != carried_ + scans_)
      fail(who_, ": its body takes ", body_.num_inputs(), " inputs and makes ", body_.num_outputs(), " outputs; Loop with ",
           n.outputs.size(), " outputs needs 2 + N inputs and 1 + N + K outputs, N + K its own");
    const Graph& b = body_.graph();
    int cond = b.outputs[0];  // back through Identity to where the body's condition comes from
    for (size_t steps = 0, moved = 1; moved && steps <= b.nodes.size(); ++steps) {  // (bounded: a hostile cycle)
      moved = 0;
      for (const Node& p : b.nodes)
        if (p.op_type == "Identity" && p.domain.empty() && !p.inputs.empty() && !p.outputs.empty() && p.outputs[0] == cond) {
          cond = p.inputs[0];
          moved = 1;
        }
    }
    cond_passed_through_ = cond == b.inputs[1];
  }
  OpTraits traits() const override { return {.shapes_from_run = true}; }
  void infer(InferContext& ctx) const override {
    for (int64_t i = 0; i < carried_; ++i)  // (a carried value keeps its dtype; its shape may change)
      if (ctx.has(static_cast<int>(2 + i))) {
        const Value& out = body_.graph().values[static_cast<size_t>(body_.graph().outputs[static_cast<size_t>(1 + i)])];
        if (out.shape && *out.shape == ctx.shape(static_cast<int>(2 + i))) ctx.set(static_cast<int>(i), ctx.dtype(2 + i), *out.shape);
      }
  }
  void run(RunContext& ctx) const override {
    int64_t trips = std::numeric_limits<int64_t>::max();
    if (ctx.has(0)) trips = control_value(who_, ctx.in(0), DType::Int64, "M");
    bool go = !ctx.has(1) || control_value(who_, ctx.in(1), DType::Bool, "cond") != 0;
    if (go && !ctx.has(0) && cond_passed_through_)
      fail(who_, ": never ends: it has no trip count M, and its body hands its condition (true) back unchanged");
    std::vector<Tensor> in(static_cast<size_t>(2 + carried_));
    for (int64_t i = 0; i < carried_; ++i) {
      if (!ctx.has(static_cast<int>(2 + i))) fail(who_, ": carried value ", i, " has no initial value");
      in[static_cast<size_t>(2 + i)] = ctx.in(static_cast<int>(2 + i));
    }
    std::vector<std::vector<Tensor>> stacked(static_cast<size_t>(scans_));
    for (int64_t t = 0; t < trips && go; ++t) {
      in[0] = Tensor::scalar<int64_t>(t);
      in[1] = Tensor::scalar<bool>(go);
      std::vector<Tensor> out = body_.run(in, ctx.inputs, ctx.cpu);
      go = control_value(who_, out[0], DType::Bool, "its body's condition") != 0;
      for (int64_t i = 0; i < carried_; ++i) in[static_cast<size_t>(2 + i)] = std::move(out[static_cast<size_t>(1 + i)]);
      for (int64_t k = 0; k < scans_; ++k) stacked[static_cast<size_t>(k)].push_back(std::move(out[static_cast<size_t>(1 + carried_ + k)]));
    }
    for (int64_t i = 0; i < carried_; ++i) ctx.out(static_cast<int>(i)) = in[static_cast<size_t>(2 + i)];
    for (int64_t k = 0; k < scans_; ++k) {
      const Value& v = body_.graph().values[static_cast<size_t>(body_.graph().outputs[static_cast<size_t>(1 + carried_ + k)])];
      ctx.out(static_cast<int>(carried_ + k)) = stack_along(stacked[static_cast<size_t>(k)], 0, who_, v);
    }
  }

 private:
  std::string who_;
  Subgraph body_;
  int64_t carried_ = 0, scans_ = 0;
  bool cond_passed_through_ = false;  // the body's condition output is its condition input
};

}  // namespace

void register_loop(OpRegistry& r) { r.add("", "Loop", factory<LoopOp>()); }

}  // namespace tern
