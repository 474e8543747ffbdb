// What the machine allows, measured: the ceiling `tern bench` compares achieved speeds with.
#pragma once
#include <string>

namespace tern {

// Sustained read bandwidth in GB/s with `threads` threads: the best of several passes summing a buffer
// far larger than the caches (512 MiB), each thread over its own contiguous half, SIMD loads.
double measure_read_bandwidth(int threads);

// measure_read_bandwidth in a process of its own, forked when this is made — before a model loads, while this
// process is small — so the probe's buffer is never this process's memory: `tern bench`'s peak RSS is its run's
// alone (issue 51: in-process, `/usr/bin/time tern bench` showed ~650 MB for a run that peaks at 150 MB), and the
// probe's own peak is known apart. (/usr/bin/time still counts the largest child: `tern bench --no-probe`.)
class BandwidthProber {
 public:
  explicit BandwidthProber(int threads);  // throws when the process cannot be made
  ~BandwidthProber();
  BandwidthProber(const BandwidthProber&) = delete;
  BandwidthProber& operator=(const BandwidthProber&) = delete;
  double measure();  // GB/s, measured now in the prober
  long finish();     // ends the prober: its peak RSS in bytes

 private:
  int pid_ = -1, socket_ = -1;
  long peak_ = 0;
};

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
