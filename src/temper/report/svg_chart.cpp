#include "temper/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>

#include "temper/report/html_report.h"

namespace temper::report {

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) return {lo};
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double step = (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
  std::vector<double> t;
  const double k0 = std::ceil(lo / step - 1e-9);
  for (int i = 0; i <= 100; ++i) {
    const double v = (k0 + i) * step;
    if (v > hi + step * 1e-9) break;
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  }
  return t;
}

std::string fmt(double v, int sig) {
  if (std::isnan(v)) return "null";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[48];
  if (v == std::floor(v) && std::fabs(v) < 1e9)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.*g", sig, v);
  return buf;
}

// Tick labels share a number of decimals fitted to the tick spacing.
std::string fmt_tick(double v, double spacing) {
  char buf[48];
  const double a = std::max(std::fabs(v), spacing);
  if (a >= 1e6 || (spacing > 0 && spacing < 1e-4)) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else {
    int dec = spacing > 0 ? std::max(0, static_cast<int>(-std::floor(std::log10(spacing) + 1e-6))) : 0;
    std::snprintf(buf, sizeof buf, "%.*f", dec, v);
  }
  return buf;
}

std::string num(double v) {  // SVG coordinates
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

namespace {

// Margins around the plot area, in SVG units.
constexpr double kLeft = 64, kRight = 14, kTop = 14, kBottom = 40;

// The chart's size, its plot area (pw x ph) and the data ranges it shows; X and Y map a step and a value onto it.
struct Plot {
  double w, h, pw, ph;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  size_t finite = 0;  // finite values over all series

  explicit Plot(const ChartOptions& opt)
      : w(opt.width), h(opt.height), pw(w - kLeft - kRight), ph(h - kTop - kBottom) {}
  double X(double s) const { return kLeft + (s - xlo) / (xhi - xlo) * pw; }
  double Y(double v) const { return kTop + (1 - (v - ylo) / (yhi - ylo)) * ph; }
};

// Round ticks of both axes and their spacings.
struct Ticks {
  std::vector<double> yt, xt;
  double ysp = 0, xsp = 0;
};

// The steps and the finite values of every series: the data ranges and the count of finite values.
void measure_ranges(const std::vector<ChartSeries>& series, Plot& p) {
  for (const ChartSeries& s : series)
    for (const auto& [step, v] : s.points) {
      p.xlo = std::min(p.xlo, double(step));
      p.xhi = std::max(p.xhi, double(step));
      if (!std::isfinite(v)) continue;
      ++p.finite;
      p.ylo = std::min(p.ylo, v);
      p.yhi = std::max(p.yhi, v);
    }
}

// Ranges: a single step or a constant value still gets a visible span; the y range extends to whole ticks and
// the x ticks are whole steps.
Ticks fit_ticks(Plot& p) {
  if (p.xhi == p.xlo) {
    p.xlo -= 1;
    p.xhi += 1;
  }
  if (p.yhi == p.ylo) {
    const double pad = p.ylo == 0 ? 1 : std::fabs(p.ylo) * 0.1;
    p.ylo -= pad;
    p.yhi += pad;
  }
  Ticks t;
  t.yt = nice_ticks(p.ylo, p.yhi, 5);
  t.ysp = t.yt.size() > 1 ? t.yt[1] - t.yt[0] : (p.yhi - p.ylo);
  if (!t.yt.empty()) {  // extend the range to whole ticks
    p.ylo = std::min(p.ylo, std::floor(p.ylo / t.ysp + 1e-9) * t.ysp);
    p.yhi = std::max(p.yhi, std::ceil(p.yhi / t.ysp - 1e-9) * t.ysp);
    t.yt = nice_ticks(p.ylo, p.yhi, 5);
  }
  t.xt = nice_ticks(p.xlo, p.xhi, 6);
  t.xt.erase(std::remove_if(t.xt.begin(), t.xt.end(), [](double v) { return v != std::floor(v); }), t.xt.end());
  t.xsp = t.xt.size() > 1 ? t.xt[1] - t.xt[0] : 1;
  return t;
}

// Grid, ticks and labels.
void write_axes(std::ostringstream& o, const Plot& p, const Ticks& t, const ChartOptions& opt) {
  const double pw = p.pw, ph = p.ph;
  for (double y : t.yt) {
    o << "<line class=\"grid\" stroke=\"#eef2f7\" x1=\"" << kLeft << "\" x2=\"" << kLeft + pw << "\" y1=\""
      << num(p.Y(y)) << "\" y2=\"" << num(p.Y(y)) << "\"/>";
    o << "<text class=\"tick\" font-size=\"10.5\" fill=\"#475569\" x=\"" << kLeft - 6 << "\" y=\"" << num(p.Y(y) + 4)
      << "\" text-anchor=\"end\">" << fmt_tick(y, t.ysp) << "</text>";
  }
  for (double x : t.xt) {
    o << "<line class=\"axis\" stroke=\"#94a3b8\" x1=\"" << num(p.X(x)) << "\" x2=\"" << num(p.X(x)) << "\" y1=\""
      << kTop + ph << "\" y2=\"" << kTop + ph + 5 << "\"/>";
    o << "<text class=\"tick\" font-size=\"10.5\" fill=\"#475569\" x=\"" << num(p.X(x)) << "\" y=\"" << kTop + ph + 18
      << "\" text-anchor=\"middle\">" << fmt_tick(x, t.xsp) << "</text>";
  }
  o << "<line class=\"axis\" stroke=\"#94a3b8\" x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop
    << "\" y2=\"" << kTop + ph << "\"/>";
  o << "<line class=\"axis\" stroke=\"#94a3b8\" x1=\"" << kLeft << "\" x2=\"" << kLeft + pw << "\" y1=\"" << kTop + ph
    << "\" y2=\"" << kTop + ph << "\"/>";
  o << "<text class=\"label\" font-size=\"11\" fill=\"#334155\" x=\"" << num(kLeft + pw / 2) << "\" y=\"" << p.h - 4
    << "\" text-anchor=\"middle\">" << html_escape(opt.x_label) << "</text>";
  o << "<text class=\"label\" font-size=\"11\" fill=\"#334155\" transform=\"translate(12 " << num(kTop + ph / 2)
    << ") rotate(-90)\" text-anchor=\"middle\">" << html_escape(opt.y_label) << "</text>";
}

// One series: a polyline per run of finite values; markers when there are few points, else on isolated points.
void write_series(std::ostringstream& o, const Plot& p, const ChartSeries& s) {
  const std::string& color = s.color;
  size_t n_finite = 0;
  for (const auto& pt : s.points) n_finite += std::isfinite(pt.second);
  std::string seg;
  size_t seg_n = 0;
  auto end_segment = [&] {
    if (seg_n >= 2)
      o << "<polyline class=\"line\" fill=\"none\" stroke-linejoin=\"round\" stroke-linecap=\"round\" stroke-width=\""
        << s.width << "\" stroke-opacity=\"" << s.opacity << "\" stroke=\"" << color << "\" points=\"" << seg << "\"/>";
    seg.clear();
    seg_n = 0;
  };
  for (const auto& [step, v] : s.points) {
    if (!std::isfinite(v)) {
      end_segment();
      continue;
    }
    if (seg_n) seg += ' ';
    seg += num(p.X(double(step))) + "," + num(p.Y(v));
    ++seg_n;
  }
  end_segment();
  const bool markers = n_finite <= 60;
  for (size_t i = 0; i < s.points.size(); ++i) {
    const auto& [step, v] = s.points[i];
    if (!std::isfinite(v)) continue;
    const bool isolated = (i == 0 || !std::isfinite(s.points[i - 1].second)) &&
                          (i + 1 == s.points.size() || !std::isfinite(s.points[i + 1].second));
    if (!markers && !isolated) continue;
    o << "<circle cx=\"" << num(p.X(double(step))) << "\" cy=\"" << num(p.Y(v)) << "\" r=\"" << (markers ? 2.6 : 2.2)
      << "\" fill=\"" << color << "\"><title>" << html_escape(s.label) << " step " << step << ": " << fmt(v, 6)
      << "</title></circle>";
  }
}

// Legend (top right): one entry per distinct label, in order.
void write_legend(std::ostringstream& o, const Plot& p, const std::vector<ChartSeries>& series) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::set<std::string> seen;
  for (const ChartSeries& s : series)
    if (seen.insert(s.label).second) entries.emplace_back(s.label, s.color);
  size_t longest = 0;
  for (auto& e : entries) longest = std::max(longest, e.first.size());
  const double lw = 18 + 6.2 * static_cast<double>(longest);
  double y = kTop + 12;
  for (auto& [label, color] : entries) {
    o << "<rect x=\"" << num(kLeft + p.pw - lw) << "\" y=\"" << num(y - 8)
      << "\" width=\"10\" height=\"10\" rx=\"2\" fill=\"" << color << "\"/>";
    o << "<text class=\"legend\" font-size=\"11\" fill=\"#334155\" x=\"" << num(kLeft + p.pw - lw + 14) << "\" y=\""
      << num(y + 1) << "\">" << html_escape(label) << "</text>";
    y += 14;
  }
}

}  // namespace

