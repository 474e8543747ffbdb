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

// The same with one work-item per output column n streaming its row alone, four at a time: no barriers,
// for CPU devices (PoCL), where a work-group's items run as a loop and per-group reductions cost more
// than they save. GPUs take the work-group form above (coalesced rows).
#define GEMV_ROWS(name, LOAD4, LOAD)                                                                    \
  __kernel void name(__global const float* x, __global const void* w_raw, __global float* y, int M,    \
                     int K, int N) {                                                                   \
    const int n = get_global_id(0);                                                                    \
    if (n >= N) return;                                                                                \
    const size_t row = (size_t)n * K;                                                                  \
    for (int m = 0; m < M; ++m) {                                                                      \
      __global const float* xm = x + (size_t)m * K;                                                   \
      float4 acc = (float4)(0.0f);                                                                     \
      int k = 0;                                                                                       \
      if ((K & 3) == 0)                                                                                \
        for (; k < K; k += 4) acc += vload4(0, xm + k) * LOAD4(w_raw, row + k);                        \
      float s = acc.x + acc.y + acc.z + acc.w;                                                         \
      for (; k < K; ++k) s += xm[k] * LOAD(w_raw, row + k);                                            \
      y[(size_t)m * N + n] = s;                                                                        \
    }                                                                                                  \
  }
#define LOAD4_F32(w, i) vload4(0, ((__global const float*)(w)) + (i))
#define LOAD4_F16(w, i) vload_half4(0, ((__global const half*)(w)) + (i))
GEMV_ROWS(gemv_rows_f32, LOAD4_F32, LOAD_F32)
GEMV_ROWS(gemv_rows_f16, LOAD4_F16, LOAD_F16)

// MatMulNBits weights as ONNX Runtime stores them: row n holds k_blocks blocks of `block` values,
// `bits` (4 or 8) each, low nibble first; scales [N, k_blocks]; zero points packed like the values
// ([N, ceil(k_blocks·bits/8)] bytes) or, when has_zp is 0, 2^(bits−1).
float nbits_zero_point(__global const uchar* zp, int has_zp, int n, int b, int bits, int k_blocks) {
  if (!has_zp) return (float)(1 << (bits - 1));
  const uchar packed = zp[(size_t)n * ((k_blocks * bits + 7) / 8) + (b * bits) / 8];
  return bits == 8 ? (float)packed : (float)((b & 1) ? packed >> 4 : packed & 15);
}

// Block b of row n against x's matching block: scale · (Σ q·x − zero_point · Σ x).
float nbits_block_dot(__global const float* xm, __global const uchar* w, __global const float* scales, __global const uchar* zp,
                      int has_zp, int n, int b, int K, int bits, int block, int k_blocks) {
  const size_t nb = (size_t)n * k_blocks + b;
  __global const uchar* q = w + nb * (block * bits / 8);
  __global const float* xs = xm + (size_t)b * block;
  const int len = min(block, K - b * block);
  float dot = 0.0f, xsum = 0.0f;
  int i = 0;
  if (bits == 4)  // a byte at a time: its low nibble, then its high one
    for (; i + 1 < len; i += 2) {
      const uchar byte = q[i / 2];
      const float2 xv = vload2(0, xs + i);
      dot += (float)(byte & 15) * xv.x + (float)(byte >> 4) * xv.y;
      xsum += xv.x + xv.y;
    }
  for (; i < len; ++i) {  // 8-bit values, and an odd 4-bit tail
    const float v = bits == 8 ? (float)q[i] : (float)((i & 1) ? q[i / 2] >> 4 : q[i / 2] & 15);
    dot += v * xs[i];
    xsum += xs[i];
  }
  return scales[nb] * (dot - nbits_zero_point(zp, has_zp, n, b, bits, k_blocks) * xsum);
}

