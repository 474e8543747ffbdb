// Row normalizations over dims [axis, rank), computed in float32 whatever the storage type:
//   LayerNormalization (opset 17), RMSNormalization (opset 23), and ONNX Runtime's
//   SimplifiedLayerNormalization (RMS), SkipLayerNormalization and SkipSimplifiedLayerNormalization,
//   whose "skip" forms normalize input + skip (+ bias) and can also return that sum (output 3).
// One op; NormParams (ops/normalization.h) say where each operand sits in the node's inputs.
#include <algorithm>
#include <map>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/norm.h"
#include "ops/normalization.h"
#include "ops/register_all.h"

namespace tern {
namespace {}  // namespace

NormParams norm_params(const Node& n) {
  NormParams p;
  static const std::map<std::string, NormParams> layouts = {{"LayerNormalization", {false, -1, 1, 2, -1}},
                                                            {"RMSNormalization", {true, -1, 1, -1, -1}},
                                                            {"SimplifiedLayerNormalization", {true, -1, 1, -1, -1}},
                                                            {"SkipLayerNormalization", {false, 1, 2, 3, 4}},
                                                            {"SkipSimplifiedLayerNormalization", {true, 1, 2, -1, 3}}};
  if (auto it = layouts.find(n.op_type); it != layouts.end()) p = it->second;
  else fail(n.describe(), ": not a row normalization");
  p.axis = n.attr_int("axis", -1);
  p.eps = n.attr_float("epsilon", p.skip >= 0 ? 1e-12f : 1e-5f);
  p.statistics = std::any_of(n.outputs.begin() + std::min<size_t>(1, n.outputs.size()),
                             n.outputs.begin() + std::min<size_t>(3, n.outputs.size()), [](int o) { return o >= 0; });
  return p;
}

namespace {

class NormOp : public Op, public CostedOp {
 public:
  explicit NormOp(const Node& n) : p_(norm_params(n)) {}
  std::string kernel(const std::vector<const Tensor*>&, kernels::Isa isa) const override {
    return kernels::profile_name("normalize_rows", kernels::kernel_table(isa).normalize_rows.name);
  }
  void infer(InferContext& ctx) const override {
    const SymShape& x = ctx.shape(0);
    int64_t axis = normalize_axis(ctx.node, p_.axis, static_cast<int64_t>(x.size()));
    ctx.same_as_input(0, 0);
    SymShape stat = x;
    for (size_t k = static_cast<size_t>(axis); k < stat.size(); ++k) stat[k] = Dim::known(1);
    // Statistics outputs: LayerNorm (Mean, InvStdDev), RMSNorm (InvStdDev), skip forms (Mean, InvStdDev, Sum).
    if (p_.rms && p_.skip < 0) {
      ctx.set(1, DType::Float32, stat);
    } else {
      ctx.set(1, DType::Float32, stat);
      ctx.set(2, DType::Float32, stat);
    }
    if (p_.skip >= 0) ctx.same_as_input(3, 0);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    int64_t axis = normalize_axis(ctx.node, p_.axis, x.rank());
    int64_t n = 1;
    for (int64_t k = axis; k < x.rank(); ++k) n *= x.dim(k);
    const int64_t rows = n ? x.numel() / n : 0;
    Tensor x_scratch, y_scratch;
    const Tensor& xf = as_dtype(x, DType::Float32, x_scratch);
    Tensor& yf = ctx.out(0).dtype() == DType::Float32 ? ctx.out(0) : (y_scratch = Tensor(DType::Float32, x.shape()));
    const Tensor* xin = &xf;
    kernels::NormArgs a;
    Tensor skip_scratch;
    if (p_.skip >= 0) {  // normalize input + skip (+ bias), summed into the Sum output when it is float32, else
                         // into the output itself (the kernel normalizes in place): no scratch in a decode step
      const bool sum_out = ctx.outputs.size() > 3 && ctx.out(3).defined();
      const bool sum_f32 = sum_out && ctx.out(3).dtype() == DType::Float32;
      Tensor& sum = sum_f32 ? ctx.out(3) : yf;
      const Tensor& skip = as_dtype(ctx.in(p_.skip), DType::Float32, skip_scratch);
      const bool bias = p_.bias >= 0 && ctx.has(p_.bias);
      if (skip.shape() == x.shape() && !bias && (!sum_out || sum_f32)) {  // the usual residual add: row by row in the kernel
        a.skip = skip.data<float>();
        a.sum = sum.data<float>();
      } else {  // (a Sum output in another type is converted before the kernel normalizes `sum` in place)
        check_broadcasts_to(ctx.node, skip.shape(), x.shape());  // a skip never grows the input
        kernels::binary_broadcast(xf.data<float>(), xf.shape(), skip.data<float>(), skip.shape(), sum.data<float>(), sum.shape(),
                                  [](float a, float b) { return a + b; });
        if (bias) add_broadcast(ctx.node, sum, ctx.in(p_.bias));
        if (sum_out && !sum_f32) convert_tensor(sum, ctx.out(3));
        xin = &sum;
      }
    }
    a.rows = rows;
    a.n = n;
    a.eps = p_.eps;
    a.rms = p_.rms;
    Tensor scale_scratch, beta_scratch;
    const Tensor& scale = param(ctx, p_.scale, n, scale_scratch);
    const Tensor& beta = param(ctx, p_.beta, n, beta_scratch);
    if (scale.defined()) {
      a.scale = scale.data<float>();
      a.scale_stride = scale.numel() == n ? 0 : n;
    }
    if (beta.defined()) {
      a.bias = beta.data<float>();
      a.bias_stride = beta.numel() == n ? 0 : n;
    }
    const bool plain_rms = p_.rms && p_.skip < 0;
    auto stat = [&](size_t i) {
      return ctx.outputs.size() > i && ctx.out(static_cast<int>(i)).defined() ? ctx.out(static_cast<int>(i)).data<float>() : nullptr;
    };
    if (plain_rms) {
      a.inv_std_out = stat(1);
    } else {
      a.mean_out = stat(1);
      a.inv_std_out = stat(2);
    }
    if (p_.rms && a.mean_out) {  // an RMS norm has no mean: report zeros rather than garbage
      std::fill(a.mean_out, a.mean_out + rows, 0.0f);
      a.mean_out = nullptr;
    }
    kernels::normalize_rows(ctx.cpu, xin->data<float>(), yf.data<float>(), a);
    if (yf.raw() != ctx.out(0).raw()) convert_tensor(yf, ctx.out(0));
  }

