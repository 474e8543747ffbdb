// Host side of the OpenCL kernels (decoder.cl): one object per device context builds the program once
// and launches each kernel with a work-group size this device allows. Buffers hold float32 unless said;
// like the CPU kernels these know nothing about ONNX.
#pragma once
#include <cstdint>

#include "runtime/opencl.h"

namespace tern::kernels::opencl {

class Kernels {
 public:
  explicit Kernels(cl::Context& ctx);
  cl::Context& context() { return ctx_; }

  // y[M, N] = x[M, K] · Wᵀ, W [N, K] float32 or half (`half_weights`).
  void gemv(const cl::Buffer& x, const cl::Buffer& w, bool half_weights, cl::Buffer& y, int M, int K, int N);
  // The same for MatMulNBits blocks (bits 4 or 8): w [N, k_blocks, block·bits/8], scales [N·k_blocks],
  // packed zero points or null for the default.
  void gemv_nbits(const cl::Buffer& x, const cl::Buffer& w, const cl::Buffer& scales, const cl::Buffer* zero_points,
                  cl::Buffer& y, int M, int K, int N, int bits, int block);
  // y = rms_norm(x (+ residual, the sum also written to sum_out)) · scale, rows of D.
  void rms_norm(const cl::Buffer& x, const cl::Buffer* residual, cl::Buffer* sum_out, const cl::Buffer& scale, cl::Buffer& y,
                int rows, int D, float eps);
  // y [rows, F] = silu(gate) · up from x [rows, 2F] = [gate | up].
  void swiglu_packed(const cl::Buffer& x, cl::Buffer& y, int rows, int F);
  void add(const cl::Buffer& a, const cl::Buffer& b, cl::Buffer& y, int n);
  // y [T, D] = table [rows, D] at int32 ids [T]; `bad` (one int32) gets 1 + the first bad position, else
  // stays as it was.
  void embed_rows(const cl::Buffer& ids, const cl::Buffer& table, cl::Buffer& y, int T, int rows, int D, cl::Buffer& bad);
  // out (one int32) = the index of the largest of x[0..n), the first on ties.
  void argmax(const cl::Buffer& x, int n, cl::Buffer& out);

 private:
  // The largest power of two ≤ `want` this kernel can run as one work-group here.
  size_t group_size(const cl::Kernel& k, size_t want) const;
  cl::Context& ctx_;
  cl_program program_;
  cl::Kernel gemv_f32_, gemv_f16_, gemv_nbits_, rms_norm_, swiglu_, add_, embed_, argmax_;
};

}  // namespace tern::kernels::opencl
