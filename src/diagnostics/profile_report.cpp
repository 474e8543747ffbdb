#include "diagnostics/profile_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"

namespace tern {
namespace {

bool is_attention(const std::string& op) { return op.find("Attention") != std::string::npos; }
bool is_norm(const std::string& op) { return op.find("Norm") != std::string::npos; }

std::string xml(const std::string& v) {
  std::string s;
  for (char c : v) {
    switch (c) {
      case '<': s += "&lt;"; break;
      case '>': s += "&gt;"; break;
      case '&': s += "&amp;"; break;
      case '"': s += "&quot;"; break;
      default: s += c;
    }
  }
  return s;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// One color per op type, the slowest types first, the same in every chart.
class Palette {
 public:
  explicit Palette(const Profiler& p) {
    std::map<std::string, double> ms;
    for (const auto& e : p.events()) ms[e.op_type] += e.dur_us;
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [op, t] : ms) order.emplace_back(-t, op);
    std::sort(order.begin(), order.end());
    for (const auto& [t, op] : order) rank_[op] = static_cast<int>(rank_.size());
  }
  std::string operator()(const std::string& op) const {
    static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                   "#e377c2", "#17becf", "#bcbd22", "#393b79", "#ad494a", "#637939"};
    auto it = rank_.find(op);
    return it != rank_.end() && it->second < 12 ? colors[it->second] : "#999999";
  }
  std::vector<std::string> ops() const {
    std::vector<std::string> v(rank_.size());
    for (const auto& [op, r] : rank_) v[static_cast<size_t>(r)] = op;
    return v;
  }

 private:
  std::map<std::string, int> rank_;
};

std::string legend(const Palette& color, double x, double y, double width) {
  std::ostringstream s;
  double cx = x;
  for (const std::string& op : color.ops()) {
    const double w = 22 + 6.5 * static_cast<double>(op.size());
    if (cx + w > x + width) cx = x, y += 16;
    s << "<rect x='" << cx << "' y='" << y - 9 << "' width='10' height='10' fill='" << color(op) << "'/><text x='" << cx + 14 << "' y='"
      << y << "' font-size='11'>" << xml(op) << "</text>";
    cx += w;
  }
  return s.str();
}

double decade_below(double v) { return std::pow(10.0, std::floor(std::log10(v))); }
double decade_above(double v) { return std::pow(10.0, std::ceil(std::log10(v))); }

}  // namespace

StepLayers split_layers(const std::vector<std::string>& op_types) {
  const int n = static_cast<int>(op_types.size());
  std::vector<int> attention;
  for (int i = 0; i < n; ++i)
    if (is_attention(op_types[static_cast<size_t>(i)])) attention.push_back(i);
  StepLayers s;
  s.layers = static_cast<int>(attention.size());
  if (attention.empty()) {
    s.row.assign(static_cast<size_t>(n), 0);
    return s;
  }
  // Layer k starts at the last norm between attention k-1 and attention k (else right after attention k-1).
  std::vector<int> start(attention.size());
  for (size_t k = 0; k < attention.size(); ++k) {
    const int lo = k ? attention[k - 1] + 1 : 0;
    start[k] = k ? lo : 0;
    for (int i = attention[k] - 1; i >= lo; --i)
      if (is_norm(op_types[static_cast<size_t>(i)])) {
        start[k] = i;
        break;
      }
  }
  // The head starts at the second norm after the last attention (post-attention norm, then the final one).
  int head = n, norms = 0;
  for (int i = attention.back() + 1; i < n; ++i)
    if (is_norm(op_types[static_cast<size_t>(i)]) && ++norms == 2) {
      head = i;
      break;
    }
  s.row.resize(static_cast<size_t>(n));
  size_t k = 0;
  for (int i = 0; i < n; ++i) {
    while (k < start.size() && i >= start[k]) ++k;  // k = layers started so far
    s.row[static_cast<size_t>(i)] = i >= head ? s.layers + 1 : static_cast<int>(k);
  }
  return s;
}

