#include "diagnostics/profile_compare.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/error.h"

namespace tern {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Both profiles over the same phases: their common ones, or everything merged into "all".
ProfileTotals merged(const ProfileTotals& p) {
  ProfileTotals m;
  m.path = p.path;
  for (const auto& [phase, ops] : p.ms)
    for (const auto& [op, ms] : ops) m.ms["all"][op] += ms;
  for (const auto& [phase, n] : p.runs) m.runs["all"] += n;
  return m;
}

}  // namespace

ProfileTotals read_profile_trace(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("cannot read profile '", path, "'");
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  const nlohmann::json* events = &j;
  if (j.is_object() && j.contains("traceEvents")) events = &j["traceEvents"];  // Chrome's object form
  if (!events->is_array()) fail("'", path, "' is not a Chrome trace / ONNX Runtime profile (a JSON array of events)");
  ProfileTotals t;
  t.path = path;
  for (const auto& e : *events) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) continue;
    const auto& args = e.contains("args") && e["args"].is_object() ? e["args"] : nlohmann::json::object();
    const std::string phase = args.contains("phase") && args["phase"].is_string() ? args["phase"].get<std::string>() : "all";
    const std::string name = e["name"].get<std::string>(), cat = e.value("cat", std::string());
    if (cat == "Session" && name == "model_run") ++t.runs[phase];
    if (cat != "Node" || !ends_with(name, "_kernel_time") || !e.contains("dur") || !e["dur"].is_number()) continue;
    const std::string op = args.contains("op_name") && args["op_name"].is_string() ? args["op_name"].get<std::string>() : "?";
    t.ms[phase][op] += e["dur"].get<double>() / 1000.0;
  }
  if (t.ms.empty()) fail("'", path, "' has no node events (\"cat\":\"Node\", \"…_kernel_time\")");
  return t;
}

void compare_profiles(const ProfileTotals& a_in, const ProfileTotals& b_in, std::ostream& out) {
  std::set<std::string> pa, pb;
  for (const auto& [p, ops] : a_in.ms) pa.insert(p);
  for (const auto& [p, ops] : b_in.ms) pb.insert(p);
  const bool same = pa == pb;
  const ProfileTotals a = same ? a_in : merged(a_in), b = same ? b_in : merged(b_in);
  out << "A: " << a.path << "\nB: " << b.path << "\n";
  if (!same) out << "(the two profiles split their runs differently: compared over all phases together)\n";
  char line[256];
  for (const auto& [phase, a_ops] : a.ms) {
    const auto b_it = b.ms.find(phase);
    if (b_it == b.ms.end()) continue;
    const auto& b_ops = b_it->second;
    const int64_t ra = a.runs.count(phase) ? a.runs.at(phase) : 0, rb = b.runs.count(phase) ? b.runs.at(phase) : 0;
    const bool per_run = ra > 0 && rb > 0 && ra != rb;
    out << "\n" << phase << " (A " << ra << " run(s), B " << rb << " run(s)" << (per_run ? "; ms per run" : "; total ms") << "):\n";
    std::snprintf(line, sizeof line, "  %-34s %10s %10s %10s %8s\n", "op type", "A ms", "B ms", "B - A", "B / A");
    out << line;
    std::vector<std::pair<double, std::string>> order;
    std::set<std::string> ops;
    for (const auto& [op, ms] : a_ops) ops.insert(op);
    for (const auto& [op, ms] : b_ops) ops.insert(op);
    double ta = 0, tb = 0;
    auto get = [&](const std::map<std::string, double>& m, const std::string& op, int64_t runs) {
      auto it = m.find(op);
      return it == m.end() ? 0.0 : it->second / static_cast<double>(per_run ? runs : 1);
    };
    for (const auto& op : ops) order.emplace_back(-std::max(get(a_ops, op, ra), get(b_ops, op, rb)), op);
    std::sort(order.begin(), order.end());
    for (const auto& [neg, op] : order) {
      const double x = get(a_ops, op, ra), y = get(b_ops, op, rb);
      ta += x, tb += y;
      char ratio[16] = "-";
      if (x > 0 && y > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", y / x);
      std::snprintf(line, sizeof line, "  %-34.34s %10.3f %10.3f %+10.3f %8s\n", op.c_str(), x, y, y - x, ratio);
      out << line;
    }
    std::snprintf(line, sizeof line, "  %-34s %10.3f %10.3f %+10.3f %7.2fx\n", "all nodes", ta, tb, tb - ta, ta > 0 ? tb / ta : 0.0);
    out << line;
  }
}

}  // namespace tern
