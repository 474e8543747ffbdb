// OpenCL C kernels for the decoder on a device (OpenCL 1.2, no extension required; built at run time by
// runtime/opencl.cpp and cached per device). Matrices keep ONNX Runtime's MatMulNBits orientation: a
// weight is [N, K] row-major (one output column's K weights contiguous), so one work-group streams one
// row with its work-items side by side — coalesced on GPUs, sequential per core on CPU devices (PoCL).
// Work-group sizes come from the host (queried per device); every reduction is a power-of-two tree in
// __local memory. Half-precision weights are read with vload_half, core OpenCL: no cl_khr_fp16 needed.

// The tree reduction every kernel ends with: sums `v` over the work-group (size a power of two).
float group_sum(float v, __local float* scratch) {
  const int lid = get_local_id(0), n = get_local_size(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = n / 2; s > 0; s /= 2) {
    if (lid < s) scratch[lid] += scratch[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // scratch is reused by the caller's next reduction
  return total;
}

// y[m, n] = Σ_k x[m, k] · W[n, k] for m < M: one work-group per n. WEIGHT_T is float or half storage.
#define GEMV(name, LOAD)                                                                               \
  __kernel void name(__global const float* x, __global const void* w_raw, __global float* y, int M,    \
                     int K, int N, __local float* scratch) {                                           \
    const int n = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);                      \
    if (n >= N) return;                                                                                \
    for (int m = 0; m < M; ++m) {                                                                      \
      float acc = 0.0f;                                                                                \
      for (int k = lid; k < K; k += wg) acc += x[(size_t)m * K + k] * LOAD(w_raw, (size_t)n * K + k);  \
      acc = group_sum(acc, scratch);                                                                   \
      if (lid == 0) y[(size_t)m * N + n] = acc;                                                        \
    }                                                                                                  \
  }
#define LOAD_F32(w, i) (((__global const float*)(w))[i])
#define LOAD_F16(w, i) vload_half((i), (__global const half*)(w))
GEMV(gemv_f32, LOAD_F32)
GEMV(gemv_f16, LOAD_F16)

// MatMulNBits weights as ONNX Runtime stores them: row n holds k_blocks blocks of `block` values,
// `bits` (4 or 8) each, low nibble first; scales [N, k_blocks]; zero points packed like the values
// ([N, ceil(k_blocks·bits/8)] bytes) or, when has_zp is 0, 2^(bits−1). One work-group per n, one
// work-item per block at a time.
__kernel void gemv_nbits(__global const float* x, __global const uchar* w, __global const float* scales,
                         __global const uchar* zp, int has_zp, __global float* y, int M, int K, int N, int bits,
                         int block, __local float* scratch) {
  const int n = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
  if (n >= N) return;
  const int k_blocks = (K + block - 1) / block, blob = block * bits / 8, zp_row = (k_blocks * bits + 7) / 8;
  for (int m = 0; m < M; ++m) {
    float acc = 0.0f;
    for (int b = lid; b < k_blocks; b += wg) {
      const size_t nb = (size_t)n * k_blocks + b;
      float z = (float)(1 << (bits - 1));
      if (has_zp) {
        const uchar packed = zp[(size_t)n * zp_row + (b * bits) / 8];
        z = bits == 8 ? (float)packed : (float)((b & 1) ? packed >> 4 : packed & 15);
      }
      __global const uchar* q = w + nb * blob;
      __global const float* xs = x + (size_t)m * K + (size_t)b * block;
      const int len = min(block, K - b * block);
      float dot = 0.0f, xsum = 0.0f;
      for (int i = 0; i < len; ++i) {
        const float v = bits == 8 ? (float)q[i] : (float)((i & 1) ? q[i / 2] >> 4 : q[i / 2] & 15);
        dot += v * xs[i];
        xsum += xs[i];
      }
      acc += scales[nb] * (dot - z * xsum);
    }
    acc = group_sum(acc, scratch);
    if (get_local_id(0) == 0) y[(size_t)m * N + n] = acc;
  }
}

// y[r, :] = x[r, :] / sqrt(mean(x²) + eps) · scale (+ residual first when `residual` is given: the skip
// form, which also writes the sum to `sum_out`). One work-group per row.
__kernel void rms_norm(__global const float* x, __global const float* residual, int has_residual,
                       __global float* sum_out, __global const float* scale, __global float* y, int D, float eps,
                       __local float* scratch) {
  const int r = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
  __global const float* xr = x + (size_t)r * D;
  float ss = 0.0f;
  for (int i = lid; i < D; i += wg) {
    float v = xr[i];
    if (has_residual) {
      v += residual[(size_t)r * D + i];
      sum_out[(size_t)r * D + i] = v;
    }
    ss += v * v;
  }
  const float inv = rsqrt(group_sum(ss, scratch) / (float)D + eps);
  for (int i = lid; i < D; i += wg) {
    const float v = has_residual ? sum_out[(size_t)r * D + i] : xr[i];
    y[(size_t)r * D + i] = v * inv * scale[i];
  }
}

// y[r, i] = silu(gate) · up from rows packed as [gate (F) | up (F)].
__kernel void swiglu_packed(__global const float* x, __global float* y, int F, int total) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int r = i / F, c = i % F;
  const float g = x[(size_t)r * 2 * F + c], u = x[(size_t)r * 2 * F + F + c];
  y[i] = g / (1.0f + exp(-g)) * u;
}

__kernel void add(__global const float* a, __global const float* b, __global float* y, int total) {
  const int i = get_global_id(0);
  if (i < total) y[i] = a[i] + b[i];
}

// y[t, :] = table[ids[t], :]; an id outside [0, rows) sets *bad to t + 1 and writes zeros (the host
// reports it naming the token).
__kernel void embed_rows(__global const int* ids, __global const float* table, __global float* y, int rows, int D,
                         __global int* bad) {
  const int t = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
  const int id = ids[t];
  const bool ok = id >= 0 && id < rows;
  if (!ok && lid == 0) *bad = t + 1;
  for (int i = lid; i < D; i += wg) y[(size_t)t * D + i] = ok ? table[(size_t)id * D + i] : 0.0f;
}

// out[0] = the index of the largest of x[0..n) (the first on ties), from one work-group.
__kernel void argmax(__global const float* x, int n, __global int* out, __local float* best_v, __local int* best_i) {
  const int lid = get_local_id(0), wg = get_local_size(0);
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int i = lid; i < n; i += wg)
    if (x[i] > bv) bv = x[i], bi = i;
  best_v[lid] = bv;
  best_i[lid] = bi;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = wg / 2; s > 0; s /= 2) {
    if (lid < s) {
      const float ov = best_v[lid + s];
      const int oi = best_i[lid + s];
      if (ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid])) best_v[lid] = ov, best_i[lid] = oi;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) out[0] = best_i[0] == 0x7fffffff ? 0 : best_i[0];
}