std::string roofline_svg(const Profiler& p, const MachinePeaks& m) {
  const Palette color(p);
  struct Point {
    std::string phase;
    Profiler::Row row;
    double share;
  };
  std::vector<Point> points;
  std::vector<std::string> off_chart;
  double imin = m.gflops / m.gb_s, imax = imin, ymin = m.gflops;
  for (const std::string& phase : p.phases()) {
    const double total = p.node_ms(phase);
    for (const auto& r : p.by_op_type(phase)) {
      if (r.flops <= 0 || r.bytes <= 0 || r.ms <= 0) {
        if (std::find(off_chart.begin(), off_chart.end(), r.name) == off_chart.end()) off_chart.push_back(r.name);
        continue;
      }
      points.push_back({phase, r, total > 0 ? r.ms / total : 0});
      imin = std::min(imin, r.intensity()), imax = std::max(imax, r.intensity());
      ymin = std::min(ymin, r.gflops_per_s());
    }
  }
  const double x0 = decade_below(imin / 2), x1 = decade_above(imax * 2);
  const double y1 = decade_above(m.gflops * 1.5), y0 = std::max(decade_below(ymin / 2), y1 / 1e7);
  const double W = 760, H = 470, L = 70, R = 20, T = 40, B = 60;
  auto X = [&](double v) { return L + (W - L - R) * std::log10(std::max(v, x0) / x0) / std::log10(x1 / x0); };
  auto Y = [&](double v) { return H - B - (H - T - B) * std::log10(std::clamp(v, y0, y1) / y0) / std::log10(y1 / y0); };
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' class='chart' id='roofline' width='" << W << "' height='" << H << "' viewBox='0 0 " << W
    << " " << H << "' font-family='sans-serif'>";
  s << "<rect width='100%' height='100%' fill='white'/>";
  s << "<text x='" << L << "' y='22' font-size='15' font-weight='bold'>Roofline: each op type's achieved GFLOP/s against "
    << "this machine's limits</text>";
  for (double d = x0; d <= x1 * 1.001; d *= 10)  // decades: grid and labels
    s << "<line x1='" << X(d) << "' y1='" << T << "' x2='" << X(d) << "' y2='" << H - B << "' stroke='#ddd'/><text x='" << X(d) << "' y='"
      << H - B + 16 << "' font-size='11' text-anchor='middle'>" << fmt("%g", d) << "</text>";
  for (double d = y0; d <= y1 * 1.001; d *= 10)
    s << "<line x1='" << L << "' y1='" << Y(d) << "' x2='" << W - R << "' y2='" << Y(d) << "' stroke='#ddd'/><text x='" << L - 6 << "' y='"
      << Y(d) + 4 << "' font-size='11' text-anchor='end'>" << fmt("%g", d) << "</text>";
  s << "<rect x='" << L << "' y='" << T << "' width='" << W - L - R << "' height='" << H - T - B << "' fill='none' stroke='#444'/>";
  s << "<text x='" << (L + W - R) / 2 << "' y='" << H - B + 36 << "' font-size='12' text-anchor='middle'>arithmetic intensity "
    << "(flop per byte moved)</text><text transform='translate(16," << (T + H - B) / 2
    << ") rotate(-90)' font-size='12' text-anchor='middle'>achieved GFLOP/s</text>";
  // The roofs: bandwidth × intensity up to the ridge, then the compute peak.
  const double ridge = m.gflops / m.gb_s, xs = std::max(x0, y0 / m.gb_s);
  s << "<polyline class='roof' points='" << X(xs) << "," << Y(xs * m.gb_s) << " " << X(ridge) << "," << Y(m.gflops) << " " << X(x1) << ","
    << Y(m.gflops) << "' fill='none' stroke='#000' stroke-width='2.5'/>";
  s << "<text x='" << X(x1) - 4 << "' y='" << Y(m.gflops) - 6 << "' font-size='11' text-anchor='end'>peak fp32 " << fmt("%.1f", m.gflops)
    << " GFLOP/s</text>";
  s << "<text x='" << X(xs) + 6 << "' y='" << Y(xs * m.gb_s) - 8 << "' font-size='11'>read bandwidth " << fmt("%.1f", m.gb_s)
    << " GB/s</text>";
  for (const Point& pt : points) {
    const double cx = X(pt.row.intensity()), cy = Y(pt.row.gflops_per_s()), r = 4 + 16 * std::sqrt(pt.share);
    const std::string tip = pt.phase + " " + pt.row.name + ": " + fmt("%.2f", pt.row.ms) + " ms (" + fmt("%.1f", 100 * pt.share) + "%), " +
                            fmt("%.1f", pt.row.gflops_per_s()) + " GFLOP/s, " + fmt("%.1f", pt.row.gb_per_s()) + " GB/s, " +
                            fmt("%.2f", pt.row.intensity()) + " flop/B, " + fmt("%.0f", pt.row.roofline_pct(m)) + "% of the roof";
    if (pt.phase == "decode")  // decode a diamond, other phases a circle
      s << "<path class='mark op-point' d='M" << cx << "," << cy - r << " L" << cx + r << "," << cy << " L" << cx << "," << cy + r << " L"
        << cx - r << "," << cy << " Z'";
    else s << "<circle class='mark op-point' cx='" << cx << "' cy='" << cy << "' r='" << r << "'";
    s << " fill='" << color(pt.row.name) << "' fill-opacity='0.75' stroke='#222'><title>" << xml(tip) << "</title>"
      << (pt.phase == "decode" ? "</path>" : "</circle>");
    if (pt.share >= 0.02) {  // labelled on the right, or on the left when that would leave the chart
      const std::string label = pt.row.name + " (" + pt.phase + ", " + fmt("%.0f", pt.row.roofline_pct(m)) + "%)";
      const bool left = cx + r + 3 + 6.5 * static_cast<double>(label.size()) > W - R;
      s << "<text x='" << (left ? cx - r - 3 : cx + r + 3) << "' y='" << cy + 4 << "' font-size='11'" << (left ? " text-anchor='end'" : "")
        << ">" << xml(label) << "</text>";
    }
  }
  s << "<text x='" << L + 8 << "' y='" << T + 16 << "' font-size='11'>&#9679; prefill   &#9670; decode   (area: share of the "
    << "phase's time)</text>";
  if (!off_chart.empty()) {
    std::string names;
    for (const auto& n : off_chart) names += (names.empty() ? "" : ", ") + n;
    s << "<text x='" << L << "' y='" << H - 8
      << "' font-size='10' fill='#555'>no arithmetic, not on the chart: " << xml(names.size() > 110 ? names.substr(0, 107) + "..." : names)
      << "</text>";
  }
  s << "</svg>";
  return s.str();
}

