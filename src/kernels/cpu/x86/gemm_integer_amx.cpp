// AMX-INT8: gemm_integer's dot products for prefill rows on tiles. TDPBSUD multiplies 16 rows × 64 int8 bytes by a
// 64 × 16 uint8 tile held as 16 rows of (k, k+1, k+2, k+3) quads into a 16 × 16 int32 tile: 16,384 products an
// instruction. The weights are the first operand as they lie (16 rows of K; uint8 weights through TDPBUUD, no flip),
// the activations' codes the second, laid out in quads once per product; so a C tile is
// 16 weight rows × 16 activation rows, written back transposed. A block is 32 weight rows × 32 activation rows:
// four C tiles, two weight tiles, two activation tiles — the 8 tile registers.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm_integer.h"
#include "kernels/cpu/x86/amx_tiles.h"

namespace tern::kernels {
namespace {

constexpr int64_t kKStep = 64;  // K per tile step: a 64-byte row
constexpr int64_t kBlock = 32;  // weight rows and activation rows of a block: two tiles each

// The layout of integer_amx_layout for activation rows [m0, m0 + 32): two tiles of quads per K step.
void quad_rows(const uint8_t* a, int64_t M, int64_t K, int64_t steps, int64_t m0, uint32_t* out) {
  for (int64_t r = 0; r < kBlock && m0 + r < M; ++r) {
    const uint8_t* row = a + (m0 + r) * K;
    uint32_t* tile = out + (r / 16) * 256 + r % 16;
    for (int64_t k = 0; k < K; k += 4) {
      uint32_t quad = 0;
      std::memcpy(&quad, row + k, static_cast<size_t>(std::min<int64_t>(4, K - k)));
      tile[(k / kKStep) * 2 * 256 + (k % kKStep) / 4 * 16] = quad;
    }
  }
}

int64_t k_steps(int64_t K) { return (K + kKStep - 1) / kKStep; }

template <bool kUnsigned>
void dot_blocks(const uint8_t* layout, int64_t M, int64_t K, const uint8_t* w, int64_t n0, int64_t n1, int32_t* dots, int64_t N) {
  const int64_t steps = k_steps(K), Kpad = steps * kKStep, row_blocks = (M + kBlock - 1) / kBlock;
  const auto* quads = reinterpret_cast<const uint32_t*>(layout);
  std::vector<uint8_t> padded;  // a block of weight rows that may not be read in place, zeros past N and K
  load_tiles_16x64();
  alignas(64) int32_t c[4][16][16];
  for (int64_t n = n0; n < n1; n += kBlock) {
    // In place while a whole 64-byte step of every row lies inside the matrix; else from a padded copy.
    const uint8_t* rows = w + n * K;
    int64_t ldw = K;
    if (n + kBlock > N || (K % kKStep != 0 && n + kBlock >= N)) {
      padded.assign(static_cast<size_t>(kBlock * Kpad), 0);
      for (int64_t r = 0; r < kBlock && n + r < N; ++r) std::memcpy(padded.data() + r * Kpad, w + (n + r) * K, static_cast<size_t>(K));
      rows = padded.data();
      ldw = Kpad;
    }
    for (int64_t i = 0; i < row_blocks; ++i) {
      const uint32_t* q = quads + i * steps * 2 * 256;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t s = 0; s < steps; ++s) {
        _tile_loadd(4, rows + s * kKStep, ldw);
        _tile_loadd(5, rows + 16 * ldw + s * kKStep, ldw);
        _tile_loadd(6, q + (2 * s) * 256, 64);
        _tile_loadd(7, q + (2 * s + 1) * 256, 64);
        if (kUnsigned) {
          _tile_dpbuud(0, 4, 6);
          _tile_dpbuud(1, 4, 7);
          _tile_dpbuud(2, 5, 6);
          _tile_dpbuud(3, 5, 7);
        } else {
          _tile_dpbsud(0, 4, 6);
          _tile_dpbsud(1, 4, 7);
          _tile_dpbsud(2, 5, 6);
          _tile_dpbsud(3, 5, 7);
        }
      }
      _tile_stored(0, c[0], 64);
      _tile_stored(1, c[1], 64);
      _tile_stored(2, c[2], 64);
      _tile_stored(3, c[3], 64);
      // c[2 · wh + ah][weight row][activation row]
      for (int ah = 0; ah < 2; ++ah)
        for (int r = 0; r < 16; ++r) {
          const int64_t m = i * kBlock + 16 * ah + r;
          if (m >= M) break;
          for (int wh = 0; wh < 2; ++wh)
            for (int j = 0; j < 16 && n + 16 * wh + j < n1; ++j) dots[m * N + n + 16 * wh + j] = c[2 * wh + ah][j][r];
        }
    }
  }
  _tile_release();
}

}  // namespace

int64_t integer_amx_layout_bytes(int64_t M, int64_t K) {
  return (M + kBlock - 1) / kBlock * k_steps(K) * 2 * 256 * static_cast<int64_t>(sizeof(uint32_t));
}

void integer_amx_layout(const uint8_t* codes, int64_t M, int64_t K, uint8_t* out) {
  const int64_t steps = k_steps(K), row_blocks = (M + kBlock - 1) / kBlock;
  std::memset(out, 0, static_cast<size_t>(integer_amx_layout_bytes(M, K)));  // zeros past M and K
  auto* quads = reinterpret_cast<uint32_t*>(out);
  for (int64_t i = 0; i < row_blocks; ++i) quad_rows(codes, M, K, steps, i * kBlock, quads + i * steps * 2 * 256);
}

void integer_dots_amx(const uint8_t* layout, int64_t M, int64_t K, const uint8_t* w, bool unsigned_weights, int64_t n0, int64_t n1,
                      int32_t* dots, int64_t N) {
  if (unsigned_weights) dot_blocks<true>(layout, M, K, w, n0, n1, dots, N);
  else dot_blocks<false>(layout, M, K, w, n0, n1, dots, N);
}

}  // namespace tern::kernels
