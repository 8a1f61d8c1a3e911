// Line charts as self-contained SVG (inline styles: the file renders alone, in a page or in a doc):
// numeric axes with round ticks, a polyline per series (non-finite values break the line, isolated
// points get a marker, markers on every point when a series has few), <title> tooltips, a legend.
// Also the number formatting the reports share. Leaves out: log axes, smoothing, interactivity.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace temper::report {

struct ChartSeries {
  std::string label;  // legend and tooltips
  std::string color;  // any SVG colour
  std::vector<std::pair<int64_t, double>> points;  // (step, value) sorted by step; NaN: a gap
  double width = 1.8;
  double opacity = 1.0;
};

struct ChartOptions {
  std::string y_label, x_label = "step";
  bool legend = true;
  double width = 446, height = 250;
};

std::string svg_line_chart(const std::vector<ChartSeries>& series, const ChartOptions& o);

// Axis ticks: about `target` round numbers (1, 2, 5 x 10^k) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
std::string fmt(double v, int sig = 4);            // "null" for NaN, integers without decimals
std::string fmt_tick(double v, double spacing);    // decimals fitted to the tick spacing
std::string num(double v);                         // SVG coordinates

}  // namespace temper::report
