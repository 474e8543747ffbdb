// MatMulNBits (com.microsoft): Y = A · dequant(B)ᵀ (+ bias), B block-quantized to 2, 4 or 8 bits per
// ONNX Runtime's layout; g_idx (act-order, deprecated in ONNX Runtime's spec) by sorting the columns at load
// (act_order below). A few rows (decode) stream the packed weights directly (gemv_nbits); more rows, and layouts
// the GEMV does not take, run the panel GEMM, which dequantizes one block of 16 columns at a
// time into L1 (no dequantized copy of the matrix). accuracy_level 4 asks for int8 activations: the
// decode rows then run gemv_nbits_i8 (as ONNX Runtime does; `--activations` overrides it either way). 2- and
// 4-bit weights are re-laid at load 16 rows at a time for the decode GEMVs where they read them so
// (kernels::nbits_groups_native: x86 both, AArch64 the fp32 one), the file's copy released.
#include <array>
#include <optional>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/nbits.h"
#include "ops/matmul.h"
#include "ops/op.h"
#include "ops/register_all.h"
#include "ops/weight_packer.h"

namespace tern {
namespace {

// What MatMulNBits keeps from its constant inputs.
struct NBitsPrepared {
  kernels::NBitsActivations activations = kernels::NBitsActivations::Float32;
  bool g_idx_read = false;
  std::vector<int32_t> act_order;  // from g_idx (empty: none, or the natural order)
  Tensor act_ordered_B;            // B in act_order (undefined: none, or only the pack's grouped form is read)
  std::optional<kernels::QuantizedWeights> grouped;
};

class MatMulNBitsOp : public Op, public PacksWeights<NBitsPrepared>, public CostedOp {
 public:
  enum Input : int { kA, kB, kScales, kZeroPoints, kGIdx, kBias };  // (the spec's order)
  explicit MatMulNBitsOp(const Node& n)
      : K_(n.attr_int("K", 0)),
        N_(n.attr_int("N", 0)),
        bits_(n.attr_int("bits", 4)),
        block_(n.attr_int("block_size", 0)),
        accuracy_level_(n.attr_int("accuracy_level", 0)),
        node_has_zero_points_(n.inputs.size() > kZeroPoints && n.inputs[kZeroPoints] >= 0),
        node_has_g_idx_(n.inputs.size() > kGIdx && n.inputs[kGIdx] >= 0) {
    if (K_ <= 0 || N_ <= 0) fail(n.describe(), ": attributes K and N are required");
    if (bits_ != 2 && bits_ != 4 && bits_ != 8) fail_unsupported(n.describe(), ": bits = ", bits_, " (tern supports 2, 4 and 8)");
    if (block_ < 16 || (block_ & (block_ - 1)) != 0) fail(n.describe(), ": block_size must be a power of 2 >= 16, got ", block_);
  }
  // Where the decode GEMV reads them grouped, the constant weights are re-laid once (kernels::group_nbits_rows,
  // or read so from a pack) and the file's copies are not read again.
  std::vector<int> prepare(const std::vector<const Tensor*>& constants, const PackTarget& options, NBitsPrepared& into) const override {
    into.activations = nbits_activations(options, accuracy_level_ == 4);
    auto at = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
    const bool zp_constant = !node_has_zero_points_ || at(kZeroPoints);
    if (node_has_g_idx_) {
      if (!at(kGIdx)) return {};  // (run refuses it: a g_idx computed in the graph)
      into.act_order = act_order(*at(kGIdx), "MatMulNBits");
      into.g_idx_read = true;
      if (!into.act_order.empty() && at(kB) && at(kB)->raw())
        into.act_ordered_B = options.kept(DType::UInt8, at(kB)->shape(), [&] { return act_ordered(*at(kB), into.act_order); });
    }
    // (With its columns sorted, B is read from this op's copy: the file's is the session's to drop — unless a pack
    // is in play, whose later loads would then find no B to sort.)
    const std::vector<int> own_b = into.act_ordered_B.defined() && !options.pack ? std::vector<int>{kB} : std::vector<int>{};
    if (!at(kB) || !at(kScales) || !zp_constant) return own_b;
    std::array<Tensor, 2> scratch;
    const Tensor& B = into.act_ordered_B.defined() ? into.act_ordered_B : *at(kB);
    const kernels::NBitsWeights w = weights(N_, B, *at(kScales), at(kZeroPoints), scratch, "MatMulNBits");
    if (!regroups_nbits(w, options, into.activations)) {
      for (size_t i : {kB, kScales, kZeroPoints}) options.ensure_whole(i);  // (run reads them as they are)
      return own_b;
    }
    // A concatenation a fusion left unmade (fused q|k|v, gate|up) is grouped part by part, 16 rows a group: each
    // part's groups land where the whole's would. B, scales and zero points share their rows, so all three stack
    // or none does (then each is made whole).
    const int64_t k_blocks = (K_ + block_ - 1) / block_;
    const int64_t row_elements[4] = {0, k_blocks * (block_ * bits_ / 8), k_blocks,
                                     at(kZeroPoints) && at(kZeroPoints)->dtype() == DType::UInt8 ? (k_blocks * bits_ + 7) / 8 : k_blocks};
    std::vector<const Tensor*> parts[4];
    bool stacked = true;
    for (size_t i = kB; i <= kZeroPoints && stacked; ++i)
      if (at(i)) stacked = !(parts[i] = options.stacked_parts(i, kernels::kNBitsGroupRows * row_elements[i])).empty();
    if (!stacked)
      for (size_t i : {kB, kScales, kZeroPoints}) options.ensure_whole(i);
    into.grouped = prepared_nbits_groups(options, "int" + std::to_string(bits_) + " groups", w, [&] {
      // (Each input is N-major: rows [n0, n1) are the same share of each, whose file pages go once grouped.)
      auto drop_rows = [](const Tensor* t, int64_t n, int64_t n0, int64_t n1) {
        if (!t || !t->buffer()) return;
        const size_t row = t->nbytes() / static_cast<size_t>(n);
        t->buffer()->drop_pages(static_cast<const char*>(t->raw()) + static_cast<size_t>(n0) * row, static_cast<size_t>(n1 - n0) * row);
      };
      if (stacked) {
        std::vector<kernels::NBitsWeights> views;
        std::vector<std::array<Tensor, 2>> converted(parts[kB].size());  // (each part's scales as float32)
        for (size_t p = 0; p < parts[kB].size(); ++p)
          views.push_back(weights(parts[kScales][p]->numel() / k_blocks, *parts[kB][p], *parts[kScales][p],
                                  at(kZeroPoints) ? parts[kZeroPoints][p] : nullptr, converted[p], "MatMulNBits"));
        return kernels::group_nbits_rows(options.cpu, views, [&](size_t p, int64_t n0, int64_t n1) {
          for (size_t i = kB; i <= kZeroPoints; ++i)
            if (at(i)) drop_rows(parts[i][p], views[p].N, n0, n1);
        });
      }
      for (const Tensor* t : {at(kB), at(kScales), at(kZeroPoints)})
        if (t && !t->raw()) fail("its weights were left out of the pack, which holds no grouped form of them: run `tern pack` again");
      const kernels::NBitsWeights whole = weights(N_, B, *at(kScales), at(kZeroPoints), scratch, "MatMulNBits");
      return kernels::group_nbits_rows(options.cpu, whole, [&](int64_t n0, int64_t n1) {
        for (const Tensor* t : {at(kB), at(kScales), at(kZeroPoints)}) drop_rows(t, N_, n0, n1);
      });
    });
    into.act_ordered_B = Tensor();  // (grouped from it)
    if (at(kZeroPoints)) return {kB, kScales, kZeroPoints};
    return {kB, kScales};
  }
  bool packs_from_parts() const override { return true; }
  int64_t packed_bytes() const override {
    return prepared().grouped ? prepared().grouped->bytes() : static_cast<int64_t>(prepared().act_ordered_B.nbytes());
  }
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState*) const override {
    const std::optional<kernels::QuantizedWeights>& grouped = prepared().grouped;
    double bytes = static_cast<double>(out[0].nbytes() + in[kA]->nbytes());
    if (grouped) bytes += static_cast<double>(grouped->bytes());
    for (size_t i = kB; i < in.size(); ++i)
      if (in[i] && !(grouped && i <= kZeroPoints)) bytes += static_cast<double>(in[i]->nbytes());  // blocks, scales, zero points, bias
    return {2.0 * static_cast<double>(in[kA]->numel()) * static_cast<double>(N_), bytes};
  }
  std::string kernel(const std::vector<const Tensor*>& in, kernels::Isa isa) const override {
    const NBitsPrepared& p = prepared();
    if (p.grouped) return kernels::matmul_nbits_kernel(in[kA]->numel() / K_, p.grouped->view(), p.activations, isa);
    // The dispatch looks at the shape and at which zero-point form is given, not at the data.
    static const uint8_t any_packed = 0;
    static const float any_float = 0;
    kernels::NBitsWeights w;
    w.N = N_, w.K = K_, w.bits = bits_, w.block = block_;
    if (in.size() > kZeroPoints && in[kZeroPoints] && in[kZeroPoints]->dtype() == DType::UInt8) w.zp_packed = &any_packed;
    else if (in.size() > kZeroPoints && in[kZeroPoints]) w.zp_float = &any_float;
    return kernels::matmul_nbits_kernel(in[kA]->numel() / K_, w, p.activations, isa);
  }
  void infer(InferContext& ctx) const override {
    SymShape a = ctx.shape(0);
    if (a.empty() || (a.back().is_known() && a.back().value != K_)) ctx.fail("A's last dimension must be K = ", K_);
    if (ctx.dtype(kB) != DType::UInt8) ctx.fail("B must be uint8");
    if (ctx.has(kGIdx) && ctx.dtype(kGIdx) != DType::Int32 && ctx.dtype(kGIdx) != DType::Int64) ctx.fail("g_idx must be int32");
    a.back() = Dim::known(N_);
    ctx.set(0, ctx.dtype(kA), a);
  }
  void run(RunContext& ctx) const override {
    std::array<Tensor, 2> scratch;  // conversions, only for inputs that are not float32
    Tensor a_f32, y_f32;
    const NBitsPrepared& p = prepared();
    if (node_has_g_idx_ && !p.g_idx_read) fail_unsupported(ctx.node.describe(), ": g_idx must be a constant initializer");
    const Tensor& B = p.act_ordered_B.defined() ? p.act_ordered_B : ctx.in(kB);
    const kernels::NBitsWeights w =
        p.grouped ? p.grouped->view()
                  : weights(N_, B, ctx.in(kScales), ctx.has(kZeroPoints) ? &ctx.in(kZeroPoints) : nullptr, scratch, ctx.node.describe());
    const Tensor& A = as_dtype(ctx.in(kA), DType::Float32, a_f32);
    const int64_t M = A.numel() / K_;
    const float* a = A.data<float>();
    if (!p.act_order.empty()) {  // A's columns in B's sorted order, in the run's scratch (no allocation a token)
      float* ordered = ctx.cpu.workspace().take<float>(kernels::Workspace::ActOrdered, M * K_);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < K_; ++j) ordered[m * K_ + j] = a[m * K_ + p.act_order[static_cast<size_t>(j)]];
      a = ordered;
    }
    Tensor& out = ctx.out(0);
    if (out.dtype() != DType::Float32) y_f32 = Tensor(DType::Float32, out.shape());
    float* Y = out.dtype() == DType::Float32 ? out.data<float>() : y_f32.data<float>();
    kernels::matmul_nbits(ctx.cpu, a, M, w, Y, p.activations);
    if (ctx.has(kBias)) {  // bias [N]
      Tensor bias_f32;
      const Tensor& bias = as_dtype(ctx.in(kBias), DType::Float32, bias_f32);
      kernels::binary_broadcast(Y, {M, N_}, bias.data<float>(), {N_}, Y, {M, N_}, [](float a, float b) { return a + b; });
    }
    if (y_f32.defined()) convert_tensor(y_f32, out);
  }