// One work-group per n (GPUs): the work-items read the row one 32-bit word (8 four-bit or 4 eight-bit
// values) each, side by side, so a warp's loads are one coalesced stream — as gemv_f32 reads floats.
// (A work-item a block, 16 bytes apart from its neighbour, ran the 1B shape's int4 decode at 255 GB/s on
// an H200 against gemv_f32's ~2 TB/s: the block form below stays for CPU devices.) Needs block a
// multiple of the word's values (the host checks) and a little-endian device (every GPU OpenCL runs on);
// the word holding x's end reads only up to K.
__kernel void gemv_nbits(__global const float* x, __global const uint* w, __global const float* scales,
                         __global const uchar* zp, int has_zp, __global float* y, int M, int K, int N, int bits,
                         int block, __local float* scratch) {
  const int n = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
  if (n >= N) return;
  const int k_blocks = (K + block - 1) / block, per_word = 32 / bits, mask = (1 << bits) - 1;
  const int words = (K + per_word - 1) / per_word;
  __global const uint* row = w + (size_t)n * k_blocks * (block / per_word);
  for (int m = 0; m < M; ++m) {
    __global const float* xm = x + (size_t)m * K;
    float acc = 0.0f;
    for (int j = lid; j < words; j += wg) {
      const uint q = row[j];
      const int k0 = j * per_word, len = min(per_word, K - k0), b = k0 / block;
      float qx = 0.0f, xsum = 0.0f;
      if (len == 8) {  // a whole 4-bit word
        const float8 xv = vload8(0, xm + k0);
        const float8 qv = convert_float8((uint8)(q, q >> 4, q >> 8, q >> 12, q >> 16, q >> 20, q >> 24, q >> 28) & 15u);
        qx = dot(qv.lo, xv.lo) + dot(qv.hi, xv.hi);
        xsum = dot(xv.lo + xv.hi, (float4)(1.0f));
      } else if (len == 4 && bits == 8) {
        const float4 xv = vload4(0, xm + k0);
        qx = dot(convert_float4((uint4)(q, q >> 8, q >> 16, q >> 24) & 255u), xv);
        xsum = dot(xv, (float4)(1.0f));
      } else
        for (int i = 0; i < len; ++i) {  // the word holding x's end
          const float xv = xm[k0 + i];
          qx += (float)((q >> (i * bits)) & mask) * xv;
          xsum += xv;
        }
      acc += scales[(size_t)n * k_blocks + b] * (qx - nbits_zero_point(zp, has_zp, n, b, bits, k_blocks) * xsum);
    }
    acc = group_sum(acc, scratch);
    if (lid == 0) y[(size_t)m * N + n] = acc;
  }
}

