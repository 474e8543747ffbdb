// The tile configuration both AMX kernels use (x86/gemm_bf16_amx.cpp, x86/gemm_integer_amx.cpp): all 8 tile
// registers 16 rows of 64 bytes. Included only by files of tier amx; internal linkage.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace tern::kernels {
namespace {

// LDTILECFG's 64-byte operand, palette 1.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Configures this thread's 8 tiles as 16 × 64 bytes (the configuration is thread state: each thread running a kernel
// loads it, and releases the tiles with _tile_release when done).
inline void load_tiles_16x64() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

}  // namespace
}  // namespace tern::kernels
