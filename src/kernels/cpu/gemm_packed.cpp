#include "kernels/cpu/gemm_packed.h"

#include "kernels/cpu/gemm_panels_impl.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/gemv_nbits.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/width_kernels.h"

namespace tern::kernels {

#if defined(__x86_64__)
static_assert(kNR == 16, "gemm_avx512.h's kernels read 16-column panels");
#endif

void baseline::gemm_tiles(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context,
                          float* C) {
  gemm_tiles_at_width(cx, A, M, K, N, block, context, C);
}

void baseline::gemv_panels(const Context& cx, const float* x, int64_t M, const PackedMatrix& B, float* y) {
  gemv_panels_at_width(cx, x, M, B, y);
}

namespace {

// A micro_panel callable as a PanelBlock (gemm_packed.h), whose context is the callable's address.
template <typename MicroPanel>
PanelBlock as_panel_block(const MicroPanel&) {
  return [](const void* context, int64_t j, int64_t k0, int64_t kc, float* scratch) -> const float* {
    return (*static_cast<const MicroPanel*>(context))(j, k0, kc, scratch);
  };
}

// The GEMM over panels that `micro_panel(j, k0, kc, scratch)` provides, on the tier's tiles (from tier avx512 up
// gemm_f32_avx512's 8 × 32 tiles in the same summation order as the width's).
template <typename MicroPanel>
void gemm_panels(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, float* C, const MicroPanel& micro_panel) {
  kernel_table(cx.isa).gemm_tiles.fn(cx, A, M, K, N, as_panel_block(micro_panel), &micro_panel, C);
}

template <typename T>
void matmul_as(const Context& cx, const float* A, int64_t M, const PackedMatrix& B, float* C) {
  const KernelTable& t = kernel_table(cx.isa);
  if (M <= kPanelGemvMaxRows) return t.gemv_panels.fn(cx, A, M, B, C);
  const T* data = static_cast<const T*>(B.panels->data());
  if constexpr (std::is_same_v<T, bf16>) {
    if (t.gemm_bf16.fn) return t.gemm_bf16.fn(cx, A, M, B.K, B.N, reinterpret_cast<const uint16_t*>(data), C);
  }
  gemm_panels(cx, A, M, B.K, B.N, C, [&](int64_t j, int64_t k0, int64_t kc, float* scratch) -> const float* {
    const T* p = data + (j * B.K + k0) * kNR;
    if constexpr (std::is_same_v<T, float>) {
      return p;
    } else {  // widened into L1, once per K block of the panel
      if (!scratch) return nullptr;
      if constexpr (std::is_same_v<T, f16>) {
        // F16C where the CPU has it (core/dtype.h): this closure is the baseline build's code, and at x86-64-v2 its
        // lanes widened fp16 one element at a time — the fp16 prefill's products ran at a third of fp32's rate.
        f16_to_f32(reinterpret_cast<const uint16_t*>(p), scratch, kc * kNR);
      } else {
        for (int64_t i = 0; i < kc * kNR; i += kLanes) load_lanes(p + i).store_aligned(scratch + i);
      }
      return scratch;
    }
  });
}

// B's element at p, read byte-wise: the weight may be a view of a model file's bytes not aligned for From
// (onnx_loader.h: LoadOptions::misaligned_views).
template <typename From>
float element_at(const From* p) {
  From v;
  std::memcpy(&v, p, sizeof v);
  return static_cast<float>(v);
}

// 64 rows of B at a time, into every panel; then those rows are done with, and `source` (B's buffer)
// drops their pages if it maps a file. Packing the 1B-shape model's 1 GB tied LM head otherwise held all
// of its file pages beside its packed copy: the load's peak (6.0 GB for 4.9 GB of weights).
template <typename To, typename From>
void pack_as(int threads, const From* src, int64_t K, int64_t N, To* out, const Buffer* source) {
  const int64_t panels = (N + kNR - 1) / kNR;
  constexpr int64_t kRows = 64;
  for (int64_t k0 = 0; k0 < K; k0 += kRows) {
    const int64_t k1 = std::min(K, k0 + kRows);
    parallel_chunks(threads, panels, balanced_chunks(threads, panels), [&](int64_t j0, int64_t j1, int) {
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t k = k0; k < k1; ++k)
          for (int64_t c = 0; c < kNR; ++c) {
            const int64_t n = j * kNR + c;
            out[(j * K + k) * kNR + c] = To(n < N ? element_at(src + k * N + n) : 0.0f);
          }
    });
    if (source) source->drop_pages(src + k0 * N, static_cast<size_t>((k1 - k0) * N) * sizeof(From));
  }
}

// The same from Bᵀ stored [N, K]: each panel's kNR rows of the source, K contiguous values each, go out
// column by column; a group of panels' rows is then done with and its pages dropped.
template <typename To, typename From>
void pack_transposed_as(int threads, const From* src, int64_t K, int64_t N, To* out, const Buffer* source) {
  const int64_t panels = (N + kNR - 1) / kNR;
  constexpr int64_t kGroup = 16;  // panels a step: 256 rows of the source
  for (int64_t g0 = 0; g0 < panels; g0 += kGroup) {
    const int64_t g1 = std::min(panels, g0 + kGroup);
    parallel_chunks(threads, g1 - g0, balanced_chunks(threads, g1 - g0), [&](int64_t j0, int64_t j1, int) {
      for (int64_t j = g0 + j0; j < g0 + j1; ++j)
        for (int64_t c = 0; c < kNR; ++c) {
          const int64_t n = j * kNR + c;
          for (int64_t k = 0; k < K; ++k) out[(j * K + k) * kNR + c] = To(n < N ? element_at(src + n * K + k) : 0.0f);
        }
    });
    const int64_t n0 = g0 * kNR, n1 = std::min(N, g1 * kNR);
    if (source) source->drop_pages(src + n0 * K, static_cast<size_t>((n1 - n0) * K) * sizeof(From));
  }
}

// Panels for a K x N matrix of `type` packed from a `from` (float32 or float16) source; contents unset.
PackedMatrix allocate_packed(int64_t K, int64_t N, DType type, DType from) {
  if (type != DType::Float32 && type != DType::Float16 && type != DType::BFloat16)
    fail_unsupported("packed weights as ", dtype_name(type), " (float32, float16 or bfloat16)");
  if (from != DType::Float32 && from != DType::Float16) fail_unsupported("packing ", dtype_name(from), " weights (float32 or float16)");
  PackedMatrix p;
  p.K = K;
  p.N = N;
  p.type = type;
  p.panels = Buffer::allocate(static_cast<size_t>((N + kNR - 1) / kNR * K * kNR) * dtype_size(type));
  return p;
}

// Calls pack(out) with the panels as `p.type`'s elements.
template <typename F>
void packed_as(const PackedMatrix& p, F&& pack) {
  switch (p.type) {
    case DType::Float16: pack(static_cast<f16*>(p.panels->data())); break;
    case DType::BFloat16: pack(static_cast<bf16*>(p.panels->data())); break;
    default: pack(static_cast<float*>(p.panels->data())); break;
  }
}

}  // namespace

