// MatMul (numpy semantics: 1-D promotion, broadcast batch dims) and Gemm. float16/bfloat16 are
// computed in float32.
#include <optional>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/nbits.h"
#include "ops/matmul.h"
#include "ops/register_all.h"

namespace tern {
namespace {

// Runs f with the GEMM compute type for `t` (float for half types) and the tensors converted to it.
template <typename F>
void with_compute_type(DType t, F&& f) {
  switch (t) {
    case DType::Float32:
    case DType::Float16:
    case DType::BFloat16: f(TypeTag<float>{}); break;
#ifndef TERN_MINIMAL
    case DType::Float64: f(TypeTag<double>{}); break;
    case DType::Int32: f(TypeTag<int32_t>{}); break;
    case DType::Int64: f(TypeTag<int64_t>{}); break;
    case DType::UInt32: f(TypeTag<uint32_t>{}); break;
    case DType::UInt64: f(TypeTag<uint64_t>{}); break;
    default: fail_unsupported("MatMul/Gemm on ", dtype_name(t), " is not supported");
#else
    default:
      fail_unsupported("MatMul/Gemm on ", dtype_name(t),
                       " is not supported (a TERN_MINIMAL build multiplies "
                       "float32, float16 and bfloat16 only)");
#endif
  }
}

// MatMul, and com.microsoft FusedMatMul: alpha · op(A) · op(B), op transposing the last two axes when
// transA / transB is set (what fuse_kv_matmuls makes of Q·Kᵀ so the key cache is read where it lies).
class MatMulOp : public RepackedMatMul, public PacksWeights<MatMulWeights>, public CostedOp {
 public:
  explicit MatMulOp(const Node& n)
      : trans_a_(n.attr_int("transA", 0) != 0), trans_b_(n.attr_int("transB", 0) != 0), alpha_(n.attr_float("alpha", 1)) {
    if (n.attr_int("transBatchA", 0) || n.attr_int("transBatchB", 0))
      fail_unsupported(n.describe(), ": transBatchA / transBatchB are not supported");
  }
  // A constant 2-D float32/float16 weight — [K, N], or [N, K] read transposed (transB) — is repacked once:
  // into the kernels' panel layout (as stored, or as fp16/bf16), or block-quantized to int8/int4; the
  // original is not read again. With a pack the repacked weight comes from it, and the original may be a
  // placeholder the pack left out.
  // A weight a fusion concatenated (q|k|v, gate|up) and left as its parts is packed part by part, each part's
  // panels or row groups where the whole's would be: no copy of the whole at load.
  std::vector<int> prepare(const std::vector<const Tensor*>& constants, const PackTarget& options, MatMulWeights& into) const override {
    const Tensor* B = constants.size() > 1 ? constants[1] : nullptr;
    if (trans_a_ || alpha_ != 1.0f || !B || B->rank() != 2 || (B->dtype() != DType::Float32 && B->dtype() != DType::Float16) ||
        B->numel() == 0) {
      options.ensure_whole(1);
      return {};
    }
    const int64_t K = B->dim(trans_b_ ? 1 : 0), N = B->dim(trans_b_ ? 0 : 1);
    auto source = [&]() -> const Tensor& {
      if (!B->raw())
        fail("its weight was left out of the pack, which holds no prepared form of it for --weights ", weight_format_name(options.weights),
             ": run `tern pack` again");
      return *B;
    };
    if (options.weights == WeightFormat::Int8 || options.weights == WeightFormat::Int4) {
      const int64_t bits = options.weights == WeightFormat::Int8 ? 8 : 4, block = 32, k_blocks = (K + block - 1) / block;
      into.activations = nbits_activations(options, false);
      // W as float32 [K, N] (or [K, N_i] for part W_i), quantized by columns.
      auto quantize = [&](const Tensor& from, bool transposed) {
        Tensor W = cast_to(from, DType::Float32);
        const int64_t n = W.dim(transposed ? 0 : 1);
        if (transposed) {
          Tensor t(DType::Float32, {K, n});
          kernels::transpose(W.raw(), {n, K}, {1, 0}, t.raw(), sizeof(float));
          W = t;
        }
        return kernels::quantize_nbits(options.cpu, W.data<float>(), K, n, bits, block);
      };
      // A concatenation's parts [K, N_i], each quantized alone (its rows of the whole's), its file pages then dropped.
      auto quantize_parts = [&](const std::vector<const Tensor*>& parts) {
        std::vector<kernels::QuantizedWeights> quantized;
        for (const Tensor* part : parts) {
          quantized.push_back(quantize(*part, false));
          if (part->buffer()) part->buffer()->drop_pages(part->raw(), part->nbytes());
        }
        return quantized;
      };
      static const uint8_t any_zero_points = 0;  // (quantize_nbits makes them)
      kernels::NBitsWeights shape;
      shape.N = N, shape.K = K, shape.bits = bits, shape.block = block, shape.zp_packed = &any_zero_points;
      if (regroups_nbits(shape, options, into.activations)) {
        const std::vector<const Tensor*> parts = options.stacked_parts(1, kernels::kNBitsGroupRows);
        into.quantized = prepared_nbits_groups(options, std::string(weight_format_name(options.weights)) + " groups", shape, [&] {
          if (parts.empty()) return kernels::group_nbits_rows(options.cpu, quantize(source(), trans_b_).view());
          const std::vector<kernels::QuantizedWeights> quantized = quantize_parts(parts);
          std::vector<kernels::NBitsWeights> views;
          for (const kernels::QuantizedWeights& q : quantized) views.push_back(q.view());
          return kernels::group_nbits_rows(options.cpu, views);
        });
        return {1};
      }
      // (Its rows in the file's layout: N-major, so a concatenation's parts quantized one by one stack as bytes.)
      const std::vector<const Tensor*> columns = options.stacked_parts(1, 1);
      const auto parts = options.prepared(weight_format_name(options.weights),
                                          {{DType::UInt8, N * k_blocks * block * bits / 8},
                                           {DType::UInt8, N * ((k_blocks * bits + 7) / 8)},
                                           {DType::Float32, N * k_blocks}},
                                          [&] {
                                            if (columns.empty()) {
                                              const kernels::QuantizedWeights q = quantize(source(), trans_b_);
                                              return std::vector<Tensor>{q.data, q.zero_points, q.scales};
                                            }
                                            // (data, zero points and scales: each the parts' bytes one after another)
                                            std::vector<ConstantParts> rows(3, ConstantParts{0, {0}, {}});
                                            for (const kernels::QuantizedWeights& q : quantize_parts(columns))
                                              for (size_t r = 0; r < 3; ++r) {
                                                rows[r].tensors.push_back(r == 0 ? q.data : r == 1 ? q.zero_points : q.scales);
                                                rows[r].shape[0] += rows[r].tensors.back().numel();
                                              }
                                            std::vector<Tensor> stacked;
                                            for (const ConstantParts& r : rows) stacked.push_back(r.whole());
                                            return stacked;
                                          });
      into.quantized = kernels::QuantizedWeights{N, K, bits, block, parts[0], parts[1], parts[2]};
      return {1};
    }
    const DType type = options.weights == WeightFormat::Float16    ? DType::Float16
                       : options.weights == WeightFormat::BFloat16 ? DType::BFloat16
                                                                   : B->dtype();
    const int64_t elements = (N + kernels::kPanel - 1) / kernels::kPanel * kernels::kPanel * K;
    const std::vector<const Tensor*> columns = trans_b_ ? std::vector<const Tensor*>{} : options.stacked_parts(1, kernels::kPanel);
    if (trans_b_) options.ensure_whole(1);
    const auto parts = options.prepared(std::string("panels ") + dtype_name(type), {{type, elements}}, [&] {
      const kernels::PackedMatrix p =
          columns.empty() ? kernels::pack_matrix(options.cpu, source(), type, trans_b_) : kernels::pack_matrix(options.cpu, columns, type);
      return std::vector<Tensor>{Tensor(type, {elements}, p.panels)};
    });
    into.packed = kernels::PackedMatrix{K, N, type, parts[0].buffer()};
    return {1};
  }
  bool packs_from_parts() const override { return true; }
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState*) const override {
    const Tensor& A = *in[0];
    const int64_t K = A.rank() ? A.dim(-1) : 1, N = out[0].rank() ? out[0].dim(-1) : 1;
    const double rows = K ? static_cast<double>(out[0].numel()) / static_cast<double>(N) : 0;
    const double weights = packed_bytes() ? static_cast<double>(packed_bytes()) : static_cast<double>(in[1]->nbytes());
    return {2.0 * rows * static_cast<double>(N) * static_cast<double>(K),
            static_cast<double>(A.nbytes()) + weights + static_cast<double>(out[0].nbytes())};
  }
  std::string kernel(const std::vector<const Tensor*>& in, kernels::Isa isa) const override {
    const Tensor& A = *in[0];
    const MatMulWeights& w = prepared();
    if (w.packed) return kernels::matmul_packed_kernel(A.numel() / w.packed->K, *w.packed, isa);
    if (w.quantized) return kernels::matmul_nbits_kernel(A.numel() / w.quantized->K, w.quantized->view(), w.activations, isa);
    return {};
  }
  int64_t packed_bytes() const override {
    const MatMulWeights& w = prepared();
    if (w.packed) return w.packed->bytes();
    if (w.quantized) return w.quantized->bytes();
    return 0;
  }
  void infer(InferContext& ctx) const override {
    if (ctx.dtype(0) != ctx.dtype(1)) ctx.fail("A and B have different types");
    SymShape a = ctx.shape(0), b = ctx.shape(1);
    if (a.empty() || b.empty()) ctx.fail("inputs must have rank >= 1");
    if ((trans_a_ && a.size() < 2) || (trans_b_ && b.size() < 2)) ctx.fail("a transposed input must have rank >= 2");
    if (trans_a_) std::swap(a[a.size() - 1], a[a.size() - 2]);
    if (trans_b_) std::swap(b[b.size() - 1], b[b.size() - 2]);
    bool a1 = a.size() == 1, b1 = b.size() == 1;
    if (a1) a.insert(a.begin(), Dim::known(1));
    if (b1) b.push_back(Dim::known(1));
    const Dim &k1 = a.back(), &k2 = b[b.size() - 2];
    if (k1.is_known() && k2.is_known() && k1.value != k2.value)
      ctx.fail("inner dimensions differ: ", sym_shape_str(ctx.shape(0)), " x ", sym_shape_str(ctx.shape(1)));
    SymShape out = broadcast_shapes(ctx.node, SymShape(a.begin(), a.end() - 2), SymShape(b.begin(), b.end() - 2));
    if (!a1) out.push_back(a[a.size() - 2]);
    if (!b1) out.push_back(b.back());
    ctx.set(0, ctx.dtype(0), out);
  }
  const kernels::PackedMatrix* packed() const override { return prepared().packed ? &*prepared().packed : nullptr; }
  const kernels::QuantizedWeights* quantized() const override { return prepared().quantized ? &*prepared().quantized : nullptr; }
  void run(RunContext& ctx) const override {
    // The common case — activations [.., M, K] times a 2-D weight [K, N] — is one GEMM over all rows,
    // on the repacked weight when it is a constant.
    const Tensor &A = ctx.in(0), &B = ctx.in(1);
    const MatMulWeights& w = prepared();
    if (w.packed || w.quantized) {  // computed in float32 whatever the model's float type
      Tensor a_f32, y_f32;
      const Tensor& a = as_dtype(A, DType::Float32, a_f32);
      Tensor& y = ctx.out(0);
      if (y.dtype() != DType::Float32) y_f32 = Tensor(DType::Float32, y.shape());
      float* out = y_f32.defined() ? y_f32.data<float>() : y.data<float>();
      const int64_t K = w.packed ? w.packed->K : w.quantized->K, M = a.numel() / K;
      if (M > 0 && w.packed) kernels::matmul_packed(ctx.cpu, a.data<float>(), M, *w.packed, out);
      else if (M > 0) kernels::matmul_nbits(ctx.cpu, a.data<float>(), M, w.quantized->view(), out, w.activations);
      if (y_f32.defined()) convert_tensor(y_f32, y);
      return;
    }
    if (plain() && A.rank() >= 2 && B.rank() == 2 && A.dtype() == DType::Float32 && ctx.out(0).dtype() == DType::Float32) {
      const int64_t K = B.dim(0), N = B.dim(1), M = K ? A.numel() / K : 0;
      if (M >= 1 && M <= kernels::kGemvMaxRows && K > 0) {  // decode: stream the weights once
        kernels::gemv_f32(ctx.cpu, A.data<float>(), M, K, B.data<float>(), K, N, ctx.out(0).data<float>(), N);
        return;
      }
      kernels::gemm<float>(ctx.cpu, false, false, M, N, K, 1.0f, A.data<float>(), K, B.data<float>(), N, 0.0f, ctx.out(0).data<float>(), N);
      return;
    }
    Shape as = A.shape(), bs = B.shape();
    if (as.size() == 1) as.insert(as.begin(), 1);
    if (bs.size() == 1) bs.push_back(1);
    const int64_t M = as[as.size() - (trans_a_ ? 1 : 2)], K = as[as.size() - (trans_a_ ? 2 : 1)], N = bs[bs.size() - (trans_b_ ? 2 : 1)];
    Shape batch_a(as.begin(), as.end() - 2), batch_b(bs.begin(), bs.end() - 2);
    Shape batch(std::max(batch_a.size(), batch_b.size()));
    for (size_t k = 0; k < batch.size(); ++k) {
      int64_t da = k < batch.size() - batch_a.size() ? 1 : batch_a[k - (batch.size() - batch_a.size())];
      int64_t db = k < batch.size() - batch_b.size() ? 1 : batch_b[k - (batch.size() - batch_b.size())];
      batch[k] = da == 1 ? db : da;
    }
    // Per batch element, the offset of its A and B matrices (0-stride along broadcast dims).
    std::vector<int64_t> a_off, b_off;
    std::array<kernels::Dims, 2> st{kernels::broadcast_strides(batch_a, batch), kernels::broadcast_strides(batch_b, batch)};
    kernels::broadcast_loop<2>(batch, st, [&](int64_t, const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& inc, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        a_off.push_back((off[0] + i * inc[0]) * M * K);
        b_off.push_back((off[1] + i * inc[1]) * K * N);
      }
    });
    with_compute_type(ctx.in(0).dtype(), [&](auto tag) {
      using C = typename decltype(tag)::type;
      Tensor a = cast_to(ctx.in(0), dtype_of<C>::value), b = cast_to(ctx.in(1), dtype_of<C>::value);
      Tensor& y = ctx.out(0);
      Tensor yc = y.dtype() == dtype_of<C>::value ? y : Tensor(dtype_of<C>::value, y.shape());
      for (size_t i = 0; i < a_off.size(); ++i)
        kernels::gemm<C>(ctx.cpu, trans_a_, trans_b_, M, N, K, static_cast<C>(alpha_), a.data<C>() + a_off[i], trans_a_ ? M : K,
                         b.data<C>() + b_off[i], trans_b_ ? K : N, C(0), yc.data<C>() + static_cast<int64_t>(i) * M * N, N);
      if (yc.raw() != y.raw()) convert_tensor(yc, y);
    });
  }