namespace {

std::string time_by_op_svg(const Profiler& p, const Palette& color) {
  const double W = 760, L = 200, R = 150, bar = 16;
  std::ostringstream body;
  double y = 40;
  int marks = 0;
  for (const std::string& phase : p.phases()) {
    const double total = p.node_ms(phase);
    const int64_t runs = std::max<int64_t>(p.runs(phase), 1);
    body << "<text x='10' y='" << y + 4 << "' font-size='13' font-weight='bold'>" << xml(phase) << ": "
         << fmt("%.2f", total / static_cast<double>(runs)) << " ms per run (" << runs << " run(s))</text>";
    y += 16;
    auto rows = p.by_op_type(phase);
    const double top = rows.empty() ? 1 : rows[0].ms;
    for (size_t i = 0; i < rows.size() && i < 12; ++i) {
      const auto& r = rows[i];
      const double w = (W - L - R) * r.ms / top;
      body << "<text x='" << L - 6 << "' y='" << y + bar - 4 << "' font-size='11' text-anchor='end'>" << xml(r.name) << "</text>"
           << "<rect class='mark bar' x='" << L << "' y='" << y << "' width='" << std::max(w, 1.0) << "' height='" << bar - 3 << "' fill='"
           << color(r.name) << "'><title>" << xml(r.name + ": " + fmt("%.3f", r.ms) + " ms") << "</title></rect>"
           << "<text x='" << L + std::max(w, 1.0) + 5 << "' y='" << y + bar - 4 << "' font-size='11'>"
           << fmt("%.1f", total > 0 ? 100 * r.ms / total : 0) << "%  " << fmt("%.2f", r.ms / static_cast<double>(runs)) << " ms/run</text>";
      y += bar;
      ++marks;
    }
    y += 18;
  }
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' class='chart' id='time-by-op' width='" << W << "' height='" << y << "' viewBox='0 0 " << W
    << " " << y << "' font-family='sans-serif'><rect width='100%' height='100%' fill='white'/>"
    << "<text x='10' y='20' font-size='15' font-weight='bold'>Where the time goes: node time by op type</text>" << body.str() << "</svg>";
  return s.str();
}

// One step of a phase (prefill: its run; decode: the median run), its nodes on a time axis, one row per layer.
std::string timeline_svg(const Profiler& p, const std::string& phase, const Palette& color) {
  std::map<int64_t, std::vector<const Profiler::Event*>> by_run;
  for (const auto& e : p.events())
    if (e.phase == phase) by_run[e.run].push_back(&e);
  if (by_run.empty()) return {};
  std::vector<std::pair<double, int64_t>> totals;
  for (const auto& [run, ev] : by_run) {
    double t = 0;
    for (const auto* e : ev) t += e->dur_us;
    totals.emplace_back(t, run);
  }
  std::sort(totals.begin(), totals.end());
  const auto& step = by_run[totals[totals.size() / 2].second];
  std::vector<std::string> ops;
  for (const auto* e : step) ops.push_back(e->op_type);
  const StepLayers layers = split_layers(ops);
  const double start = step.front()->ts_us, end = step.back()->ts_us + step.back()->dur_us, span = std::max(end - start, 1.0);
  const int rows = layers.layers + 2;
  const double W = 960, L = 90, R = 20, T = 50, row_h = 13, H = T + row_h * rows + 70;
  auto X = [&](double us) { return L + (W - L - R) * (us - start) / span; };
  std::vector<double> row_ms(static_cast<size_t>(rows), 0);
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' class='chart' id='timeline-" << xml(phase) << "' width='" << W << "' height='" << H
    << "' viewBox='0 0 " << W << " " << H << "' font-family='sans-serif'><rect width='100%' height='100%' fill='white'/>";
  s << "<text x='10' y='20' font-size='15' font-weight='bold'>" << xml(phase) << " step, per layer: " << fmt("%.2f", span / 1000) << " ms, "
    << step.size() << " nodes" << (layers.layers ? "" : " (no attention: one row)") << "</text>";
  for (int r = 0; r < rows; ++r) {
    const std::string label = r == 0 ? "embedding" : r == rows - 1 ? "head" : "layer " + std::to_string(r - 1);
    if (layers.layers == 0 && r > 0) break;
    if (rows <= 40 || r % 4 == 0 || r == rows - 1)
      s << "<text x='" << L - 6 << "' y='" << T + row_h * r + row_h - 3 << "' font-size='10' text-anchor='end'>"
        << (layers.layers ? label : "graph") << "</text>";
    if (r % 2)
      s << "<rect x='" << L << "' y='" << T + row_h * r << "' width='" << W - L - R << "' height='" << row_h << "' fill='#f3f3f3'/>";
  }
  for (size_t i = 0; i < step.size(); ++i) {
    const auto* e = step[i];
    const int r = layers.row[i];
    row_ms[static_cast<size_t>(r)] += e->dur_us / 1000;
    s << "<rect class='mark node' x='" << X(e->ts_us) << "' y='" << T + row_h * r + 1 << "' width='"
      << std::max(X(e->ts_us + e->dur_us) - X(e->ts_us), 0.6) << "' height='" << row_h - 2 << "' fill='" << color(e->op_type) << "'><title>"
      << xml(e->name + " (" + e->op_type + (e->kernel.empty() ? "" : ", " + e->kernel) + "): " + fmt("%.3f", e->dur_us / 1000) + " ms")
      << "</title></rect>";
  }
  const double axis_y = T + row_h * rows + 14;
  for (int i = 0; i <= 4; ++i)
    s << "<text x='" << L + (W - L - R) * i / 4 << "' y='" << axis_y << "' font-size='10' text-anchor='middle'>"
      << fmt("%.2f", span / 1000 * i / 4) << " ms</text>";
  s << legend(color, L, axis_y + 22, W - L - R) << "</svg>";
  return s.str();
}

std::string summary_table(const Profiler& p, const std::string& phase, const MachinePeaks& m) {
  std::ostringstream s;
  const double nodes = p.node_ms(phase), step = p.step_ms(phase);
  s << "<h3>" << xml(phase) << "</h3><p>" << p.runs(phase) << " run(s); nodes " << fmt("%.2f", nodes) << " ms";
  if (step > 0) s << " of " << fmt("%.2f", step) << " ms measured (" << fmt("%.0f", 100 * nodes / step) << "% accounted for)";
  s << "</p><table><tr><th>op type</th><th>calls</th><th>total ms</th><th>share</th><th>GFLOP/s</th><th>GB/s</th>"
    << "<th>flop/B</th><th>roofline</th></tr>";
  for (const auto& r : p.by_op_type(phase))
    s << "<tr><td>" << xml(r.name) << "</td><td>" << r.calls << "</td><td>" << fmt("%.2f", r.ms) << "</td><td>"
      << fmt("%.1f%%", nodes > 0 ? 100 * r.ms / nodes : 0) << "</td><td>" << fmt("%.1f", r.gflops_per_s()) << "</td><td>"
      << fmt("%.1f", r.gb_per_s()) << "</td><td>" << fmt("%.2f", r.intensity()) << "</td><td>" << fmt("%.0f%%", r.roofline_pct(m))
      << "</td></tr>";
  return s.str() + "</table>";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  if (!f) fail("cannot write '", path, "'");
  f << text;
}

}  // namespace