const int64_t kPanel = kNR;

PackedMatrix pack_matrix(const Context& cx, const Tensor& B, DType type, bool transposed) {
  if (!transposed) return pack_matrix(cx, std::vector<const Tensor*>{&B}, type);
  const int64_t K = B.dim(1), N = B.dim(0);
  PackedMatrix p = allocate_packed(K, N, type, B.dtype());
  packed_as(p, [&](auto* out) {
    if (B.dtype() == DType::Float32) pack_transposed_as(cx.threads, B.data<float>(), K, N, out, B.buffer().get());
    else pack_transposed_as(cx.threads, B.data<f16>(), K, N, out, B.buffer().get());
  });
  return p;
}

PackedMatrix pack_matrix(const Context& cx, const std::vector<const Tensor*>& columns, DType type) {
  const int64_t K = columns.at(0)->dim(0);
  int64_t N = 0;
  for (const Tensor* c : columns) {
    if (c->rank() != 2 || c->dim(0) != K || c->dtype() != columns[0]->dtype() || (N % kNR) != 0)
      fail("pack_matrix: column blocks must be [K, N_i] of one dtype, each but the last a multiple of ", kNR, " wide");
    N += c->dim(1);
  }
  PackedMatrix p = allocate_packed(K, N, type, columns[0]->dtype());
  packed_as(p, [&](auto* out) {
    int64_t at = 0;  // the block's first column: its panels start at panel at / kNR
    for (const Tensor* c : columns) {
      if (c->dtype() == DType::Float32) pack_as(cx.threads, c->data<float>(), K, c->dim(1), out + at * K, c->buffer().get());
      else pack_as(cx.threads, c->data<f16>(), K, c->dim(1), out + at * K, c->buffer().get());
      at += c->dim(1);
    }
  });
  return p;
}

Tensor unpack_transposed(const PackedMatrix& B) {
  Tensor out(B.type == DType::Float16 ? DType::Float16 : DType::Float32, {B.N, B.K});
  auto unpack = [&](const auto* panels, auto* o) {
    for (int64_t n = 0; n < B.N; ++n)
      for (int64_t k = 0; k < B.K; ++k) o[n * B.K + k] = panels[((n / kNR) * B.K + k) * kNR + n % kNR];
  };
  switch (B.type) {
    case DType::Float16: unpack(static_cast<const f16*>(B.panels->data()), out.data<f16>()); break;
    case DType::BFloat16: {
      const bf16* p = static_cast<const bf16*>(B.panels->data());
      float* o = out.data<float>();
      for (int64_t n = 0; n < B.N; ++n)
        for (int64_t k = 0; k < B.K; ++k) o[n * B.K + k] = static_cast<float>(p[((n / kNR) * B.K + k) * kNR + n % kNR]);
      break;
    }
    default: unpack(static_cast<const float*>(B.panels->data()), out.data<float>()); break;
  }
  return out;
}