 private:
  bool plain() const { return !trans_a_ && !trans_b_ && alpha_ == 1.0f; }  // MatMul's own semantics
  bool trans_a_, trans_b_;
  float alpha_;
};

class GemmOp : public Op {
 public:
  explicit GemmOp(const Node& n)
      : ta_(n.attr_int("transA", 0) != 0),
        tb_(n.attr_int("transB", 0) != 0),
        alpha_(n.attr_float("alpha", 1)),
        beta_(n.attr_float("beta", 1)) {}
  void infer(InferContext& ctx) const override {
    const SymShape &a = ctx.shape(0), &b = ctx.shape(1);
    if (a.size() != 2 || b.size() != 2) ctx.fail("A and B must be 2-D");
    const Dim &m = ta_ ? a[1] : a[0], &n = tb_ ? b[0] : b[1];
    ctx.set(0, ctx.dtype(0), SymShape{m, n});
  }
  void run(RunContext& ctx) const override {
    const Tensor &A = ctx.in(0), &B = ctx.in(1);
    const int64_t M = ta_ ? A.dim(1) : A.dim(0), K = ta_ ? A.dim(0) : A.dim(1), N = tb_ ? B.dim(0) : B.dim(1);
    if ((tb_ ? B.dim(1) : B.dim(0)) != K) fail(ctx.node.describe(), ": inner dimensions differ");
    with_compute_type(A.dtype(), [&](auto tag) {
      using C = typename decltype(tag)::type;
      constexpr DType CT = dtype_of<C>::value;
      Tensor a = cast_to(A, CT), b = cast_to(B, CT);
      Tensor& y = ctx.out(0);
      Tensor yc = y.dtype() == CT ? y : Tensor(CT, y.shape());
      C beta = C(0);
      if (ctx.has(2) && beta_ != 0.0f) {  // broadcast C into the output, then accumulate on it
        Tensor c = cast_to(ctx.in(2), CT);
        check_broadcasts_to(ctx.node, c.shape(), y.shape());
        kernels::broadcast_copy(c.raw(), c.shape(), yc.raw(), y.shape(), sizeof(C));
        beta = static_cast<C>(beta_);
      }
      kernels::gemm<C>(ctx.cpu, ta_, tb_, M, N, K, static_cast<C>(alpha_), a.data<C>(), a.dim(1), b.data<C>(), b.dim(1), beta, yc.data<C>(),
                       N);
      if (yc.raw() != y.raw()) convert_tensor(yc, y);
    });
  }

