// Per-node profile of a session's runs: every node's time (SessionOptions::on_node), cost (op_cost) and
// kernel (op_kernel; "opencl" for nodes that ran on the OpenCL device), grouped by phase (the caller says when prefill ends and decode
// starts), by op type and by node, against this machine's roofline — achieved GFLOP/s and GB/s, arithmetic intensity, and the share of what
// min(peak GFLOP/s, intensity × bandwidth) allows. Chrome traces carry ONNX Runtime's profiler fields (cat, name, ph, ts, dur,
// args.op_name, args.input_type_shape, …) so scripts for ORT profiles read them; profile_report.h draws the same data.
#pragma once
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/machine.h"
#include "runtime/session.h"

namespace tern {

// What the hardware allows at an arithmetic intensity (flop per byte): compute-bound above
// peak / bandwidth, memory-bound below.
inline double roofline_bound(const MachinePeaks& m, double intensity) {
  return intensity * m.gb_s < m.gflops ? intensity * m.gb_s : m.gflops;
}

class Profiler {
 public:
  struct Event {
    std::string name, op_type, kernel, phase;
    bool on_device;               // ran on an OpenCL device (outputs in device memory)
    std::string inputs, outputs;  // ONNX Runtime's [{"float":[dims]}, …] JSON
    int64_t run;                  // Session::run index: events of one step share it
    double ts_us, dur_us;         // from the first recorded node
    double flops, bytes;
  };
  // A group of events (an op type, or one node over all its calls) and what it achieved.
  struct Row {
    std::string name, op_type, kernel;  // by op type: name = op type
    int64_t calls = 0;
    double ms = 0, flops = 0, bytes = 0;
    double gflops_per_s() const { return ms > 0 ? flops / ms / 1e6 : 0; }
    double gb_per_s() const { return ms > 0 ? bytes / ms / 1e6 : 0; }
    double intensity() const { return bytes > 0 ? flops / bytes : 0; }
    // Achieved / the roof at this intensity, in %.
    double roofline_pct(const MachinePeaks& m) const {
      const double roof = roofline_bound(m, intensity());
      return roof > 0 ? 100.0 * gflops_per_s() / roof : 0;
    }
  };

  // Installs the per-node hook (replacing any other). Concurrent runs may record; the readers below and
  // set_phase/clear are for between runs.
  void attach(SessionOptions& options);
  // Nodes that run from now on belong to `phase` ("prefill", "decode", "run"); "" records nothing.
  void set_phase(const std::string& phase) { phase_ = phase; }
  void clear() { events_.clear(), steps_.clear(), origin_us_ = -1, hook_us_ = 0; }
  // Wall time of the runs of a phase, measured by the caller, that the node times should account for.
  void add_step_time(const std::string& phase, double ms) { steps_.emplace_back(phase, ms); }

  const std::vector<Event>& events() const { return events_; }
  std::vector<std::string> phases() const;                      // in the order they first ran
  std::vector<Row> by_op_type(const std::string& phase) const;  // slowest first
  std::vector<Row> by_node(const std::string& phase) const;     // slowest first
  double node_ms(const std::string& phase) const;
  double step_ms(const std::string& phase) const;
  int64_t runs(const std::string& phase) const;  // session runs (steps) recorded in the phase
  // Time the profiler's own hook took (cost estimates, shape strings), and the events it recorded.
  double hook_ms() const { return hook_us_ / 1000.0; }
  int threads() const { return threads_; }

  // Per phase: the op-type table, then the `top_nodes` slowest nodes, then the profiler's overhead.
  void write_table(std::ostream& out, const MachinePeaks& machine, int top_nodes = 10) const;
  void write_chrome_trace(const std::string& path) const;

 private:
  std::vector<Row> group(const std::string& phase, bool by_node) const;
  std::mutex mutex_;  // the hook's, against the hook on another run's thread
  std::vector<Event> events_;
  std::vector<std::pair<std::string, double>> steps_;
  std::string phase_ = "run";
  double origin_us_ = -1, hook_us_ = 0;
  int threads_ = 1;
};

}  // namespace tern