std::string svg_line_chart(const std::vector<ChartSeries>& series, const ChartOptions& opt) {
  Plot p(opt);
  measure_ranges(series, p);
  std::ostringstream o;
  o << "<svg class=\"chart\" viewBox=\"0 0 " << p.w << " " << p.h << "\" width=\"" << p.w << "\" height=\"" << p.h
    << "\" role=\"img\" aria-label=\"" << html_escape(opt.y_label) << " by " << html_escape(opt.x_label)
    << "\" xmlns=\"http://www.w3.org/2000/svg\" font-family=\"system-ui, sans-serif\">";
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << p.pw << "\" height=\"" << p.ph
    << "\" class=\"plot\" fill=\"#fff\"/>";
  if (p.finite == 0) {
    o << "<text x=\"" << num(kLeft + p.pw / 2) << "\" y=\"" << num(kTop + p.ph / 2)
      << "\" class=\"empty\" font-size=\"12\" fill=\"#64748b\" text-anchor=\"middle\">no finite values</text></svg>";
    return o.str();
  }
  const Ticks t = fit_ticks(p);
  write_axes(o, p, t, opt);
  for (const ChartSeries& s : series) write_series(o, p, s);
  if (opt.legend) write_legend(o, p, series);
  o << "</svg>";
  return o.str();
}

}  // namespace temper::report
