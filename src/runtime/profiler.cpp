#include "runtime/profiler.h"

#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

namespace tern {
namespace {

// ONNX Runtime's way of listing tensors in a profile event: [{"float":[1,128,576]}, …].
std::string type_shapes(const std::vector<const Tensor*>& tensors) {
  std::string s = "[";
  for (const Tensor* t : tensors) {
    if (!t) continue;
    if (s.size() > 1) s += ",";
    // ONNX Runtime's type names: "float", "double", else the usual ones (int64, float16, …)
    const char* type = t->dtype() == DType::Float32 ? "float" : t->dtype() == DType::Float64 ? "double" : dtype_name(t->dtype());
    s += std::string("{\"") + type + "\":[";
    for (int64_t i = 0; i < t->rank(); ++i) {
      if (i) s += ",";
      s += std::to_string(t->dim(i));
    }
    s += "]}";
  }
  return s + "]";
}

std::string json_string(const std::string& v) {
  std::string s = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') s += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) s += c;
  }
  return s + "\"";
}

}  // namespace

void Profiler::attach(SessionOptions& options) {
  threads_ = options.threads > 0 ? options.threads : kernels::hardware_threads();
  options.on_node = [this](const NodeRun& r) {
    if (phase_.empty()) return;
    const double entered = node_clock_us();
    std::vector<const Tensor*> outs;
    for (const Tensor& t : r.outputs) outs.push_back(&t);
    const OpCost c = op_cost(r.op, r.inputs, r.outputs, r.state);
    const bool on_device = r.on_device;
    std::lock_guard<std::mutex> lock(mutex_);  // concurrent runs record into one profile
    if (origin_us_ < 0) origin_us_ = r.start_us;
    events_.push_back({r.node.name, r.node.op_type, on_device ? "opencl" : op_kernel(r.op, r.inputs, r.cpu.isa), phase_, on_device,
                       type_shapes(r.inputs), type_shapes(outs), r.run_index, r.start_us - origin_us_, r.end_us - r.start_us, c.flops,
                       c.bytes});
    hook_us_ += node_clock_us() - entered;
  };
}

std::vector<std::string> Profiler::phases() const {
  std::vector<std::string> v;
  for (const Event& e : events_)
    if (std::find(v.begin(), v.end(), e.phase) == v.end()) v.push_back(e.phase);
  return v;
}

