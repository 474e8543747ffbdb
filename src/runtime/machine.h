// What the machine allows, measured: the ceiling `tern bench` compares achieved speeds with.
#pragma once

namespace tern {

// Sustained read bandwidth in GB/s with `threads` threads: the best of several passes summing a buffer
// far larger than the caches (512 MiB), each thread over its own contiguous half, SIMD loads.
double measure_read_bandwidth(int threads);

// Peak fp32 arithmetic in GFLOP/s with `threads` threads: independent SIMD FMA chains on registers
// (a multiply-add counts 2), the best of several passes.
double measure_peak_gflops(int threads);

// Peak resident memory of this process so far, in bytes.
long peak_rss_bytes();

}  // namespace tern
