#include "tools/cli/cli.h"

#include <sstream>
#include <thread>

#include "diagnostics/op_bench.h"

namespace tern::cli {

int bench_op(int argc, char** argv) {
  Flags f = parse(argc, argv, *find_command("bench-op"));
  OpBenchSpec spec;
  spec.op = f.get("op");
  std::stringstream dims(f.get("shape"));
  for (std::string d; std::getline(dims, d, ',');) spec.shape.push_back(to_int(d, "--shape"));
  const std::string dtype = f.get("dtype");
  if (dtype != "fp32" && dtype != "fp16") fail("--dtype takes fp32 or fp16, got '", dtype, "'");
  spec.dtype = dtype == "fp16" ? DType::Float16 : DType::Float32;
  spec.kv_dtype = llm::parse_kv_dtype(f.get("kv-dtype"));
  spec.weights = parse_weight_format(f.get("weights"));
  spec.activations = parse_activation_format(f.get("activations"));
  spec.bits = f.integer("bits", 2);
  spec.block = f.integer("block", 16);
  spec.threads = f.has("threads") ? static_cast<int>(f.integer("threads", 1)) : static_cast<int>(std::thread::hardware_concurrency());
  spec.device = parse_device(f.get("device"));
  const MachinePeaks machine = machine_peaks(spec.threads);
  const OpBenchResult r = bench_op(spec);
  Profiler::Row row;  // the achieved rates and roofline share, as the profile computes them
  row.ms = r.median_ms, row.flops = r.flops, row.bytes = r.bytes;
  std::printf("%s\nkernel   %s, %s, %lld runs\ntime     median %.4f ms, best %.4f ms\n", r.graph.c_str(),
              r.on_device        ? "OpenCL"
              : r.kernel.empty() ? "(the op's own loop)"
                                 : r.kernel.c_str(),
              r.on_device ? f.get("device").c_str() : (std::to_string(spec.threads) + " thread(s)").c_str(), static_cast<long long>(r.runs),
              r.median_ms, r.min_ms);
  std::printf(
      "work     %.4f GFLOP, %.4f GB moved, %.2f flop/byte\nachieved %.1f GFLOP/s, %.1f GB/s = %.0f%% of the roofline "
      "(%.1f GFLOP/s peak, %.1f GB/s; %s)\n",
      r.flops / 1e9, r.bytes / 1e9, row.intensity(), row.gflops_per_s(), row.gb_per_s(), row.roofline_pct(machine), machine.gflops,
      machine.gb_s, machine.source.c_str());
  return 0;
}

}  // namespace tern::cli
