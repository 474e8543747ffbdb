#include "kernels/cpu/nbits.h"

#include "kernels/cpu/nbits_dequant_impl.h"

#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/width_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tern::kernels {

void baseline::dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld) {
  dequantize_block_at_width(w, n0, n1, k0, k1, out, ld);
}

void dequantize_nbits_block(const NBitsWeights& w, int64_t n0, int64_t n1, int64_t k0, int64_t k1, float* out, int64_t ld) {
  baseline::dequantize_nbits_block(w, n0, n1, k0, k1, out, ld);
}

bool nbits_groups_native(const NBitsWeights& w, [[maybe_unused]] Isa isa, bool int8_activations) {
  const bool blocks = w.block % 32 == 0 || (w.block == 16 && nbits_k_blocks(w) % 2 == 0);  // (whole chunks)
#if defined(__x86_64__)
  const KernelTable& t = kernel_table(isa);
  const bool reader = t.nbits_i8_rows.fn;  // (4-bit: both GEMVs; a tier without int8 ones: the file's layout)
  [[maybe_unused]] const bool eight_bit_reader = t.nbits_groups_8bit;
#else
  const bool reader = !int8_activations;  // (AArch64's int8 GEMV reads the file's layout)
  [[maybe_unused]] const bool eight_bit_reader = true;
#endif
#ifdef TERN_MINIMAL  // (its 2- and 8-bit grouped kernels would cost the static binary 33 KB and more: tests/minimal_build.sh)
  const bool bits = w.bits == 4;
#else  // (8-bit: for x86's int8 GEMV, and for the fp32 one where the tier reads them faster so)
  const bool bits = w.bits == 4 || w.bits == 2 || (w.bits == 8 && (int8_activations || eight_bit_reader));
#endif
  return !w.grouped && bits && blocks && w.N > 0 && w.K > 0 && reader;
}

std::vector<int64_t> nbits_group_sizes(const NBitsWeights& w) {
  const int64_t groups = nbits_groups(w), k_blocks = nbits_k_blocks(w);
  const int64_t per_block = groups * k_blocks * kNBitsGroupRows;
  return {groups * k_blocks * w.block / 32 * nbits_chunk_bytes(w.bits), w.zp_packed || w.zp_float ? per_block : 0, per_block};
}

QuantizedWeights group_nbits_rows(const Context& cx, const NBitsWeights& w, const std::function<void(int64_t, int64_t)>& rows_done) {
  std::function<void(size_t, int64_t, int64_t)> done;
  if (rows_done) done = [&](size_t, int64_t n0, int64_t n1) { rows_done(n0, n1); };
  return group_nbits_rows(cx, std::vector<NBitsWeights>{w}, done);
}