// One work-item per n over its whole row (CPU devices, as gemv_rows_*).
__kernel void gemv_rows_nbits(__global const float* x, __global const uchar* w, __global const float* scales,
                              __global const uchar* zp, int has_zp, __global float* y, int M, int K, int N, int bits,
                              int block) {
  const int n = get_global_id(0);
  if (n >= N) return;
  const int k_blocks = (K + block - 1) / block;
  for (int m = 0; m < M; ++m) {
    float acc = 0.0f;
    for (int b = 0; b < k_blocks; ++b)
      acc += nbits_block_dot(x + (size_t)m * K, w, scales, zp, has_zp, n, b, K, bits, block, k_blocks);
    y[(size_t)m * N + n] = acc;
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

// y[r, c] = silu(gate[r·stride + c]) · up[up_at + r·stride + c]: two tensors [rows, F] (stride F,
// up_at 0), or one packed [rows, 2F] = [gate | up] (both the same buffer, stride 2F, up_at F).
__kernel void swiglu(__global const float* gate, __global const float* up, int stride, int up_at, __global float* y, int F,
                     int total) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const size_t at = (size_t)(i / F) * stride + i % F;
  const float g = gate[at];
  y[i] = g / (1.0f + exp(-g)) * up[up_at + at];
}

__kernel void add(__global const float* a, __global const float* b, __global float* y, int total) {
  const int i = get_global_id(0);
  if (i < total) y[i] = a[i] + b[i];
}

// y[t, :] = table[ids[t], :] (ids checked by the host, which has them).
__kernel void embed_rows(__global const int* ids, __global const float* table, __global float* y, int D) {
  const int t = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
  const size_t id = (size_t)ids[t];
  for (int i = lid; i < D; i += wg) y[(size_t)t * D + i] = table[id * D + i];
}

// out[0] = the index of the largest of x[x_at .. x_at + n) (the first on ties), from one work-group.
__kernel void argmax(__global const float* x, int x_at, int n, __global int* out, __local float* best_v, __local int* best_i) {
  const int lid = get_local_id(0), wg = get_local_size(0);
  x += x_at;
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

// y[b, :] = x[b, S − 1, :] for rows of `row` floats: the last position of each sequence.
__kernel void last_rows(__global const float* x, __global float* y, int S, int row, int total) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int b = i / row, c = i % row;
  y[i] = x[((size_t)b * S + S - 1) * row + c];
}

// The ring-buffer KV cache on the device, with the CPU cache's semantics (kernels/cpu/kv_ring_buffer.h):
// keys stored before RoPE in slots [W][kv_heads][D], in the slots kernels/ring_slots.h assigns; stored as
// float or half (`half_kv`, vstore_half: core).
#include "kernels/ring_slots.h"

// Appends `count` tokens (the sequence has seen `seen_before`): token s's key is read at
// k[k_at + s·k_stride], its value at v[v_at + s·v_stride] (the same buffer for packed rows).
__kernel void ring_write(__global const float* k, int k_at, int k_stride, __global const float* v, int v_at, int v_stride,
                         int count, int seen_before, int W, int sinks, int kv_floats, int half_kv, __global void* keys,
                         __global void* values) {
  const int i = get_global_id(0);
  if (i >= count * kv_floats) return;
  const int s = i / kv_floats, d = i % kv_floats;
  const size_t at = (size_t)ring_slot_of_token(seen_before + s, W, sinks) * kv_floats + d;
  const float kd = k[k_at + (size_t)s * k_stride + d], vd = v[v_at + (size_t)s * v_stride + d];
  if (half_kv) {
    vstore_half(kd, at, (__global half*)keys);
    vstore_half(vd, at, (__global half*)values);
  } else {
    ((__global float*)keys)[at] = kd;
    ((__global float*)values)[at] = vd;
  }
}

float ring_load(__global const void* p, size_t i, int half_kv) {
  return half_kv ? vload_half(i, (__global const half*)p) : ((__global const float*)p)[i];
}

// Element d of a head vector x rotated to RoPE row `pos` (cos/sin [positions, rot/2]; dims ≥ rot pass).
float rope_elem(float xd, float partner, int d, int rot, int interleaved, __global const float* cos_t,
                __global const float* sin_t, int pos) {
  if (d >= rot) return xd;
  const int half_rot = rot / 2;
  const int j = interleaved ? d / 2 : (d < half_rot ? d : d - half_rot);
  const bool first = interleaved ? (d % 2 == 0) : d < half_rot;
  const float c = cos_t[(size_t)pos * half_rot + j], s = sin_t[(size_t)pos * half_rot + j];
  return first ? xd * c - partner * s : xd * c + partner * s;
}

// The partner of element d in its rotation pair.
int rope_partner(int d, int rot, int interleaved) {
  if (d >= rot) return d;
  return interleaved ? (d ^ 1) : (d < rot / 2 ? d + rot / 2 : d - rot / 2);
}

// Attention of `count` new query tokens (from q_at, rows `q_stride` floats apart, pre-RoPE) over the window: query
// s at window position first + s sees window indices 0 … first + s (the window as it stood after its own
// append; first = held − count), keys rotated to their window index as read. One work-group per (query
// token, query head); scores go through `scores` ([count, q_heads, held] floats), then a max, a sum and the
// weighted values, each a work-group reduction. Output rows from out_at, `out_stride` floats apart, [q_heads][D].
__kernel void ring_attend(__global const float* q, int q_at, int q_stride, int count, int q_heads, int kv_heads, int D,
                          int held, int seen, int W, int sinks, int half_kv, __global const void* keys,
                          __global const void* values, __global const float* cos_t, __global const float* sin_t,
                          int rot, int interleaved, float scale, __global float* scores, __global float* out,
                          int out_at, int out_stride, __local float* qrot, __local float* scratch) {
  const int s = get_group_id(0) / q_heads, h = get_group_id(0) % q_heads;
  const int lid = get_local_id(0), wg = get_local_size(0);
  const int kvh = h / (q_heads / kv_heads), kv_floats = kv_heads * D;
  const int qpos = held - count + s, n = qpos + 1;
  __global const float* qh = q + q_at + (size_t)s * q_stride + (size_t)h * D;
  for (int d = lid; d < D; d += wg) qrot[d] = rope_elem(qh[d], qh[rope_partner(d, rot, interleaved)], d, rot, interleaved, cos_t, sin_t, qpos);
  barrier(CLK_LOCAL_MEM_FENCE);
  __global float* sc = scores + ((size_t)s * q_heads + h) * held;
  float mx = -INFINITY;
  for (int i = lid; i < n; i += wg) {
    const size_t base = (size_t)ring_slot_of_index(i, seen, W, sinks) * kv_floats + (size_t)kvh * D;
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float kd = ring_load(keys, base + d, half_kv), kp = ring_load(keys, base + rope_partner(d, rot, interleaved), half_kv);
      dot += qrot[d] * rope_elem(kd, kp, d, rot, interleaved, cos_t, sin_t, i);
    }
    sc[i] = dot * scale;
    mx = fmax(mx, dot * scale);
  }
  // max over the group (a reduction of its own: group_sum adds)
  scratch[lid] = mx;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int st = wg / 2; st > 0; st /= 2) {
    if (lid < st) scratch[lid] = fmax(scratch[lid], scratch[lid + st]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  mx = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  float sum = 0.0f;
  for (int i = lid; i < n; i += wg) {
    const float p = exp(sc[i] - mx);
    sc[i] = p;
    sum += p;
  }
  barrier(CLK_GLOBAL_MEM_FENCE);  // every sc[i] of the group visible to every work-item
  sum = group_sum(sum, scratch);
  __global float* o = out + out_at + (size_t)s * out_stride + (size_t)h * D;
  for (int d = lid; d < D; d += wg) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i)
      acc += sc[i] * ring_load(values, (size_t)ring_slot_of_index(i, seen, W, sinks) * kv_floats + (size_t)kvh * D + d, half_kv);
    o[d] = acc / sum;
  }
}