 private:
  // x += t, t (the bias, [H]) broadcast to x's shape.
  static void add_broadcast(const Node& node, Tensor& x, const Tensor& t) {
    check_broadcasts_to(node, t.shape(), x.shape());  // a skip or bias never grows the input
    Tensor tf = cast_to(t, DType::Float32);
    kernels::binary_broadcast(x.data<float>(), x.shape(), tf.data<float>(), tf.shape(), x.data<float>(), x.shape(),
                              [](float a, float b) { return a + b; });
  }
  // Scale or beta as float32: as is when it covers one row, else broadcast to X's shape.
  // Scale or bias as float32: the input itself when it is one row of float32, else made in `scratch`
  // (converted, or broadcast to the input's full shape). Undefined when absent.
  const Tensor& param(const RunContext& ctx, int i, int64_t n, Tensor& scratch) const {
    if (i < 0 || !ctx.has(i)) return scratch;
    const Tensor& p = as_dtype(ctx.in(i), DType::Float32, scratch);
    if (p.numel() == n) return p;
    const Tensor& x = ctx.in(0);
    check_broadcasts_to(ctx.node, p.shape(), x.shape());
    Tensor full(DType::Float32, x.shape());
    kernels::broadcast_copy(p.raw(), p.shape(), full.raw(), full.shape(), 4);
    scratch = full;
    return scratch;
  }
  NormParams p_;
};

// EmbedLayerNormalization (com.microsoft): LayerNorm(word[ids] + position[pos] (+ segment[seg])).
// Outputs: the normalized embedding, a mask index (real tokens per row), and the pre-norm sum.
class EmbedLayerNormOp : public Op {
 public:
  explicit EmbedLayerNormOp(const Node& n) : eps_(n.attr_float("epsilon", 1e-12f)) {}
  void infer(InferContext& ctx) const override {
    const SymShape& ids = ctx.shape(0);
    if (ids.size() != 2) ctx.fail("input_ids must be [batch, sequence]");
    SymShape out{ids[0], ids[1], ctx.dim(2, 1)};
    ctx.set(0, ctx.dtype(2), out);
    ctx.set(1, DType::Int32, SymShape{ids[0]});
    ctx.set(2, ctx.dtype(2), out);
  }
  void run(RunContext& ctx) const override {
    const Tensor& ids = ctx.in(0);
    const int64_t B = ids.dim(0), S = ids.dim(1);
    Tensor word = cast_to(ctx.in(2), DType::Float32), pos = cast_to(ctx.in(3), DType::Float32);
    const int64_t H = word.dim(1);
    Tensor seg = ctx.has(4) ? cast_to(ctx.in(4), DType::Float32) : Tensor();
    std::vector<int64_t> id = ids.to_i64_vector(), sid = ctx.has(1) ? ctx.in(1).to_i64_vector() : std::vector<int64_t>{};
    std::vector<int64_t> pid = ctx.has(8) ? ctx.in(8).to_i64_vector() : std::vector<int64_t>{};
    Tensor gamma = cast_to(ctx.in(5), DType::Float32), beta = cast_to(ctx.in(6), DType::Float32);
    // Every table row and vector is read H wide, every id list B*S long: check them all first.
    auto need = [&](bool ok, const char* what) {
      if (!ok) fail(ctx.node.describe(), ": ", what, " does not match input_ids [", B, ", ", S, "] and hidden size ", H);
    };
    need(word.rank() == 2 && pos.rank() == 2 && pos.dim(1) == H, "the word and position tables");
    need(!seg.defined() || (seg.rank() == 2 && seg.dim(1) == H), "the segment table");
    need(sid.empty() || static_cast<int64_t>(sid.size()) == B * S, "segment_ids");
    need(pid.empty() || static_cast<int64_t>(pid.size()) == S || static_cast<int64_t>(pid.size()) == B * S, "position_ids");
    need(gamma.numel() == H && beta.numel() == H, "gamma or beta");
    need(!ctx.has(7) || ctx.in(7).numel() == B * S, "the mask");
    Tensor sum(DType::Float32, {B, S, H});
    auto row = [&](const Tensor& table, int64_t r, const char* what) {
      if (r < 0 || r >= table.dim(0))
        fail(ctx.node.describe(), ": ", what, " index ", r, " is outside the table of ", table.dim(0), " rows");
      return table.data<float>() + r * H;
    };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t e = b * S + s;
        const int64_t p = pid.empty() ? s : pid[static_cast<size_t>(pid.size() == static_cast<size_t>(S) ? s : e)];
        const float* w = row(word, id[static_cast<size_t>(e)], "word");
        const float* q = row(pos, p, "position");
        const float* g = seg.defined() && !sid.empty() ? row(seg, sid[static_cast<size_t>(e)], "segment") : nullptr;
        float* o = sum.data<float>() + e * H;
        for (int64_t h = 0; h < H; ++h) o[h] = w[h] + q[h] + (g ? g[h] : 0.0f);
      }
    Tensor y(DType::Float32, {B, S, H});
    kernels::NormArgs a;
    a.rows = B * S;
    a.n = H;
    a.eps = eps_;
    a.scale = gamma.data<float>();
    a.bias = beta.data<float>();
    kernels::normalize_rows(ctx.cpu, sum.data<float>(), y.data<float>(), a);
    convert_tensor(y, ctx.out(0));
    if (ctx.outputs.size() > 1 && ctx.out(1).defined()) {
      int32_t* mi = ctx.out(1).data<int32_t>();
      for (int64_t b = 0; b < B; ++b) {
        int64_t real = S;
        if (ctx.has(7)) {
          real = 0;
          for (int64_t s = 0; s < S; ++s) real += ctx.in(7).at_i64(b * S + s) != 0;
        }
        mi[b] = static_cast<int32_t>(real);
      }
    }
    if (ctx.outputs.size() > 2 && ctx.out(2).defined()) convert_tensor(sum, ctx.out(2));
  }

 private:
  float eps_;
};

}  // namespace

void register_normalization(OpRegistry& r) {
  r.add("", "LayerNormalization", factory<NormOp>());
  r.add("", "RMSNormalization", factory<NormOp>());
  // ONNX Runtime registers SimplifiedLayerNormalization in the default domain (not com.microsoft).
  r.add("", "SimplifiedLayerNormalization", factory<NormOp>());
  r.add("com.microsoft", "SkipLayerNormalization", factory<NormOp>());
  r.add("com.microsoft", "SkipSimplifiedLayerNormalization", factory<NormOp>());
  r.add("com.microsoft", "EmbedLayerNormalization", factory<EmbedLayerNormOp>());
}

}  // namespace tern