QuantizedWeights group_nbits_rows(const Context& cx, const std::vector<NBitsWeights>& parts,
                                  const std::function<void(size_t, int64_t, int64_t)>& rows_done) {
  NBitsWeights w = parts.at(0);  // the whole: every part's rows, one after another
  w.N = 0;
  if ((w.bits != 2 && w.bits != 4 && w.bits != 8) || nbits_k_blocks(w) * w.block % 32 != 0)
    fail("group_nbits_rows: ", w.bits, "-bit blocks of ", w.block, " x ", nbits_k_blocks(w), " do not make whole 32-value chunks");
  for (const NBitsWeights& p : parts) {
    if (p.K != w.K || p.bits != w.bits || p.block != w.block || !p.zp_packed != !w.zp_packed || !p.zp_float != !w.zp_float ||
        w.N % kNBitsGroupRows != 0)
      fail("group_nbits_rows: the parts must share K, bits, block and zero-point form, each but the last a multiple of ", kNBitsGroupRows,
           " rows");
    w.N += p.N;
  }
  const std::vector<int64_t> sizes = nbits_group_sizes(w);
  const int64_t k_blocks = nbits_k_blocks(w), chunks = k_blocks * w.block / 32;
  QuantizedWeights g;
  g.N = w.N, g.K = w.K, g.bits = w.bits, g.block = w.block, g.grouped = true;
  g.data = Tensor(DType::UInt8, {sizes[0]});
  // fp16 scales when each one survives the round trip (what a token streams shrinks by 1/9 for blocks of 32).
  bool half = true;
  for (const NBitsWeights& p : parts)
    for (int64_t i = 0; half && i < p.N * k_blocks; ++i) half = static_cast<float>(f16(p.scales[i])) == p.scales[i];
  g.scales = Tensor(half ? DType::Float16 : DType::Float32, {sizes[2]});
  if (sizes[1]) g.zero_points = Tensor(w.zp_float ? DType::Float32 : DType::UInt8, {sizes[1]});
  uint8_t* data = g.data.data<uint8_t>();
  f16* scales_half = half ? g.scales.data<f16>() : nullptr;
  float* scales = half ? nullptr : g.scales.data<float>();
  float* zp_float = w.zp_float ? g.zero_points.data<float>() : nullptr;
  uint8_t* zp_bytes = w.zp_packed ? g.zero_points.data<uint8_t>() : nullptr;
  std::memset(data, 0, g.data.nbytes());
  std::memset(g.scales.raw(), 0, g.scales.nbytes());
  if (sizes[1]) std::memset(g.zero_points.raw(), 0, g.zero_points.nbytes());
  const int64_t blob = w.block * w.bits / 8, chunk_bytes = nbits_chunk_bytes(w.bits);
  int64_t first_group = 0;  // the part's first row group in the whole
  for (size_t part = 0; part < parts.size(); ++part) {
    const NBitsWeights& pw = parts[part];
    const int64_t groups = nbits_groups(pw);
    // 64 groups (1,024 rows) a step, then their source rows are done with: the 1B shape's 128256-row LM head held
    // all of its file pages beside its grouped copy at load, +0.33 GB on the load's peak (1.13 GB).
    constexpr int64_t kGroupsAStep = 64;
    for (int64_t s0 = 0; s0 < groups; s0 += kGroupsAStep) {
      const int64_t s1 = std::min(groups, s0 + kGroupsAStep);
      parallel_chunks(cx.threads, s1 - s0, balanced_chunks(cx.threads, s1 - s0), [&](int64_t g0, int64_t g1, int) {
        for (int64_t gi = s0 + g0; gi < s0 + g1; ++gi)
          for (int64_t r = 0; r < kNBitsGroupRows && gi * kNBitsGroupRows + r < pw.N; ++r) {
            const int64_t n = gi * kNBitsGroupRows + r, out_group = first_group + gi;
            for (int64_t kb = 0; kb < k_blocks; ++kb) {
              const int64_t at = (out_group * k_blocks + kb) * kNBitsGroupRows + r;
              if (half) scales_half[at] = f16(pw.scales[n * k_blocks + kb]);
              else scales[at] = pw.scales[n * k_blocks + kb];
              if (zp_float) zp_float[at] = pw.zp_float[n * k_blocks + kb];
              else if (zp_bytes) zp_bytes[at] = static_cast<uint8_t>(nbits_zero_point(pw, n, kb, k_blocks));
            }
            for (int64_t c = 0; c < chunks; ++c) {
              const uint8_t* src = pw.data + n * k_blocks * blob + c * 4 * w.bits;  // the chunk's bytes
              uint8_t* chunk = data + (out_group * chunks + c) * chunk_bytes;
              if (w.bits != 4) {  // (2- and 8-bit: each run the row's own next 4 bytes)
                for (int64_t j = 0; j < w.bits; ++j) std::memcpy(chunk + j * 64 + r * 4, src + 4 * j, 4);
                continue;
              }
              auto value = [&](int64_t i) { return i % 2 ? src[i / 2] >> 4 : src[i / 2] & 0xF; };  // values 2i, 2i + 1
              for (int64_t j = 0; j < 4; ++j)
                for (int64_t t = 0; t < 4; ++t)
                  chunk[j * 64 + r * 4 + t] = static_cast<uint8_t>(value(4 * j + t) | value(16 + 4 * j + t) << 4);
            }
          }
      });
      if (rows_done) rows_done(part, s0 * kNBitsGroupRows, std::min(pw.N, s1 * kNBitsGroupRows));
    }
    first_group += groups;
  }
  return g;
}

