// What the machine allows, measured: the ceiling `tern bench` compares achieved speeds with.
#pragma once
#include <string>

namespace tern {

// Sustained read bandwidth in GB/s with `threads` threads: the best of several passes summing a buffer
// far larger than the caches (512 MiB), each thread over its own contiguous half, SIMD loads.
double measure_read_bandwidth(int threads);

// Peak fp32 arithmetic in GFLOP/s with `threads` threads: independent SIMD FMA chains on registers of the
// active ISA tier's width (kernels/cpu/peak.h; a multiply-add counts 2), the best of several passes.
double measure_peak_gflops(int threads);

// The roofline's two ceilings with `threads` threads: measured once and cached in
// $XDG_CACHE_HOME/tern/machine.json (else ~/.cache/tern/machine.json), keyed by CPU model, ISA tier and
// thread count, so profiles compare against the same roofs; `remeasure` (tern bench --machine) measures again.
struct MachinePeaks {
  double gflops = 0;   // peak fp32
  double gb_s = 0;     // read bandwidth
  std::string source;  // "measured now" or "cached in PATH (measured DATE)"
};
MachinePeaks machine_peaks(int threads, bool remeasure = false);

// Peak resident memory of this process so far (since the last reset_peak_rss), in bytes.
long peak_rss_bytes();
// Starts the peak over from what is resident now (Linux: /proc/self/clear_refs), so a measurement's own
// buffers (the bandwidth probe's 512 MB) do not count as the model's; does nothing where unsupported.
void reset_peak_rss();
// Resident memory now (Linux /proc/self/status): anonymous pages and file pages (mapped weights, code).
struct ResidentMemory {
  long anon = 0, file = 0;
};
ResidentMemory resident_memory();

}  // namespace tern
