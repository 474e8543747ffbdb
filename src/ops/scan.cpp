// Scan (opset 9+): runs `body` once per slice of its M scan inputs along their scan axes (forward or reversed),
// carrying N state values from one iteration to the next; each iteration's K scan outputs are stacked along
// their output axes. The body takes (N states, M slices) and makes (N states, K slices). Scan-8's batch axis and
// sequence_lens are not supported.
#include <algorithm>

#include "ops/register_all.h"
#include "ops/subgraph.h"

namespace tern {
namespace {

std::shared_ptr<const Graph> scan_body(const Node& n) {
  if (n.opset < 9) fail_unsupported(n.describe(), ": Scan before opset 9 (a batch axis and sequence_lens) is not supported");
  return subgraph_attr(n, "body");
}

class ScanOp : public Op {
 public:
  explicit ScanOp(const Node& n) : who_(n.describe()), body_(n, scan_body(n), scan_body(n)->inputs.size()) {
    scan_inputs_ = n.attr_int("num_scan_inputs", -1);
    states_ = static_cast<int64_t>(body_.num_inputs()) - scan_inputs_;
    scan_outputs_ = static_cast<int64_t>(body_.num_outputs()) - states_;
    if (scan_inputs_ < 1 || states_ < 0 || scan_outputs_ < 0 || static_cast<int64_t>(n.outputs.size()) != states_ + scan_outputs_)
      fail(who_, ": num_scan_inputs ", scan_inputs_, " with a body of ", body_.num_inputs(), " inputs and ", body_.num_outputs(),
           " outputs and ", n.outputs.size(), " outputs of its own: the body takes N states and M slices and makes N states and K slices");
    input_axes_ = n.attr_ints("scan_input_axes", std::vector<int64_t>(static_cast<size_t>(scan_inputs_), 0));
    input_reversed_ = n.attr_ints("scan_input_directions", std::vector<int64_t>(static_cast<size_t>(scan_inputs_), 0));
    output_axes_ = n.attr_ints("scan_output_axes", std::vector<int64_t>(static_cast<size_t>(scan_outputs_), 0));
    output_reversed_ = n.attr_ints("scan_output_directions", std::vector<int64_t>(static_cast<size_t>(scan_outputs_), 0));
    if (input_axes_.size() != static_cast<size_t>(scan_inputs_) || input_reversed_.size() != static_cast<size_t>(scan_inputs_) ||
        output_axes_.size() != static_cast<size_t>(scan_outputs_) || output_reversed_.size() != static_cast<size_t>(scan_outputs_))
      fail(who_, ": scan_input_axes/directions need one entry per scan input (", scan_inputs_,
           "), scan_output_axes/directions one per scan output (", scan_outputs_, ")");
  }
  OpTraits traits() const override { return {.shapes_from_run = true}; }
  void infer(InferContext& ctx) const override {
    for (int64_t i = 0; i < states_; ++i)  // (a state keeps its dtype and shape from one iteration to the next)
      if (ctx.has(static_cast<int>(i))) ctx.same_as_input(static_cast<int>(i), static_cast<int>(i));
  }
  void run(RunContext& ctx) const override {
    const Node& node = ctx.node;
    std::vector<Tensor> in(static_cast<size_t>(states_ + scan_inputs_));
    for (int64_t i = 0; i < states_; ++i) in[static_cast<size_t>(i)] = ctx.in(static_cast<int>(i));
    std::vector<int64_t> axes(static_cast<size_t>(scan_inputs_));
    int64_t length = -1;
    for (int64_t m = 0; m < scan_inputs_; ++m) {
      const Tensor& x = ctx.in(static_cast<int>(states_ + m));
      const int64_t a = normalize_axis(node, input_axes_[static_cast<size_t>(m)], x.rank());
      axes[static_cast<size_t>(m)] = a;
      if (length >= 0 && x.dim(a) != length)
        fail(who_, ": scan input ", m, " has ", x.dim(a), " slices along axis ", a, ", scan input 0 has ", length);
      length = x.dim(a);
    }
    std::vector<std::vector<Tensor>> stacked(static_cast<size_t>(scan_outputs_));
    for (int64_t t = 0; t < length; ++t) {
      for (int64_t m = 0; m < scan_inputs_; ++m) {
        const int64_t at = input_reversed_[static_cast<size_t>(m)] ? length - 1 - t : t;
        in[static_cast<size_t>(states_ + m)] = slice_along(ctx.in(static_cast<int>(states_ + m)), axes[static_cast<size_t>(m)], at);
      }
      std::vector<Tensor> out = body_.run(in, ctx.inputs, ctx.cpu);
      for (int64_t i = 0; i < states_; ++i) in[static_cast<size_t>(i)] = std::move(out[static_cast<size_t>(i)]);
      for (int64_t k = 0; k < scan_outputs_; ++k)
        stacked[static_cast<size_t>(k)].push_back(std::move(out[static_cast<size_t>(states_ + k)]));
    }
    for (int64_t i = 0; i < states_; ++i) ctx.out(static_cast<int>(i)) = in[static_cast<size_t>(i)];
    for (int64_t k = 0; k < scan_outputs_; ++k) {
      auto& slices = stacked[static_cast<size_t>(k)];
      if (output_reversed_[static_cast<size_t>(k)]) std::reverse(slices.begin(), slices.end());
      const Value& v = body_.graph().values[static_cast<size_t>(body_.graph().outputs[static_cast<size_t>(states_ + k)])];
      const int64_t rank = slices.empty() ? 1 : slices[0].rank() + 1;
      const int64_t axis = normalize_axis(node, output_axes_[static_cast<size_t>(k)], rank);
      ctx.out(static_cast<int>(states_ + k)) = stack_along(slices, axis, who_, v);
    }
  }

 private:
  std::string who_;
  Subgraph body_;
  int64_t scan_inputs_ = 0, states_ = 0, scan_outputs_ = 0;
  std::vector<int64_t> input_axes_, input_reversed_, output_axes_, output_reversed_;
};

}  // namespace

void register_scan(OpRegistry& r) { r.add("", "Scan", factory<ScanOp>()); }

}  // namespace tern