void dequantize_nbits_transposed(const NBitsWeights& w, float* out) { dequantize_nbits_block(w, 0, w.N, 0, w.K, out, w.N); }

namespace {
// The float16 at or above `scale` (positive, within float16's range), as a float.
float f16_at_least(float scale) {
  if (!(scale <= 65504.0f)) return scale;  // (past float16's largest, or NaN: kept as they are)
  f16 h(scale);
  if (static_cast<float>(h) < scale) ++h.bits;  // (positive float16s order as their bits)
  return static_cast<float>(h);
}
}  // namespace

QuantizedWeights quantize_nbits(const Context& cx, const float* W, int64_t K, int64_t N, int64_t bits, int64_t block, bool symmetric) {
  QuantizedWeights q;
  q.N = N;
  q.K = K;
  q.bits = bits;
  q.block = block;
  const int64_t k_blocks = (K + block - 1) / block, blob = block * bits / 8, zp_row = (k_blocks * bits + 7) / 8;
  const int levels = (1 << bits) - 1, half = 1 << (bits - 1);
  q.data = Tensor(DType::UInt8, {N * k_blocks * blob});
  if (!symmetric) q.zero_points = Tensor(DType::UInt8, {N * zp_row});
  q.scales = Tensor(DType::Float32, {N * k_blocks});
  std::memset(q.data.raw(), 0, q.data.nbytes());
  if (!symmetric) std::memset(q.zero_points.raw(), 0, q.zero_points.nbytes());
  uint8_t *data = q.data.data<uint8_t>(), *zero_points = symmetric ? nullptr : q.zero_points.data<uint8_t>();
  float* scales = q.scales.data<float>();
  constexpr float kSmallest = 5.9604645e-8f;  // 2^-24, float16's smallest: an all-zero block's scale
  parallel_chunks(cx.threads, N, balanced_chunks(cx.threads, N), [&](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        const int64_t k0 = kb * block, k1 = std::min(K, k0 + block);
        float lo = 0, hi = 0, extreme = 0;
        for (int64_t k = k0; k < k1; ++k) {
          const float v = W[k * N + n];
          lo = std::min(lo, v);
          hi = std::max(hi, v);
          if (std::fabs(v) > std::fabs(extreme)) extreme = v;
        }
        float scale;
        int zp = half;
        if (symmetric) {
          const float magnitude = f16_at_least(std::max(std::fabs(extreme) / static_cast<float>(half), kSmallest));
          scale = extreme > 0 ? -magnitude : magnitude;  // (extreme / −half: the extreme maps to code 0)
        } else {
          scale = f16_at_least(std::max((hi - lo) / static_cast<float>(levels), kSmallest));
          zp = std::clamp(static_cast<int>(std::nearbyint(-lo / scale)), 0, levels);
          zero_points[n * zp_row + kb * bits / 8] |= static_cast<uint8_t>(zp << (kb * bits % 8));
        }
        scales[n * k_blocks + kb] = scale;
        uint8_t* dst = data + (n * k_blocks + kb) * blob;
        for (int64_t k = k0; k < k1; ++k) {
          const int v = std::clamp(static_cast<int>(std::nearbyint(W[k * N + n] / scale)) + zp, 0, levels);
          const int64_t bit = (k - k0) * bits;
          dst[bit / 8] |= static_cast<uint8_t>(v << (bit % 8));
        }
        for (int64_t k = k1; k < k0 + block; ++k) {  // a last partial block: padding decodes to 0
          const int64_t bit = (k - k0) * bits;
          dst[bit / 8] |= static_cast<uint8_t>(zp << (bit % 8));
        }
      }
  });
  return q;
}

}  // namespace tern::kernels