void matmul_packed(const Context& cx, const float* A, int64_t M, const PackedMatrix& B, float* C) {
  switch (B.type) {
    case DType::Float16: return matmul_as<f16>(cx, A, M, B, C);
    case DType::BFloat16: return matmul_as<bf16>(cx, A, M, B, C);
    default: return matmul_as<float>(cx, A, M, B, C);
  }
}

namespace {
// Prefill rows whose activations may lose precision (Int8) run in bf16 where the tier has such a GEMM (AMX tiles).
bool nbits_prefill_in_bf16(NBitsActivations act, const KernelTable& t) { return act == NBitsActivations::Int8 && t.gemm_rounded_bf16.fn; }
}  // namespace

void gemm_nbits(const Context& cx, const float* A, int64_t M, const NBitsWeights& W, float* C, NBitsActivations act) {
  const KernelTable& t = kernel_table(cx.isa);
  const auto block = [&](int64_t j, int64_t k0, int64_t kc, float* scratch) -> const float* {
    if (!scratch) return nullptr;  // (made in scratch: gemm_packed.h's PanelBlock)
    const int64_t n0 = j * kNR, n1 = std::min(W.N, n0 + kNR);
    if (n1 - n0 < kNR) std::fill(scratch, scratch + kc * kNR, 0.0f);
    t.dequantize_nbits_block.fn(W, n0, n1, k0, k0 + kc, scratch, kNR);
    return scratch;
  };
  if (nbits_prefill_in_bf16(act, t)) return t.gemm_rounded_bf16.fn(cx, A, M, W.K, W.N, as_panel_block(block), &block, C);
  gemm_panels(cx, A, M, W.K, W.N, C, block);
}

void gemm_panel_source(const Context& cx, const float* A, int64_t M, int64_t K, int64_t N, PanelBlock block, const void* context,
                       float* C) {
  kernel_table(cx.isa).gemm_tiles.fn(cx, A, M, K, N, block, context, C);
}

namespace {
bool nbits_uses_gemv(int64_t M, const NBitsWeights& W) { return M <= kGemvMaxRows && gemv_nbits_supported(W); }
bool nbits_uses_gemv_i8(int64_t M, const NBitsWeights& W, NBitsActivations act, Isa isa) {
  return ((act == NBitsActivations::Int8 && M <= kGemvMaxRows) || act == NBitsActivations::Int8EveryRow) && gemv_nbits_i8_supported(W, isa);
}
}  // namespace

void matmul_nbits(const Context& cx, const float* A, int64_t M, const NBitsWeights& W, float* C, NBitsActivations act) {
  if (nbits_uses_gemv_i8(M, W, act, cx.isa)) gemv_nbits_i8(cx, A, M, W, C);
  else if (nbits_uses_gemv(M, W)) gemv_nbits(cx, A, M, W, C);
  else gemm_nbits(cx, A, M, W, C, act);
}

std::string matmul_nbits_kernel(int64_t M, const NBitsWeights& W, NBitsActivations act, Isa isa) {
  const KernelTable& t = kernel_table(isa);
  const std::string bits = "int" + std::to_string(W.bits);
  if (nbits_uses_gemv_i8(M, W, act, isa)) return "gemv_nbits_i8 " + bits + " " + t.nbits_i8_rows.name;
  if (nbits_uses_gemv(M, W)) return "gemv_nbits " + bits + (W.grouped ? std::string(" ") + isa_name(isa) : "");
  return nbits_prefill_in_bf16(act, t) ? "gemm_nbits " + bits + " bf16 " + t.gemm_rounded_bf16.name
                                       : profile_name("gemm_nbits " + bits, t.gemm_tiles.name);
}

std::string matmul_packed_kernel(int64_t M, const PackedMatrix& B, Isa isa) {
  const KernelTable& t = kernel_table(isa);
  const std::string type = B.type == DType::Float16 ? "fp16" : B.type == DType::BFloat16 ? "bf16" : "fp32";
  if (M <= kPanelGemvMaxRows) return "gemv_panels " + type;
  if (B.type == DType::BFloat16 && t.gemm_bf16.fn) return std::string("gemm_bf16 ") + t.gemm_bf16.name;
  return profile_name("gemm_panels " + type, t.gemm_tiles.name);
}

}  // namespace tern::kernels
