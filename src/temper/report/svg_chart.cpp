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

std::string svg_line_chart(const std::vector<ChartSeries>& series, const ChartOptions& opt) {
  const double kW = opt.width, kH = opt.height, kLeft = 64, kRight = 14, kTop = 14, kBottom = 40;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  size_t finite = 0;
  for (const ChartSeries& s : series)
    for (const auto& [step, v] : s.points) {
      xlo = std::min(xlo, double(step));
      xhi = std::max(xhi, double(step));
      if (!std::isfinite(v)) continue;
      ++finite;
      ylo = std::min(ylo, v);
      yhi = std::max(yhi, v);
    }
  std::ostringstream o;
  o << "<svg class=\"chart\" viewBox=\"0 0 " << kW << " " << kH << "\" width=\"" << kW << "\" height=\"" << kH
    << "\" role=\"img\" aria-label=\"" << html_escape(opt.y_label) << " by " << html_escape(opt.x_label)
    << "\" xmlns=\"http://www.w3.org/2000/svg\" font-family=\"system-ui, sans-serif\">";
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" class=\"plot\" fill=\"#fff\"/>";
  if (finite == 0) {
    o << "<text x=\"" << num(kLeft + pw / 2) << "\" y=\"" << num(kTop + ph / 2)
      << "\" class=\"empty\" font-size=\"12\" fill=\"#64748b\" text-anchor=\"middle\">no finite values</text></svg>";
    return o.str();
  }
  // Ranges: a single step or a constant value still gets a visible span.
  if (xhi == xlo) {
    xlo -= 1;
    xhi += 1;
  }
  if (yhi == ylo) {
    const double pad = ylo == 0 ? 1 : std::fabs(ylo) * 0.1;
    ylo -= pad;
    yhi += pad;
  }
  std::vector<double> yt = nice_ticks(ylo, yhi, 5);
  const double ysp = yt.size() > 1 ? yt[1] - yt[0] : (yhi - ylo);
  if (!yt.empty()) {  // extend the range to whole ticks
    ylo = std::min(ylo, std::floor(ylo / ysp + 1e-9) * ysp);
    yhi = std::max(yhi, std::ceil(yhi / ysp - 1e-9) * ysp);
    yt = nice_ticks(ylo, yhi, 5);
  }
  std::vector<double> xt = nice_ticks(xlo, xhi, 6);
  xt.erase(std::remove_if(xt.begin(), xt.end(), [](double v) { return v != std::floor(v); }), xt.end());
  const double xsp = xt.size() > 1 ? xt[1] - xt[0] : 1;
  auto X = [&](double s) { return kLeft + (s - xlo) / (xhi - xlo) * pw; };
  auto Y = [&](double v) { return kTop + (1 - (v - ylo) / (yhi - ylo)) * ph; };

  // Grid, ticks and labels.
  for (double t : yt) {
    o << "<line class=\"grid\" stroke=\"#eef2f7\" x1=\"" << kLeft << "\" x2=\"" << kLeft + pw << "\" y1=\"" << num(Y(t)) << "\" y2=\""
      << num(Y(t)) << "\"/>";
    o << "<text class=\"tick\" font-size=\"10.5\" fill=\"#475569\" x=\"" << kLeft - 6 << "\" y=\"" << num(Y(t) + 4) << "\" text-anchor=\"end\">"
      << fmt_tick(t, ysp) << "</text>";
  }
  for (double t : xt) {
    o << "<line class=\"axis\" stroke=\"#94a3b8\" x1=\"" << num(X(t)) << "\" x2=\"" << num(X(t)) << "\" y1=\"" << kTop + ph << "\" y2=\""
      << kTop + ph + 5 << "\"/>";
    o << "<text class=\"tick\" font-size=\"10.5\" fill=\"#475569\" x=\"" << num(X(t)) << "\" y=\"" << kTop + ph + 18 << "\" text-anchor=\"middle\">"
      << fmt_tick(t, xsp) << "</text>";
  }
  o << "<line class=\"axis\" stroke=\"#94a3b8\" x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop << "\" y2=\"" << kTop + ph
    << "\"/>";
  o << "<line class=\"axis\" stroke=\"#94a3b8\" x1=\"" << kLeft << "\" x2=\"" << kLeft + pw << "\" y1=\"" << kTop + ph << "\" y2=\""
    << kTop + ph << "\"/>";
  o << "<text class=\"label\" font-size=\"11\" fill=\"#334155\" x=\"" << num(kLeft + pw / 2) << "\" y=\"" << kH - 4
    << "\" text-anchor=\"middle\">" << html_escape(opt.x_label) << "</text>";
  o << "<text class=\"label\" font-size=\"11\" fill=\"#334155\" transform=\"translate(12 " << num(kTop + ph / 2)
    << ") rotate(-90)\" text-anchor=\"middle\">" << html_escape(opt.y_label) << "</text>";

  // Series: a polyline per run of finite values; markers when there are few points.
  for (const ChartSeries& s : series) {
    const std::string& color = s.color;
    size_t n_finite = 0;
    for (const auto& p : s.points) n_finite += std::isfinite(p.second);
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
      seg += num(X(double(step))) + "," + num(Y(v));
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
      o << "<circle cx=\"" << num(X(double(step))) << "\" cy=\"" << num(Y(v)) << "\" r=\"" << (markers ? 2.6 : 2.2)
        << "\" fill=\"" << color << "\"><title>" << html_escape(s.label) << " step " << step << ": " << fmt(v, 6)
        << "</title></circle>";
    }
  }
  // Legend (top right): one entry per distinct label, in order.
  if (opt.legend) {
    std::vector<std::pair<std::string, std::string>> entries;
    std::set<std::string> seen;
    for (const ChartSeries& s : series)
      if (seen.insert(s.label).second) entries.emplace_back(s.label, s.color);
    size_t longest = 0;
    for (auto& e : entries) longest = std::max(longest, e.first.size());
    const double lw = 18 + 6.2 * static_cast<double>(longest);
    double y = kTop + 12;
    for (auto& [label, color] : entries) {
      o << "<rect x=\"" << num(kLeft + pw - lw) << "\" y=\"" << num(y - 8) << "\" width=\"10\" height=\"10\" rx=\"2\" fill=\""
        << color << "\"/>";
      o << "<text class=\"legend\" font-size=\"11\" fill=\"#334155\" x=\"" << num(kLeft + pw - lw + 14) << "\" y=\"" << num(y + 1)
        << "\">" << html_escape(label) << "</text>";
      y += 14;
    }
  }
  o << "</svg>";
  return o.str();
}

}  // namespace temper::report