 private:
  // The weights as the file gives them (N rows: the node's, or a part's of a concatenation), checked against K,
  // N, bits and block_size (`where` names the node in errors; scales and float zero points not in float32 are
  // converted into `scratch`). In a pack's placeholders only the sizes are there.
  kernels::NBitsWeights weights(int64_t N, const Tensor& B, const Tensor& scales_in, const Tensor* zp, std::array<Tensor, 2>& scratch,
                                const std::string& where) const {
    const int64_t k_blocks = (K_ + block_ - 1) / block_;
    if (B.numel() != N * k_blocks * (block_ * bits_ / 8))
      fail(where, ": B has ", B.numel(), " bytes, N·k_blocks·blob needs ", N * k_blocks * (block_ * bits_ / 8));
    const Tensor& scales = scales_in.raw() ? as_dtype(scales_in, DType::Float32, scratch[0]) : scales_in;
    if (scales.numel() != N * k_blocks) fail(where, ": scales must have N·k_blocks = ", N * k_blocks, " values");
    kernels::NBitsWeights w;
    w.N = N;
    w.K = K_;
    w.bits = bits_;
    w.block = block_;
    w.data = B.data<uint8_t>();
    w.scales = scales.dtype() == DType::Float32 ? scales.data<float>() : nullptr;
    // (A placeholder's zero points still say which form they take: the grouped layout's size depends on it.)
    static const uint8_t placeholder_packed = 0;
    static const float placeholder_float = 0;
    if (zp && zp->dtype() == DType::UInt8) {
      if (zp->numel() != N * ((k_blocks * bits_ + 7) / 8)) fail(where, ": packed zero_points have the wrong size");
      w.zp_packed = zp->raw() ? zp->data<uint8_t>() : &placeholder_packed;
    } else if (zp) {
      if (zp->numel() != N * k_blocks) fail(where, ": zero_points must have N·k_blocks values");
      w.zp_float = zp->raw() ? as_dtype(*zp, DType::Float32, scratch[1]).data<float>() : &placeholder_float;
    }
    return w;
  }

