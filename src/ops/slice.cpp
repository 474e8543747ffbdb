// Slice: starts/ends/axes/steps from inputs (opset 10+) or attributes (before), clamped as numpy does.
#include <limits>

#include "kernels/cpu/copy.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class SliceOp : public Op {
 public:
  explicit SliceOp(const Node& n)
      : from_inputs_(n.opset >= 10), starts_(n.attr_ints("starts")), ends_(n.attr_ints("ends")), axes_(n.attr_ints("axes")) {}

  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    Params p;
    try {
      p = params(ctx, static_cast<int64_t>(in.size()));
    } catch (const ShapeUnknown&) {  // bounds computed at run time: the rank stays, sliced dims unknown
      ctx.set(0, ctx.dtype(0), rank_only(ctx, in));
      return;
    }
    SymShape out = in;
    for (size_t k = 0; k < p.axes.size(); ++k) {
      size_t a = static_cast<size_t>(p.axes[k]);
      if (!in[a].is_known()) {
        out[a] = Dim{};
        continue;
      }
      auto [start, count] = clamp(in[a].value, p.starts[k], p.ends[k], p.steps[k]);
      out[a] = Dim::known(count);
      // Slicing a shape-like vector (Shape(x)[1:2]) keeps its picked elements symbolic.
      if (auto e = ctx.shape_value(0); e && in.size() == 1) {
        SymShape picked;
        for (int64_t i = 0; i < count; ++i) picked.push_back((*e)[static_cast<size_t>(start + i * p.steps[k])]);
        ctx.set(0, ctx.dtype(0), out);
        ctx.set_sym_value(0, picked);
        return;
      }
    }
    ctx.set(0, ctx.dtype(0), out);
  }

  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    std::vector<kernels::Dims> index(static_cast<size_t>(x.rank()));
    for (int64_t k = 0; k < x.rank(); ++k)
      for (int64_t i = 0; i < x.dim(k); ++i) index[static_cast<size_t>(k)].push_back(i);
    Params p = params(ctx.values(), x.rank());
    for (size_t k = 0; k < p.axes.size(); ++k) {
      int64_t a = p.axes[k];
      auto [start, count] = clamp(x.dim(a), p.starts[k], p.ends[k], p.steps[k]);
      kernels::Dims& idx = index[static_cast<size_t>(a)];
      idx.clear();
      for (int64_t i = 0; i < count; ++i) idx.push_back(start + i * p.steps[k]);
    }
    kernels::separable_gather(x.raw(), x.shape(), ctx.out(0).raw(), ctx.out(0).shape(), index, nullptr, dtype_size(x.dtype()));
  }

 private:
  // The input's shape with every dim the slice may cut made unknown (all, unless the axes input is a
  // constant). Only bounds given as inputs (opset >= 10) can be unknown.
  SymShape rank_only(const InferContext& ctx, SymShape out) const {
    const std::vector<int64_t> axes = ctx.has(3) && ctx.value(3) ? ctx.value(3)->to_i64_vector() : std::vector<int64_t>{};
    if (axes.empty()) return SymShape(out.size());
    for (int64_t a : axes) out[static_cast<size_t>(normalize_axis(ctx.node, a, static_cast<int64_t>(out.size())))] = Dim{};
    return out;
  }

  struct Params {
    std::vector<int64_t> starts, ends, axes, steps;
  };

  Params params(const InferContext& ctx, int64_t rank) const {
    Params p;
    if (from_inputs_) {
      p.starts = ctx.require_value(1).to_i64_vector();
      p.ends = ctx.require_value(2).to_i64_vector();
      if (ctx.has(3)) p.axes = ctx.require_value(3).to_i64_vector();
      if (ctx.has(4)) p.steps = ctx.require_value(4).to_i64_vector();
    } else {
      p.starts = starts_;
      p.ends = ends_;
      p.axes = axes_;
    }
    if (p.starts.size() != p.ends.size()) ctx.fail("starts and ends have different lengths");
    if (p.axes.empty())
      for (size_t i = 0; i < p.starts.size(); ++i) p.axes.push_back(static_cast<int64_t>(i));
    if (p.steps.empty()) p.steps.assign(p.starts.size(), 1);
    if (p.axes.size() != p.starts.size() || p.steps.size() != p.starts.size())
      ctx.fail("starts, ends, axes and steps must have the same length");
    std::vector<char> seen(static_cast<size_t>(rank), 0);
    for (size_t k = 0; k < p.axes.size(); ++k) {
      p.axes[k] = normalize_axis(ctx.node, p.axes[k], rank);
      if (seen[static_cast<size_t>(p.axes[k])]++) ctx.fail("axis ", p.axes[k], " repeated");
      if (p.steps[k] == 0) ctx.fail("step is zero");
    }
    return p;
  }

  // First index and element count of start:end:step over a dim of size d.
  // (Counted as (span − 1) / stride + 1, never span + stride − 1: a step near ±2^63 — INT64_MIN has no
  // negation — is a legal way to take one element, and must not overflow.)
  static std::pair<int64_t, int64_t> clamp(int64_t d, int64_t start, int64_t end, int64_t step) {
    if (start < 0) start += d;
    if (end < 0) end += d;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, d);
      end = std::clamp<int64_t>(end, 0, d);
      return {start, end > start ? (end - start - 1) / step + 1 : 0};
    }
    start = std::clamp<int64_t>(start, 0, d - 1);
    end = std::clamp<int64_t>(end, -1, d - 1);
    const int64_t stride = step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
    return {start, start > end ? (start - end - 1) / stride + 1 : 0};
  }

  bool from_inputs_;
  std::vector<int64_t> starts_, ends_, axes_;
};

}  // namespace

void register_slice(OpRegistry& r) { r.add("", "Slice", factory<SliceOp>()); }

}  // namespace tern
