// Pad (constant / edge / reflect / wrap, negative pads crop) and Tile: both map each output index to a
// source index per dimension, so both run on the separable gather kernel.
#include "core/checked_math.h"
#include "kernels/cpu/copy.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class PadOp : public Op {
 public:
  explicit PadOp(const Node& n)
      : mode_(n.attr_string("mode", "constant")),
        pads_attr_(n.attr_ints("pads")),
        value_attr_(n.attr_float("value", 0)),
        from_inputs_(n.opset >= 11) {
    if (mode_ != "constant" && mode_ != "edge" && mode_ != "reflect" && mode_ != "wrap") fail(n.describe(), ": unknown mode '", mode_, "'");
  }
  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    std::vector<int64_t> pads = full_pads(ctx, static_cast<int64_t>(in.size()));
    SymShape out = in;
    size_t r = in.size();
    for (size_t k = 0; k < r; ++k) {
      if (!in[k].is_known()) continue;
      const int64_t d = checked_add(checked_add(in[k].value, pads[k], "Pad"), pads[k + r], "Pad");
      if (d < 0) ctx.fail("pads ", shape_str(pads), " crop more than the input ", sym_shape_str(in));
      out[k] = Dim::known(d);
    }
    ctx.set(0, ctx.dtype(0), out);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    std::vector<int64_t> pads = full_pads(ctx.values(), x.rank());
    const size_t r = static_cast<size_t>(x.rank());
    std::vector<kernels::Dims> index(r);
    for (size_t k = 0; k < r; ++k) {
      int64_t d = x.shape()[k];
      for (int64_t i = 0; i < y.shape()[k]; ++i) index[k].push_back(source_index(i - pads[k], d));
    }
    Tensor fill = ctx.has(2) ? ctx.in(2) : cast_to(Tensor::scalar<float>(value_attr_), x.dtype());
    kernels::separable_gather(x.raw(), x.shape(), y.raw(), y.shape(), index, fill.raw(), dtype_size(x.dtype()));
  }

 private:
  int64_t source_index(int64_t j, int64_t d) const {
    if (j >= 0 && j < d) return j;
    if (mode_ == "constant" || d == 0) return -1;
    if (mode_ == "edge") return j < 0 ? 0 : d - 1;
    if (mode_ == "wrap") return ((j % d) + d) % d;
    if (d == 1) return 0;  // reflect
    int64_t period = 2 * (d - 1);
    int64_t m = ((j % period) + period) % period;
    return m < d ? m : period - m;
  }
  // Pads for every axis, [begin_0..begin_r-1, end_0..end_r-1].
  std::vector<int64_t> full_pads(const InferContext& ctx, int64_t r) const {
    std::vector<int64_t> pads = from_inputs_ ? ctx.require_value(1).to_i64_vector() : pads_attr_;
    for (int64_t p : pads)  // (so that an output index minus its pad stays an int64)
      if (p < -kMaxPad || p > kMaxPad) ctx.fail("pad ", p, " is out of range (at most 2^62 either way)");
    std::vector<int64_t> axes;
    if (ctx.has(3)) axes = ctx.require_value(3).to_i64_vector();
    if (axes.empty()) {
      if (static_cast<int64_t>(pads.size()) != 2 * r) ctx.fail("pads has ", pads.size(), " entries for rank ", r);
      return pads;
    }
    if (pads.size() != 2 * axes.size()) ctx.fail("pads has ", pads.size(), " entries for ", axes.size(), " axes");
    std::vector<int64_t> full(static_cast<size_t>(2 * r), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = normalize_axis(ctx.node, axes[i], r);
      full[static_cast<size_t>(a)] = pads[i];
      full[static_cast<size_t>(a + r)] = pads[i + axes.size()];
    }
    return full;
  }
  static constexpr int64_t kMaxPad = int64_t{1} << 62;
  std::string mode_;
  std::vector<int64_t> pads_attr_;
  float value_attr_;
  bool from_inputs_;
};

class TileOp : public Op {
 public:
  explicit TileOp(const Node&) {}
  // Repeats computed from the input's dims (Optimum's RoPE tiles its frequencies by the batch size) leave
  // the rank known — the input's — and a dim of 1 repeated r times is r, symbolic or not.
  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    const std::optional<SymShape> rep = ctx.shape_value(1);
    const SymShape& rep_shape = ctx.shape(1);
    const size_t count = rep ? rep->size() : rep_shape.size() == 1 && rep_shape[0].is_known() ? static_cast<size_t>(rep_shape[0].value) : 0;
    if (count != in.size()) {
      if (!rep && (rep_shape.size() != 1 || !rep_shape[0].is_known())) throw ShapeUnknown{};
      ctx.fail("repeats has ", count, " entries for rank ", in.size());
    }
    SymShape out(in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      const Dim r = rep ? (*rep)[k] : Dim{};
      if (r.symbol == kInferredDim) ctx.fail("negative repeat");
      if (r.is_known() && in[k].is_known()) out[k] = Dim::known(checked_mul(in[k].value, r.value, "Tile"));
      else if (r.is_known() && r.value == 1) out[k] = in[k];
      else if (in[k].is_known() && in[k].value == 1) out[k] = r;
    }
    ctx.set(0, ctx.dtype(0), out);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    std::vector<kernels::Dims> index(static_cast<size_t>(x.rank()));
    for (size_t k = 0; k < index.size(); ++k)
      for (int64_t i = 0; i < y.shape()[k]; ++i) index[k].push_back(i % x.shape()[k]);
    kernels::separable_gather(x.raw(), x.shape(), y.raw(), y.shape(), index, nullptr, dtype_size(x.dtype()));
  }
};

}  // namespace

void register_pad_tile(OpRegistry& r) {
  r.add("", "Pad", factory<PadOp>());
  r.add("", "Tile", factory<TileOp>());
}

}  // namespace tern
