#include "kernels/opencl/kernels.h"

#include "core/error.h"
#include "kernels/opencl/sources.h"

namespace tern::kernels::opencl {

Kernels::Kernels(cl::Context& ctx)
    : ctx_(ctx), program_(ctx.program(sources().at("decoder.cl"), "-cl-std=CL1.2")),
      gemv_f32_(program_, "gemv_f32"), gemv_f16_(program_, "gemv_f16"), gemv_nbits_(program_, "gemv_nbits"),
      rms_norm_(program_, "rms_norm"), swiglu_(program_, "swiglu_packed"), add_(program_, "add"),
      embed_(program_, "embed_rows"), argmax_(program_, "argmax") {}

size_t Kernels::group_size(const cl::Kernel& k, size_t want) const {
  const size_t limit = std::min(want, ctx_.max_work_group(k));
  size_t g = 1;
  while (g * 2 <= limit) g *= 2;
  return g;
}

void Kernels::gemv(const cl::Buffer& x, const cl::Buffer& w, bool half_weights, cl::Buffer& y, int M, int K, int N) {
  cl::Kernel& k = half_weights ? gemv_f16_ : gemv_f32_;
  const size_t wg = group_size(k, 64);
  k.args(x, w, y, M, K, N).local(6, wg * sizeof(float));
  ctx_.launch(k, static_cast<size_t>(N) * wg, wg);
}

void Kernels::gemv_nbits(const cl::Buffer& x, const cl::Buffer& w, const cl::Buffer& scales, const cl::Buffer* zero_points,
                         cl::Buffer& y, int M, int K, int N, int bits, int block) {
  if ((bits != 4 && bits != 8) || block <= 0 || block % 2) fail("OpenCL gemv_nbits: bits must be 4 or 8 and block even");
  const size_t wg = group_size(gemv_nbits_, 64);
  gemv_nbits_.args(x, w, scales, zero_points ? *zero_points : scales, zero_points ? 1 : 0, y, M, K, N, bits, block)
      .local(11, wg * sizeof(float));
  ctx_.launch(gemv_nbits_, static_cast<size_t>(N) * wg, wg);
}

void Kernels::rms_norm(const cl::Buffer& x, const cl::Buffer* residual, cl::Buffer* sum_out, const cl::Buffer& scale,
                       cl::Buffer& y, int rows, int D, float eps) {
  if ((residual == nullptr) != (sum_out == nullptr)) fail("OpenCL rms_norm: a residual needs a sum_out buffer and back");
  const size_t wg = group_size(rms_norm_, 256);
  rms_norm_.args(x, residual ? *residual : x, residual ? 1 : 0, sum_out ? *sum_out : y, scale, y, D, eps)
      .local(8, wg * sizeof(float));
  ctx_.launch(rms_norm_, static_cast<size_t>(rows) * wg, wg);
}

void Kernels::swiglu_packed(const cl::Buffer& x, cl::Buffer& y, int rows, int F) {
  const int total = rows * F;
  swiglu_.args(x, y, F, total);
  ctx_.launch(swiglu_, static_cast<size_t>(total), group_size(swiglu_, 64));
}

void Kernels::add(const cl::Buffer& a, const cl::Buffer& b, cl::Buffer& y, int n) {
  add_.args(a, b, y, n);
  ctx_.launch(add_, static_cast<size_t>(n), group_size(add_, 64));
}

void Kernels::embed_rows(const cl::Buffer& ids, const cl::Buffer& table, cl::Buffer& y, int T, int rows, int D, cl::Buffer& bad) {
  const size_t wg = group_size(embed_, 64);
  embed_.args(ids, table, y, rows, D, bad);
  ctx_.launch(embed_, static_cast<size_t>(T) * wg, wg);
}

void Kernels::argmax(const cl::Buffer& x, int n, cl::Buffer& out) {
  const size_t wg = group_size(argmax_, 256);
  argmax_.args(x, n, out).local(3, wg * sizeof(float)).local(4, wg * sizeof(int32_t));
  ctx_.launch(argmax_, wg, wg);
}

}  // namespace tern::kernels::opencl
