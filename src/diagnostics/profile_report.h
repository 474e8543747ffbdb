// Pictures of a profile, so the bottleneck shows without reading numbers: a roofline chart (each op type
// of each phase a point, intensity against achieved GFLOP/s under the machine's roofs), time by op type,
// and a per-layer timeline of one step per phase. Plain SVG inside one HTML file: no script or network
// needed to view it (a few lines of script only report what rendered, for the headless-browser test).
#pragma once
#include <string>
#include <vector>

#include "runtime/profiler.h"

namespace tern {

// The rows of a step's timeline, from its nodes' op types in execution order: row 0 the nodes before the
// first layer (embedding), rows 1..layers the decoder layers, row layers + 1 what follows the last
// (final norm, LM head). Node names rarely carry layer numbers (torch exports: "/Add_12"), so layers
// are found from the structure every pre-norm decoder shares: one attention per layer, and a layer
// starting at the norm right before its attention; the last layer ends before the second norm after
// its attention (the final norm). No attention: one row, layers = 0.
struct StepLayers {
  std::vector<int> row;  // per node
  int layers = 0;
};
StepLayers split_layers(const std::vector<std::string>& op_types);

// The roofline chart alone (`tern profile --svg`).
std::string roofline_svg(const Profiler& profile, const MachinePeaks& machine);
void write_roofline_svg(const Profiler& profile, const MachinePeaks& machine, const std::string& path);
// The report: summary tables, roofline, time by op type, per-layer timelines (`tern profile --html`).
void write_html_report(const Profiler& profile, const MachinePeaks& machine, const std::string& title, const std::string& path);

}  // namespace tern
