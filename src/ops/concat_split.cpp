// Concat and Split along one axis: block copies of contiguous rows.
#include <algorithm>

#include "core/checked_math.h"
#include "kernels/cpu/copy.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

// Elements before `axis` (rows) and bytes of one row of the slab from `axis` on.
std::pair<int64_t, size_t> rows_and_bytes(const Tensor& t, int64_t axis) {
  int64_t outer = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= t.dim(k);
  return {outer, outer == 0 ? 0 : t.nbytes() / static_cast<size_t>(outer)};
}

class ConcatOp : public Op {
 public:
  explicit ConcatOp(const Node& n) : axis_(n.attr_int("axis", 0)) {
    if (!n.has_attr("axis")) fail(n.describe(), ": attribute 'axis' is required");
  }
  void infer(InferContext& ctx) const override {
    SymShape out = ctx.shape(0);
    int64_t axis = normalize_axis(ctx.node, axis_, static_cast<int64_t>(out.size()));
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      const SymShape& s = ctx.shape(i);
      if (ctx.dtype(i) != ctx.dtype(0)) ctx.fail("inputs have different types");
      if (s.size() != out.size()) ctx.fail("inputs have different ranks (", sym_shape_str(out), " vs ", sym_shape_str(s), ")");
      for (size_t k = 0; k < s.size(); ++k) {
        if (static_cast<int64_t>(k) == axis) {
          out[k] = dim_sum(out[k], s[k]);
        } else if (!out[k].is_known() && s[k].is_known()) {
          out[k] = s[k];
        } else if (out[k].is_known() && s[k].is_known() && out[k].value != s[k].value) {
          ctx.fail("input ", i, " shape ", sym_shape_str(s), " does not match ", sym_shape_str(ctx.shape(0)), " off axis ", axis);
        }
      }
    }
    ctx.set(0, ctx.dtype(0), out);
    if (out.size() == 1) {  // joining shape-like vectors keeps their symbolic elements
      SymShape joined;
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        auto e = ctx.shape_value(i);
        if (!e) return;
        joined.insert(joined.end(), e->begin(), e->end());
      }
      ctx.set_sym_value(0, joined);
    }
  }
  void run(RunContext& ctx) const override {
    Tensor& y = ctx.out(0);
    int64_t axis = normalize_axis(ctx.node, axis_, y.rank());
    auto [rows, out_row] = rows_and_bytes(y, axis);
    size_t col = 0;
    for (size_t i = 0; i < ctx.inputs.size(); ++i) {
      const Tensor& x = ctx.in(static_cast<int>(i));
      size_t in_row = rows ? x.nbytes() / static_cast<size_t>(rows) : 0;
      kernels::copy_rows(x.raw(), in_row, static_cast<char*>(y.raw()) + col, out_row, rows, in_row);
      col += in_row;
    }
  }

 private:
  int64_t axis_;
};

// Split sizes: input 'split' (opset 13+), attribute 'split' (before), else equal parts
// (opset 18: 'num_outputs', the last part may be smaller).
class SplitOp : public Op {
 public:
  explicit SplitOp(const Node& n) : axis_(n.attr_int("axis", 0)), split_attr_(n.attr_ints("split")) {}
  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    int64_t axis = normalize_axis(ctx.node, axis_, static_cast<int64_t>(in.size()));
    const Dim& d = in[static_cast<size_t>(axis)];
    std::vector<int64_t> sizes = sizes_for(ctx, d);
    for (size_t i = 0; i < sizes.size(); ++i) {
      SymShape s = in;
      s[static_cast<size_t>(axis)] = Dim::known(sizes[i]);
      ctx.set(static_cast<int>(i), ctx.dtype(0), s);
    }
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    int64_t axis = normalize_axis(ctx.node, axis_, x.rank());
    auto [rows, in_row] = rows_and_bytes(x, axis);
    // An output the node omits has no memory: its columns, from the split sizes (worked out only then), are skipped.
    std::vector<int64_t> sizes;
    if (std::any_of(ctx.outputs.begin(), ctx.outputs.end(), [](const Tensor& y) { return !y.defined(); }))
      sizes = sizes_for(ctx.values(), Dim::known(x.dim(axis)));
    const size_t element = rows && x.dim(axis) ? in_row / static_cast<size_t>(x.dim(axis)) : 0;
    size_t col = 0;
    for (size_t i = 0; i < ctx.outputs.size(); ++i) {
      const Tensor& y = ctx.outputs[i];
      const size_t out_row = !y.defined() ? static_cast<size_t>(sizes[i]) * element : rows ? y.nbytes() / static_cast<size_t>(rows) : 0;
      if (y.defined()) kernels::copy_rows(static_cast<const char*>(x.raw()) + col, in_row, y.raw(), out_row, rows, out_row);
      col += out_row;
    }
  }

 private:
  std::vector<int64_t> sizes_for(const InferContext& ctx, const Dim& d) const {
    std::vector<int64_t> sizes = split_attr_;
    if (ctx.has(1)) sizes = ctx.require_value(1).to_i64_vector();
    int64_t n = static_cast<int64_t>(ctx.outputs.size());
    if (sizes.empty()) {
      if (!d.is_known()) throw ShapeUnknown{};
      const int64_t parts = ctx.node.attr_int("num_outputs", n);
      if (parts != n || parts < 1) ctx.fail("num_outputs ", parts, " for ", n, " outputs");
      const int64_t chunk = d.value / parts + (d.value % parts != 0);  // (a ceiling that cannot overflow)
      for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, d.value - checked_mul(i, chunk, "Split"))));
    }
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) ctx.fail("negative split size");
      total = checked_add(total, s, "Split sizes");
    }
    if (d.is_known() && total != d.value) ctx.fail("split sizes sum to ", total, ", axis has ", d.value);
    if (static_cast<int64_t>(sizes.size()) != n) ctx.fail(sizes.size(), " split sizes for ", n, " outputs");
    return sizes;
  }
  int64_t axis_;
  std::vector<int64_t> split_attr_;
};

}  // namespace

void register_concat_split(OpRegistry& r) {
  r.add("", "Concat", factory<ConcatOp>());
  r.add("", "Split", factory<SplitOp>());
}

}  // namespace tern