  // g_idx: column k's scale and zero point are those of block g_idx[k]. Sorting the columns by block (stably) gives
  // B the usual layout — exact when every block holds block_size columns, as GPTQ's act-order makes them — so every
  // kernel reads it; A's columns are gathered into that order at each run (K floats a row). Empty when g_idx is
  // absent or already k / block_size. Fails naming the node for a g_idx out of range or with uneven blocks.
  std::vector<int32_t> act_order(const Tensor& g_idx, const std::string& where) const {
    if (g_idx.dtype() != DType::Int32 && g_idx.dtype() != DType::Int64) fail(where, ": g_idx must be int32");
    if (g_idx.numel() != K_) fail(where, ": g_idx has ", g_idx.numel(), " values; K = ", K_);
    const std::vector<int64_t> block_of = g_idx.to_i64_vector();
    const int64_t k_blocks = (K_ + block_ - 1) / block_;
    bool natural = true;
    for (int64_t k = 0; k < K_; ++k) {
      const int64_t b = block_of[static_cast<size_t>(k)];
      if (b < 0 || b >= k_blocks) fail(where, ": g_idx[", k, "] = ", b, " is not a block (", k_blocks, " blocks)");
      natural = natural && b == k / block_;
    }
    if (natural) return {};
    std::vector<int64_t> columns(static_cast<size_t>(k_blocks), 0);
    for (int64_t b : block_of) ++columns[static_cast<size_t>(b)];
    for (int64_t b = 0; b < k_blocks; ++b)
      if (columns[static_cast<size_t>(b)] != std::min(block_, K_ - b * block_))
        fail_unsupported(where, ": g_idx gives block ", b, " ", columns[static_cast<size_t>(b)], " columns, not ",
                         std::min(block_, K_ - b * block_), " (tern takes act-order whose blocks hold block_size columns each)");
    std::vector<int32_t> order(static_cast<size_t>(K_));
    for (int64_t k = 0; k < K_; ++k) order[static_cast<size_t>(k)] = static_cast<int32_t>(k);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return block_of[static_cast<size_t>(a)] < block_of[static_cast<size_t>(b)]; });
    return order;
  }
  // B's codes with column j taken from column order[j] (N rows of k_blocks · blob bytes).
  Tensor act_ordered(const Tensor& B, const std::vector<int32_t>& order) const {
    const int64_t k_blocks = (K_ + block_ - 1) / block_, blob = block_ * bits_ / 8, row = k_blocks * blob;
    if (B.dtype() != DType::UInt8 || B.numel() != N_ * row)
      fail("MatMulNBits: B has ", B.numel(), " bytes, N·k_blocks·blob needs ", N_ * row);
    Tensor out(DType::UInt8, B.shape());
    std::fill_n(out.data<uint8_t>(), out.numel(), uint8_t{0});
    const uint8_t* from = B.data<uint8_t>();
    uint8_t* to = out.data<uint8_t>();
    const auto bit_of = [&](int64_t k) { return (k / block_) * blob * 8 + (k % block_) * bits_; };
    for (int64_t n = 0; n < N_; ++n)
      for (int64_t j = 0; j < K_; ++j) {
        const int64_t src = bit_of(order[static_cast<size_t>(j)]), dst = bit_of(j);
        const unsigned code = (from[n * row + src / 8] >> (src % 8)) & ((1u << bits_) - 1);
        to[n * row + dst / 8] = static_cast<uint8_t>(to[n * row + dst / 8] | (code << (dst % 8)));
      }
    return out;
  }

  int64_t K_, N_, bits_, block_, accuracy_level_;
  bool node_has_zero_points_, node_has_g_idx_;
};

}  // namespace

void register_matmul_nbits(OpRegistry& r) { r.add("com.microsoft", "MatMulNBits", factory<MatMulNBitsOp>()); }

}  // namespace tern
