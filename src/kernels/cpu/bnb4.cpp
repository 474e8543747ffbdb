#include "kernels/cpu/bnb4.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace tern::kernels {
namespace {

// The formats' 16 points, as bitsandbytes defines them: NF4 the quantiles of a normal distribution scaled to
// [−1, 1] (QLoRA, Dettmers et al. 2023); FP4 a sign, two exponent bits and one mantissa bit, scaled by 1/12.
constexpr float kNf4[16] = {-1.0f,
                            -0.6961928009986877f,
                            -0.5250730514526367f,
                            -0.39491748809814453f,
                            -0.28444138169288635f,
                            -0.18477343022823334f,
                            -0.09105003625154495f,
                            0.0f,
                            0.07958029955625534f,
                            0.16093020141124725f,
                            0.24611230194568634f,
                            0.33791524171829224f,
                            0.44070982933044434f,
                            0.5626170039176941f,
                            0.7229568362236023f,
                            1.0f};
constexpr float kFp4[16] = {0.0f,  5.208333333e-03f,  0.66666667f,  1.0f,  0.33333333f,  0.5f,  0.16666667f,  0.25f,
                            -0.0f, -5.208333333e-03f, -0.66666667f, -1.0f, -0.33333333f, -0.5f, -0.16666667f, -0.25f};

}  // namespace

void dequantize_bnb4(const uint8_t* codes, const float* absmax, int64_t numel, int64_t block, Bnb4Type type, float* out) {
  const float* table = type == Bnb4Type::NF4 ? kNf4 : kFp4;
  const int64_t blocks = (numel + block - 1) / block;
  parallel_chunks(blocks, balanced_chunks(blocks, numel < (int64_t{1} << 16)), [&](int64_t b0, int64_t b1, int) {
    for (int64_t i = b0 * block; i < std::min(numel, b1 * block); ++i) {
      const uint8_t byte = codes[i / 2];
      out[i] = table[i % 2 ? byte & 15 : byte >> 4] * absmax[i / block];
    }
  });
}

}  // namespace tern::kernels