 private:
  bool ta_, tb_;
  float alpha_, beta_;
};

}  // namespace

bool regroups_nbits(const kernels::NBitsWeights& w, const PackSettings& options, kernels::NBitsActivations act) {
  return !options.device && kernels::nbits_groups_native(w, options.cpu.isa, act != kernels::NBitsActivations::Float32);
}

kernels::QuantizedWeights prepared_nbits_groups(const PackTarget& options, const std::string& part, const kernels::NBitsWeights& w,
                                                const std::function<kernels::QuantizedWeights()>& make) {
  const std::vector<int64_t> sizes = kernels::nbits_group_sizes(w);
  // (scales: float16 or float32, as group_nbits_rows found them; checked below)
  std::vector<std::pair<DType, int64_t>> expect{{DType::UInt8, sizes[0]}, {DType::Undefined, sizes[2]}};
  if (sizes[1]) expect.push_back({w.zp_float ? DType::Float32 : DType::UInt8, sizes[1]});
  const auto parts = options.prepared(part, expect, [&] {
    const kernels::QuantizedWeights g = make();
    std::vector<Tensor> out{g.data, g.scales};
    if (g.zero_points.defined()) out.push_back(g.zero_points);
    return out;
  });
  if (parts[1].dtype() != DType::Float16 && parts[1].dtype() != DType::Float32)
    fail("entry '", options.node, "/", part, "': scales are ", dtype_name(parts[1].dtype()), ", not float16 or float32");
  return kernels::QuantizedWeights{w.N, w.K, w.bits, w.block, parts[0], parts.size() > 2 ? parts[2] : Tensor(), parts[1], true};
}

void register_matmul(OpRegistry& r) {
  r.add("", "MatMul", factory<MatMulOp>());
  r.add("com.microsoft", "FusedMatMul", factory<MatMulOp>());
  r.add("", "Gemm", factory<GemmOp>());
}

}  // namespace tern
