#include "runtime/profiler.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

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
  options.on_node = [this](const NodeRun& r) {
    if (origin_us_ < 0) origin_us_ = r.start_us;
    std::vector<const Tensor*> outs;
    for (const Tensor& t : r.outputs) outs.push_back(&t);
    const OpCost c = r.op.cost(r.inputs, r.outputs);
    events_.push_back({r.node.name, r.node.op_type, phase_, type_shapes(r.inputs), type_shapes(outs), r.start_us - origin_us_,
                       r.end_us - r.start_us, c.flops, c.bytes});
  };
}

void Profiler::add_step_time(const std::string& phase, double ms) { steps_.emplace_back(phase, ms); }

std::vector<Profiler::OpTypeRow> Profiler::by_op_type(const std::string& phase) const {
  std::map<std::string, OpTypeRow> rows;
  for (const Event& e : events_) {
    if (e.phase != phase) continue;
    OpTypeRow& r = rows[e.op_type];
    r.op_type = e.op_type;
    ++r.calls;
    r.ms += e.dur_us / 1000.0;
    r.flops += e.flops;
    r.bytes += e.bytes;
  }
  std::vector<OpTypeRow> v;
  for (auto& [k, r] : rows) v.push_back(r);
  std::sort(v.begin(), v.end(), [](const OpTypeRow& a, const OpTypeRow& b) { return a.ms > b.ms; });
  return v;
}

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

void Profiler::write_table(std::ostream& out, double peak_gflops, double bandwidth_gb_s) const {
  std::vector<std::string> phases;
  for (const Event& e : events_)
    if (std::find(phases.begin(), phases.end(), e.phase) == phases.end()) phases.push_back(e.phase);
  char line[256];
  for (const std::string& phase : phases) {
    const double nodes = node_ms(phase), step = step_ms(phase);
    out << phase << ": nodes " << nodes << " ms";
    if (step > 0) out << " of " << step << " ms measured (" << static_cast<int>(100.0 * nodes / step + 0.5) << "% accounted for)";
    out << "\n";
    std::snprintf(line, sizeof line, "  %-26s %6s %10s %9s %6s %9s %9s %9s %9s %9s\n", "op type", "calls", "total ms",
                  "mean ms", "share", "GFLOP", "GB", "GFLOP/s", "GB/s", "roofline");
    out << line;
    for (const OpTypeRow& r : by_op_type(phase)) {
      const double s = r.ms / 1000.0, gflops = s > 0 ? r.flops / s / 1e9 : 0, gbs = s > 0 ? r.bytes / s / 1e9 : 0;
      // The roof at this intensity: compute-bound above peak / bandwidth flop per byte, memory-bound below.
      const double intensity = r.bytes > 0 ? r.flops / r.bytes : 0;
      const double roof = std::min(peak_gflops, intensity * bandwidth_gb_s);
      std::snprintf(line, sizeof line, "  %-26s %6lld %10.2f %9.3f %5.1f%% %9.3f %9.3f %9.1f %9.1f %8.0f%%\n", r.op_type.c_str(),
                    static_cast<long long>(r.calls), r.ms, r.ms / static_cast<double>(r.calls), nodes > 0 ? 100.0 * r.ms / nodes : 0.0,
                    r.flops / 1e9, r.bytes / 1e9, gflops, gbs, roof > 0 ? 100.0 * gflops / roof : 0.0);
      out << line;
    }
  }
}

void Profiler::write_chrome_trace(const std::string& path) const {
  std::ofstream f(path);
  if (!f) fail("cannot write trace '", path, "'");
  f << "[\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    f << "{\"cat\":\"Node\",\"pid\":1,\"tid\":1,\"ph\":\"X\",\"ts\":" << static_cast<int64_t>(e.ts_us)
      << ",\"dur\":" << std::max<int64_t>(static_cast<int64_t>(e.dur_us), 1) << ",\"name\":" << json_string(e.name + "_kernel_time")
      << ",\"args\":{\"op_name\":" << json_string(e.op_type) << ",\"provider\":\"tern-cpu\",\"phase\":" << json_string(e.phase)
      << ",\"input_type_shape\":" << e.inputs << ",\"output_type_shape\":" << e.outputs << ",\"flops\":" << e.flops
      << ",\"bytes\":" << e.bytes << "}}" << (i + 1 < events_.size() ? ",\n" : "\n");
  }
  f << "]\n";
}

}  // namespace tern
