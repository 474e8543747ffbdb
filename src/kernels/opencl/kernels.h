// Host side of the OpenCL kernels (decoder.cl): one object per device context builds the program once
// and launches each kernel with a work-group size this device allows. Buffers hold float32 unless said;
// like the CPU kernels these know nothing about ONNX.
#pragma once
#include <cstdint>

#include "kernels/opencl/device.h"

namespace tern::kernels::opencl {

// A device buffer argument: a cl::Buffer, or the cl_mem of a device-resident tensor.
struct Mem {
  cl_mem m;
  Mem(const cl::Buffer& b) : m(b.handle()) {}  // NOLINT: implicit on purpose
  Mem(cl_mem mem) : m(mem) {}                  // NOLINT
  operator cl_mem() const { return m; }        // NOLINT: passes as a kernel argument
};

// The RoPE tables a ring attention reads: cos/sin [positions, rot/2] on the device.
struct DeviceRope {
  Mem cos, sin;
  int rot = 0;
  bool interleaved = false;
};

class Kernels {
 public:
  // Products run one work-group per output column (GEMV) or 16×16 tiles (GEMM) on GPUs, and one
  // work-item per column on other devices (row_per_item; defaults to "not a GPU").
  explicit Kernels(cl::Context& ctx);
  Kernels(cl::Context& ctx, bool row_per_item);
  cl::Context& context() { return ctx_; }

  // y[M, N] = x[M, K] · Wᵀ, W [N, K] float32 or half (`half_weights`): a GEMV for up to kGemvRows
  // rows (decode), a tiled GEMM for more (prefill) on GPUs. CPU devices keep the row-per-item GEMV for
  // any M: on PoCL it ran a 32×576×1536 product in 8.5 ms against the tiled GEMM's 39.6 (barriers
  // between 256 work-items cost a CPU more than the tiles save).
  void gemv(Mem x, Mem w, bool half_weights, Mem y, int M, int K, int N);
  static constexpr int kGemvRows = 4;
  // The same (GEMV or tiled GEMM by row count) for MatMulNBits blocks (bits 4 or 8): w [N, k_blocks, block·bits/8], scales [N·k_blocks],
  // packed zero points or a null Mem (nullptr) for the default.
  void gemv_nbits(Mem x, Mem w, Mem scales, Mem zero_points, Mem y, int M, int K, int N, int bits, int block);
  // y = rms_norm(x (+ residual, the sum also written to sum_out)) · scale, rows of D; no residual: both nullptr.
  void rms_norm(Mem x, Mem residual, Mem sum_out, Mem scale, Mem y, int rows, int D, float eps);
  // y [rows, F] = silu(gate) · up from gate and up [rows, F], or (up a null Mem) from gate [rows, 2F] =
  // [gate | up].
  void swiglu(Mem gate, Mem up, Mem y, int rows, int F);
  void add(Mem a, Mem b, Mem y, int n);
  // y [T, D] = table [rows, D] at int32 ids [T], each already checked to be in [0, rows).
  void embed_rows(Mem ids, Mem table, Mem y, int T, int D);
  // out (one int32) = the index of the largest of x[x_at .. x_at + n), the first on ties.
  void argmax(Mem x, int x_at, int n, Mem out);
  // values / ids (k each, best first, ties to the lower index; -1 ids past n) = the k ≤ kTopKMax largest
  // of x[x_at .. x_at + n). `scratch_v` / `scratch_i` hold kTopKItems·k floats / ints.
  void top_k(Mem x, int x_at, int n, int k, Mem scratch_v, Mem scratch_i, Mem values, Mem ids);
  static constexpr int kTopKMax = 64, kTopKItems = 256;
  // y [B, 1, row] = x [B, S, row] at the last position.
  void last_rows(Mem x, Mem y, int B, int S, int row);
  // Ring-buffer KV cache of one sequence (the CPU KvRingBuffer's slots and window order): appends
  // `count` tokens after `seen_before`, token s's key at k[k_at + s·k_stride] and value at
  // v[v_at + s·v_stride] (offsets and strides in floats).
  void ring_write(Mem k, int k_at, int k_stride, Mem v, int v_at, int v_stride, int count, int seen_before, int W, int sinks, int kv_floats,
                  bool half_kv, Mem keys, Mem values);
  // Attention of the last `count` appended tokens (queries pre-RoPE from q_at, rows `q_stride` apart)
  // over the window of a sequence holding `held` tokens of `seen`; `scores` holds count·q_heads·held
  // floats; output rows from out_at, `out_stride` apart.
  void ring_attend(Mem q, int q_at, int q_stride, int count, int q_heads, int kv_heads, int D, int held, int seen, int W, int sinks,
                   bool half_kv, Mem keys, Mem values, const DeviceRope& rope, float scale, Mem scores, Mem out, int out_at,
                   int out_stride);

 private:
  // The largest power of two ≤ `want` this kernel can run as one work-group here.
  size_t group_size(const cl::Kernel& k, size_t want) const;
  // The tiled GEMM, when this device runs its 16×16 work-groups (else false: the caller takes the GEMV).
  bool gemm(Mem x, Mem w, Mem scales, Mem zero_points, int format, int bits, int block, Mem y, int M, int K, int N);
  cl::Context& ctx_;
  bool row_per_item_;
  cl_program program_;
  cl::Kernel gemv_f32_, gemv_f16_, gemv_nbits_, gemv_rows_f32_, gemv_rows_f16_, gemv_rows_nbits_, gemm_tiled_, topk_partial_, topk_merge_,
      rms_norm_, swiglu_, add_, embed_, argmax_, last_rows_, ring_write_, ring_attend_;
};

}  // namespace tern::kernels::opencl
