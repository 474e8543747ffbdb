// DimsOf (domain "tern"): a shape-like integer tensor computed from its inputs' shapes alone — element i
// is constants[i] plus the dims that `terms` (triples: element, input, axis) add to it. Made by
// resolve_shape_values (passes/shape_values.h) in place of the Shape/Gather/Unsqueeze/Concat chains
// exporters build reshape targets with; it reads no input data.
#include <type_traits>

#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class DimsOfOp : public Op, public CostedOp {
 public:
  explicit DimsOfOp(const Node& n)
      : to_(static_cast<DType>(n.attr_int("to", 0))),
        shape_(n.attr_ints("shape")),
        constants_(n.attr_ints("constants")),
        terms_(n.attr_ints("terms")) {
    if (!is_integer(to_)) fail(n.describe(), ": attribute 'to' must be an integer type");
    for (int64_t d : shape_)
      if (d < 0) fail(n.describe(), ": attribute 'shape' has a negative dim");
    if (numel_of(shape_) != static_cast<int64_t>(constants_.size()))
      fail(n.describe(), ": ", constants_.size(), " constants for shape ", shape_str(shape_));
    if (terms_.size() % 3 != 0) fail(n.describe(), ": attribute 'terms' must hold (element, input, axis) triples");
    for (size_t t = 0; t < terms_.size(); t += 3)
      if (terms_[t] < 0 || terms_[t] >= static_cast<int64_t>(constants_.size()) || terms_[t + 1] < 0 ||
          terms_[t + 1] >= static_cast<int64_t>(n.inputs.size()) || terms_[t + 2] < 0)
        fail(n.describe(), ": term ", t / 3, " names an element, input or axis that does not exist");
  }
  OpCost cost(const std::vector<const Tensor*>&, const std::vector<Tensor>& out, const OpState*) const override {
    return {0, static_cast<double>(out[0].nbytes())};
  }
  void infer(InferContext& ctx) const override {
    ctx.set(0, to_, shape_);
    SymShape elements;
    for (int64_t c : constants_) elements.push_back(c == -1 ? Dim::named(kInferredDim) : Dim::known(c));
    for (size_t t = 0; t < terms_.size(); t += 3) {
      const SymShape& s = ctx.shape(static_cast<int>(terms_[t + 1]));
      if (terms_[t + 2] >= static_cast<int64_t>(s.size())) ctx.fail("input ", terms_[t + 1], " has no axis ", terms_[t + 2]);
      Dim& e = elements[static_cast<size_t>(terms_[t])];
      e = dim_sum(e.symbol == kInferredDim ? Dim::known(-1) : e, s[static_cast<size_t>(terms_[t + 2])]);
    }
    ctx.set_sym_value(0, elements);
  }
  // Straight into the output: a decode step that replays its plan allocates nothing here.
  void run(RunContext& ctx) const override {
    for (size_t t = 0; t < terms_.size(); t += 3)
      if (terms_[t + 2] >= ctx.in(static_cast<int>(terms_[t + 1])).rank())
        fail(ctx.node.describe(), ": input ", terms_[t + 1], " has no axis ", terms_[t + 2]);
    Tensor& y = ctx.out(0);
    visit_numeric(to_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        T* out = y.data<T>();
        for (size_t i = 0; i < constants_.size(); ++i) out[i] = static_cast<T>(constants_[i]);
        for (size_t t = 0; t < terms_.size(); t += 3)
          out[terms_[t]] = static_cast<T>(out[terms_[t]] + ctx.in(static_cast<int>(terms_[t + 1])).dim(terms_[t + 2]));
      }
    });
  }

 private:
  DType to_;
  Shape shape_;
  std::vector<int64_t> constants_, terms_;
};

}  // namespace

void register_dims_of(OpRegistry& r) { r.add("tern", "DimsOf", factory<DimsOfOp>()); }

}  // namespace tern
