// Per-node profile of a session's runs: every node's time (SessionOptions::on_node) and cost (Op::cost),
// grouped by phase (the caller says when prefill ends and decode starts) and by op type, against this
// machine's roofline — achieved GFLOP/s and GB/s, arithmetic intensity, and the share of what
// min(peak GFLOP/s, intensity × bandwidth) allows. Chrome traces carry ONNX Runtime's profiler fields
// (cat, name, ph, ts, dur, args.op_name, args.input_type_shape, …) so scripts for ORT profiles read them.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace tern {

class Profiler {
 public:
  // Installs the per-node hook (replacing any other).
  void attach(SessionOptions& options);
  // Nodes that run from now on belong to `phase` ("prefill", "decode").
  void set_phase(const std::string& phase) { phase_ = phase; }
  void clear() { events_.clear(), steps_.clear(), origin_us_ = -1; }
  // Wall time of the runs of a phase, measured by the caller, that the node times should account for.
  void add_step_time(const std::string& phase, double ms);

  struct OpTypeRow {
    std::string op_type;
    int64_t calls = 0;
    double ms = 0, flops = 0, bytes = 0;
  };
  std::vector<OpTypeRow> by_op_type(const std::string& phase) const;  // slowest first
  double node_ms(const std::string& phase) const;
  double step_ms(const std::string& phase) const;

  // The per-op-type table of each phase, with roofline shares for these machine peaks.
  void write_table(std::ostream& out, double peak_gflops, double bandwidth_gb_s) const;
  void write_chrome_trace(const std::string& path) const;

 private:
  struct Event {
    std::string name, op_type, phase, inputs, outputs;  // inputs/outputs: ORT's [{"float":[dims]}] JSON
    double ts_us, dur_us, flops, bytes;
  };
  std::vector<Event> events_;
  std::vector<std::pair<std::string, double>> steps_;
  std::string phase_ = "run";
  double origin_us_ = -1;
};

}  // namespace tern