// Y[m, n] = Σ_k X[m, k] · W[n, k] for many rows (prefill): 16×16 tiles of X and W staged in __local
// memory, one output per work-item of a 16×16 work-group. W is float32, half, or MatMulNBits blocks
// (FORMAT 0, 1, 2 — one kernel each, below), dequantized as its tile is loaded.
#define TILE 16
float gemm_load_w(__global const void* w, __global const float* scales, __global const uchar* zp, int has_zp, int format,
                  int n, int k, int K, int bits, int block) {
  if (format == 0) return ((__global const float*)w)[(size_t)n * K + k];
  if (format == 1) return vload_half((size_t)n * K + k, (__global const half*)w);
  const int k_blocks = (K + block - 1) / block, b = k / block, i = k % block, blob = block * bits / 8;
  const size_t nb = (size_t)n * k_blocks + b;
  const uchar byte = ((__global const uchar*)w)[nb * blob + (size_t)i * bits / 8];
  const float q = bits == 8 ? (float)byte : (float)((i & 1) ? byte >> 4 : byte & 15);
  return (q - nbits_zero_point(zp, has_zp, n, b, bits, k_blocks)) * scales[nb];
}

__kernel void gemm_tiled(__global const float* x, __global const void* w, __global const float* scales,
                         __global const uchar* zp, int has_zp, int format, int bits, int block, __global float* y, int M,
                         int K, int N) {
  __local float xt[TILE][TILE], wt[TILE][TILE + 1];  // (+1: no bank conflicts on the transposed read)
  const int lm = get_local_id(1), ln = get_local_id(0);
  const int m = get_group_id(1) * TILE + lm, n0 = get_group_id(0) * TILE, n = n0 + ln;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    // this item loads X[m, k0 + ln] and W[n0 + lm, k0 + ln]
    xt[lm][ln] = (m < M && k0 + ln < K) ? x[(size_t)m * K + k0 + ln] : 0.0f;
    wt[lm][ln] = (n0 + lm < N && k0 + ln < K) ? gemm_load_w(w, scales, zp, has_zp, format, n0 + lm, k0 + ln, K, bits, block) : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TILE; ++kk) acc += xt[lm][kk] * wt[ln][kk];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (m < M && n < N) y[(size_t)m * N + n] = acc;
}

// The k (≤ TOPK_MAX) largest scores of x[x_at .. x_at + n) and their indices, best first, ties to the
// lower index — the candidates a top-k sampler draws from. Pass 1: each work-item keeps its slice's best
// k in private memory and writes them to cand_v / cand_i [items][k]; pass 2: one work-item merges them.
#define TOPK_MAX 64
void topk_insert(float* bv, int* bi, int* cnt, int k, float v, int id) {
  if (*cnt == k && !(v > bv[k - 1] || (v == bv[k - 1] && id < bi[k - 1]))) return;
  int j = *cnt < k ? (*cnt)++ : k - 1;
  while (j > 0 && (v > bv[j - 1] || (v == bv[j - 1] && id < bi[j - 1]))) {
    bv[j] = bv[j - 1];
    bi[j] = bi[j - 1];
    --j;
  }
  bv[j] = v;
  bi[j] = id;
}

__kernel void topk_partial(__global const float* x, int x_at, int n, int k, __global float* cand_v, __global int* cand_i) {
  const int item = get_global_id(0), items = get_global_size(0);
  float bv[TOPK_MAX];
  int bi[TOPK_MAX], cnt = 0;
  for (int i = item; i < n; i += items) {
    const float v = x[x_at + i];
    if (!isnan(v)) topk_insert(bv, bi, &cnt, k, v, i);
  }
  for (int j = 0; j < k; ++j) {
    cand_v[item * k + j] = j < cnt ? bv[j] : -INFINITY;
    cand_i[item * k + j] = j < cnt ? bi[j] : -1;
  }
}

__kernel void topk_merge(__global const float* cand_v, __global const int* cand_i, int total, int k, __global float* out_v,
                         __global int* out_i) {
  if (get_global_id(0) != 0) return;
  float bv[TOPK_MAX];
  int bi[TOPK_MAX], cnt = 0;
  for (int c = 0; c < total; ++c)
    if (cand_i[c] >= 0) topk_insert(bv, bi, &cnt, k, cand_v[c], cand_i[c]);
  for (int j = 0; j < k; ++j) {
    out_v[j] = j < cnt ? bv[j] : -INFINITY;
    out_i[j] = j < cnt ? bi[j] : -1;
  }
}
