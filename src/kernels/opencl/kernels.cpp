#include "kernels/opencl/kernels.h"

#include "core/error.h"
#include "kernels/opencl/sources.h"

namespace tern::kernels::opencl {

Kernels::Kernels(cl::Context& ctx) : Kernels(ctx, !ctx.info().gpu) {}

Kernels::Kernels(cl::Context& ctx, bool row_per_item)
    : ctx_(ctx),
      row_per_item_(row_per_item),
      program_(ctx.program(sources().at("decoder.cl"), "-cl-std=CL1.2")),
      gemv_f32_(program_, "gemv_f32"),
      gemv_f16_(program_, "gemv_f16"),
      gemv_nbits_(program_, "gemv_nbits"),
      gemv_rows_f32_(program_, "gemv_rows_f32"),
      gemv_rows_f16_(program_, "gemv_rows_f16"),
      gemv_rows_nbits_(program_, "gemv_rows_nbits"),
      gemm_tiled_(program_, "gemm_tiled"),
      topk_partial_(program_, "topk_partial"),
      topk_merge_(program_, "topk_merge"),
      rms_norm_(program_, "rms_norm"),
      swiglu_(program_, "swiglu"),
      add_(program_, "add"),
      embed_(program_, "embed_rows"),
      argmax_(program_, "argmax"),
      last_rows_(program_, "last_rows"),
      ring_write_(program_, "ring_write"),
      ring_attend_(program_, "ring_attend") {}

size_t Kernels::group_size(const cl::Kernel& k, size_t want) const {
  const size_t limit = std::min(want, ctx_.max_work_group(k));
  size_t g = 1;
  while (g * 2 <= limit) g *= 2;
  return g;
}

bool Kernels::gemm(Mem x, Mem w, Mem scales, Mem zero_points, int format, int bits, int block, Mem y, int M, int K, int N) {
  if (ctx_.max_work_group(gemm_tiled_) < 256) return false;
  gemm_tiled_.args(x, w, scales.m ? scales : x, zero_points.m ? zero_points : x, int32_t{zero_points.m != nullptr}, format, bits, block, y,
                   M, K, N);
  ctx_.launch_2d(gemm_tiled_, static_cast<size_t>(N), static_cast<size_t>(M), 16, 16);
  return true;
}

void Kernels::gemv(Mem x, Mem w, bool half_weights, Mem y, int M, int K, int N) {
  if (M > kGemvRows && !row_per_item_ && gemm(x, w, nullptr, nullptr, half_weights ? 1 : 0, 0, 0, y, M, K, N)) return;
  if (row_per_item_) {
    cl::Kernel& k = half_weights ? gemv_rows_f16_ : gemv_rows_f32_;
    k.args(x, w, y, M, K, N);
    return ctx_.launch(k, static_cast<size_t>(N), group_size(k, 64));
  }
  cl::Kernel& k = half_weights ? gemv_f16_ : gemv_f32_;
  const size_t wg = group_size(k, 64);
  k.args(x, w, y, M, K, N).local(6, wg * sizeof(float));
  ctx_.launch(k, static_cast<size_t>(N) * wg, wg);
}

void Kernels::gemv_nbits(Mem x, Mem w, Mem scales, Mem zero_points, Mem y, int M, int K, int N, int bits, int block) {
  if ((bits != 4 && bits != 8) || block <= 0 || block % 2) fail("OpenCL gemv_nbits: bits must be 4 or 8 and block even");
  if (M > kGemvRows && !row_per_item_ && gemm(x, w, scales, zero_points, 2, bits, block, y, M, K, N)) return;
  // The GPU form reads whole 32-bit words of a block; a block of fewer values (not in ONNX's MatMulNBits,
  // whose blocks are powers of two from 16) takes the row-per-item form.
  if (row_per_item_ || block % (32 / bits) != 0) {
    gemv_rows_nbits_.args(x, w, scales, zero_points.m ? zero_points : scales, int32_t{zero_points.m != nullptr}, y, M, K, N, bits, block);
    return ctx_.launch(gemv_rows_nbits_, static_cast<size_t>(N), group_size(gemv_rows_nbits_, 64));
  }
  const size_t wg = group_size(gemv_nbits_, 64);
  gemv_nbits_.args(x, w, scales, zero_points.m ? zero_points : scales, int32_t{zero_points.m != nullptr}, y, M, K, N, bits, block)
      .local(11, wg * sizeof(float));
  ctx_.launch(gemv_nbits_, static_cast<size_t>(N) * wg, wg);
}

void Kernels::rms_norm(Mem x, Mem residual, Mem sum_out, Mem scale, Mem y, int rows, int D, float eps) {
  if ((residual.m == nullptr) != (sum_out.m == nullptr)) fail("OpenCL rms_norm: a residual needs a sum_out buffer and back");
  const size_t wg = group_size(rms_norm_, 256);
  rms_norm_.args(x, residual.m ? residual : x, int32_t{residual.m != nullptr}, sum_out.m ? sum_out : y, scale, y, D, eps)
      .local(8, wg * sizeof(float));
  ctx_.launch(rms_norm_, static_cast<size_t>(rows) * wg, wg);
}

void Kernels::swiglu(Mem gate, Mem up, Mem y, int rows, int F) {
  const int total = rows * F;
  const bool packed = up.m == nullptr;
  swiglu_.args(gate, packed ? gate : up, packed ? 2 * F : F, packed ? F : 0, y, F, total);
  ctx_.launch(swiglu_, static_cast<size_t>(total), group_size(swiglu_, 64));
}

void Kernels::add(Mem a, Mem b, Mem y, int n) {
  add_.args(a, b, y, n);
  ctx_.launch(add_, static_cast<size_t>(n), group_size(add_, 64));
}

void Kernels::embed_rows(Mem ids, Mem table, Mem y, int T, int D) {
  const size_t wg = group_size(embed_, 64);
  embed_.args(ids, table, y, D);
  ctx_.launch(embed_, static_cast<size_t>(T) * wg, wg);
}

void Kernels::argmax(Mem x, int x_at, int n, Mem out) {
  const size_t wg = group_size(argmax_, 256);
  argmax_.args(x, x_at, n, out).local(4, wg * sizeof(float)).local(5, wg * sizeof(int32_t));
  ctx_.launch(argmax_, wg, wg);
}

void Kernels::top_k(Mem x, int x_at, int n, int k, Mem scratch_v, Mem scratch_i, Mem values, Mem ids) {
  if (k < 1 || k > kTopKMax) fail("OpenCL top_k: k must be in [1, ", kTopKMax, "], got ", k);
  topk_partial_.args(x, x_at, n, k, scratch_v, scratch_i);
  ctx_.launch(topk_partial_, kTopKItems, group_size(topk_partial_, 64));
  topk_merge_.args(scratch_v, scratch_i, kTopKItems * k, k, values, ids);
  ctx_.launch(topk_merge_, 1, 1);
}

void Kernels::last_rows(Mem x, Mem y, int B, int S, int row) {
  const int total = B * row;
  last_rows_.args(x, y, S, row, total);
  ctx_.launch(last_rows_, static_cast<size_t>(total), group_size(last_rows_, 64));
}

void Kernels::ring_write(Mem k, int k_at, int k_stride, Mem v, int v_at, int v_stride, int count, int seen_before, int W, int sinks,
                         int kv_floats, bool half_kv, Mem keys, Mem values) {
  ring_write_.args(k, k_at, k_stride, v, v_at, v_stride, count, seen_before, W, sinks, kv_floats, int32_t{half_kv}, keys, values);
  ctx_.launch(ring_write_, static_cast<size_t>(count) * static_cast<size_t>(kv_floats), group_size(ring_write_, 64));
}

void Kernels::ring_attend(Mem q, int q_at, int q_stride, int count, int q_heads, int kv_heads, int D, int held, int seen, int W, int sinks,
                          bool half_kv, Mem keys, Mem values, const DeviceRope& rope, float scale, Mem scores, Mem out, int out_at,
                          int out_stride) {
  const size_t wg = group_size(ring_attend_, 64);
  ring_attend_
      .args(q, q_at, q_stride, count, q_heads, kv_heads, D, held, seen, W, sinks, int32_t{half_kv}, keys, values, rope.cos, rope.sin,
            rope.rot, int32_t{rope.interleaved}, scale, scores, out, out_at, out_stride)
      .local(23, static_cast<size_t>(D) * sizeof(float))
      .local(24, wg * sizeof(float));
  ctx_.launch(ring_attend_, static_cast<size_t>(count) * static_cast<size_t>(q_heads) * wg, wg);
}

}  // namespace tern::kernels::opencl