std::vector<Profiler::Row> Profiler::group(const std::string& phase, bool by_node) const {
  std::map<std::string, Row> rows;
  for (const Event& e : events_) {
    if (e.phase != phase) continue;
    Row& r = rows[by_node ? e.name : e.op_type];
    r.name = by_node ? e.name : e.op_type;
    r.op_type = e.op_type;
    if (by_node && r.kernel.find(e.kernel) == std::string::npos)  // a node may switch kernels (chunk vs token)
      r.kernel += (r.kernel.empty() ? "" : ", ") + e.kernel;
    ++r.calls;
    r.ms += e.dur_us / 1000.0;
    r.flops += e.flops;
    r.bytes += e.bytes;
  }
  std::vector<Row> v;
  for (auto& [k, r] : rows) v.push_back(r);
  std::sort(v.begin(), v.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  return v;
}

std::vector<Profiler::Row> Profiler::by_op_type(const std::string& phase) const { return group(phase, false); }
std::vector<Profiler::Row> Profiler::by_node(const std::string& phase) const { return group(phase, true); }

double Profiler::node_ms(const std::string& phase) const {
  double ms = 0;
  for (const Event& e : events_)
    if (e.phase == phase) ms += e.dur_us / 1000.0;
  return ms;
}

double Profiler::step_ms(const std::string& phase) const {
  double ms = 0;
  for (const auto& [p, t] : steps_)
    if (p == phase) ms += t;
  return ms;
}

int64_t Profiler::runs(const std::string& phase) const {
  std::set<int64_t> seen;
  for (const Event& e : events_)
    if (e.phase == phase) seen.insert(e.run);
  return static_cast<int64_t>(seen.size());
}

void Profiler::write_table(std::ostream& out, const MachinePeaks& machine, int top_nodes) const {
  char line[512];
  double measured = 0;
  for (const std::string& phase : phases()) {
    const double nodes = node_ms(phase), step = step_ms(phase);
    measured += step > 0 ? step : nodes;
    out << "\n" << phase << " (" << runs(phase) << " run(s)): nodes " << nodes << " ms";
    if (step > 0) out << " of " << step << " ms measured (" << static_cast<int>(100.0 * nodes / step + 0.5) << "% accounted for)";
    out << "\n";
    std::snprintf(line, sizeof line, "  %-26s %6s %10s %9s %6s %9s %9s %7s %9s %9s %9s\n", "op type", "calls", "total ms", "mean ms",
                  "share", "GFLOP", "GB", "flop/B", "GFLOP/s", "GB/s", "roofline");
    out << line;
    for (const Row& r : by_op_type(phase)) {
      std::snprintf(line, sizeof line, "  %-26s %6lld %10.2f %9.3f %5.1f%% %9.3f %9.3f %7.2f %9.1f %9.1f %8.0f%%\n", r.name.c_str(),
                    static_cast<long long>(r.calls), r.ms, r.ms / static_cast<double>(r.calls), nodes > 0 ? 100.0 * r.ms / nodes : 0.0,
                    r.flops / 1e9, r.bytes / 1e9, r.intensity(), r.gflops_per_s(), r.gb_per_s(), r.roofline_pct(machine));
      out << line;
    }
    const auto node_rows = by_node(phase);
    if (top_nodes <= 0 || node_rows.empty()) continue;
    out << "  slowest nodes:\n";
    std::snprintf(line, sizeof line, "  %-40s %-18s %-29s %6s %10s %6s %9s %9s %9s\n", "node", "op type", "kernel", "calls", "total ms",
                  "share", "GFLOP/s", "GB/s", "roofline");
    out << line;
    for (size_t i = 0; i < node_rows.size() && i < static_cast<size_t>(top_nodes); ++i) {
      const Row& r = node_rows[i];
      std::snprintf(line, sizeof line, "  %-40.40s %-18.18s %-29.29s %6lld %10.2f %5.1f%% %9.1f %9.1f %8.0f%%\n", r.name.c_str(),
                    r.op_type.c_str(), r.kernel.empty() ? "-" : r.kernel.c_str(), static_cast<long long>(r.calls), r.ms,
                    nodes > 0 ? 100.0 * r.ms / nodes : 0.0, r.gflops_per_s(), r.gb_per_s(), r.roofline_pct(machine));
      out << line;
    }
  }
  std::snprintf(line, sizeof line, "\nprofiler overhead: %.2f ms in its hook for %zu node runs (%.2f%% of the measured time)\n", hook_ms(),
                events_.size(), measured > 0 ? 100.0 * hook_ms() / measured : 0.0);
  out << line;
}

void Profiler::write_chrome_trace(const std::string& path) const {
  std::ofstream f(path);
  if (!f) fail("cannot write trace '", path, "'");
  f << "[\n";
  // One "model_run" span per session run (ONNX Runtime's Session event), then the nodes.
  std::map<int64_t, std::pair<double, double>> spans;
  std::map<int64_t, std::string> span_phase;
  for (const Event& e : events_) {
    auto [it, fresh] = spans.try_emplace(e.run, e.ts_us, e.ts_us + e.dur_us);
    it->second.first = std::min(it->second.first, e.ts_us);
    it->second.second = std::max(it->second.second, e.ts_us + e.dur_us);
    span_phase[e.run] = e.phase;
  }
  for (const auto& [run, span] : spans)
    f << "{\"cat\":\"Session\",\"pid\":1,\"tid\":1,\"ph\":\"X\",\"ts\":" << static_cast<int64_t>(span.first)
      << ",\"dur\":" << std::max<int64_t>(static_cast<int64_t>(span.second - span.first), 1)
      << ",\"name\":\"model_run\",\"args\":{\"phase\":" << json_string(span_phase[run]) << ",\"run\":" << run << "}},\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    f << "{\"cat\":\"Node\",\"pid\":1,\"tid\":1,\"ph\":\"X\",\"ts\":" << static_cast<int64_t>(e.ts_us)
      << ",\"dur\":" << std::max<int64_t>(static_cast<int64_t>(e.dur_us), 1) << ",\"name\":" << json_string(e.name + "_kernel_time")
      << ",\"args\":{\"op_name\":" << json_string(e.op_type) << ",\"provider\":" << (e.on_device ? "\"tern-opencl\"" : "\"tern-cpu\"")
      << ",\"kernel\":" << json_string(e.kernel) << ",\"thread_count\":" << threads_ << ",\"phase\":" << json_string(e.phase)
      << ",\"run\":" << e.run << ",\"input_type_shape\":" << e.inputs << ",\"output_type_shape\":" << e.outputs << ",\"flops\":" << e.flops
      << ",\"bytes\":" << e.bytes << "}}" << (i + 1 < events_.size() ? ",\n" : "\n");
  }
  f << "]\n";
}

}  // namespace tern