void write_roofline_svg(const Profiler& p, const MachinePeaks& m, const std::string& path) {
  write_file(path, "<?xml version='1.0' encoding='UTF-8'?>\n" + roofline_svg(p, m) + "\n");
}

void write_html_report(const Profiler& p, const MachinePeaks& m, const std::string& title, const std::string& path) {
  const Palette color(p);
  std::ostringstream s;
  s << "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>tern profile: " << xml(title) << "</title><style>"
    << "body{font-family:sans-serif;margin:24px;max-width:1000px} table{border-collapse:collapse;font-size:13px}"
    << "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right} td:first-child,th:first-child{text-align:left}"
    << "svg.chart{display:block;margin:18px 0;border:1px solid #ddd}</style></head><body>\n";
  s << "<h1>tern profile</h1><p>" << xml(title) << "</p><p>Machine: " << fmt("%.1f", m.gflops) << " GFLOP/s peak fp32, "
    << fmt("%.1f", m.gb_s) << " GB/s read bandwidth with " << p.threads() << " thread(s) (" << xml(m.source) << ").</p>\n";
  s << roofline_svg(p, m) << "\n" << time_by_op_svg(p, color) << "\n";
  for (const std::string& phase : p.phases()) s << timeline_svg(p, phase, color) << "\n";
  for (const std::string& phase : p.phases()) s << summary_table(p, phase, m) << "\n";
  s << "<p>Profiler overhead: " << fmt("%.2f", p.hook_ms()) << " ms in its hook for " << p.events().size() << " node runs.</p>\n";
  // What the browser drew, for tests that load this page headless: each chart's size and mark count (hidden:
  // not for the reader).
  s << "<p id='render-check' hidden></p><script>document.getElementById('render-check').textContent = "
    << "Array.from(document.querySelectorAll('svg.chart')).map(c => { const b = c.getBoundingClientRect(); "
    << "return c.id + ':' + Math.round(b.width) + 'x' + Math.round(b.height) + ':' + c.querySelectorAll('.mark').length; "
    << "}).join(' ');</script>\n</body></html>\n";
  write_file(path, s.str());
}

}  // namespace tern
