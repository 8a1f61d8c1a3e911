#include "temper/report/compare_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include "temper/core/error.h"
#include "temper/io/atomic_file.h"
#include "temper/report/html_report.h"
#include "temper/report/metrics_sink.h"
#include "temper/report/svg_chart.h"

namespace temper::report {
namespace fs = std::filesystem;

CompareMetric parse_compare_metric(const std::string& spec) {
  CompareMetric m;
  size_t c = spec.find(':');
  if (c == std::string::npos) {
    m.name = spec;
    m.kind = spec.rfind("eval_", 0) == 0 ? "eval" : "train";
  } else {
    m.kind = spec.substr(0, c);
    m.name = spec.substr(c + 1);
  }
  TEMPER_CHECK(!m.kind.empty() && !m.name.empty()) << "metric '" << spec << "': expected KIND:NAME or NAME (e.g. train:entropy)";
  return m;
}

CompareRun parse_compare_run(const std::string& spec) {
  size_t e = spec.find('=');
  TEMPER_CHECK(e != std::string::npos && e > 0 && e + 1 < spec.size())
      << "run '" << spec << "': expected ARM=RUN_DIR (e.g. grpo=runs/exp/grpo-s1)";
  return {spec.substr(0, e), spec.substr(e + 1)};
}

namespace {

const char* kPalette[] = {"#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#db2777"};

std::vector<std::pair<int64_t, double>> series_of(const std::vector<MetricsRow>& rows, const CompareMetric& m) {
  std::vector<std::pair<int64_t, double>> pts;
  for (const MetricsRow& r : rows) {
    if (r.kind != m.kind) continue;
    for (const auto& [k, v] : r.values)
      if (k == m.name) pts.emplace_back(r.step, v);
  }
  std::stable_sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return pts;
}

// Final value: the mean of the finite values over the last `tail` share of points (at least one).
double final_value(const std::vector<std::pair<int64_t, double>>& pts, double tail) {
  if (pts.empty()) return NAN;
  size_t n = std::max<size_t>(1, static_cast<size_t>(std::ceil(tail * static_cast<double>(pts.size()))));
  if (pts.size() <= 20) n = 1;  // sparse series (evaluations): the last one
  double s = 0;
  size_t k = 0;
  for (size_t i = pts.size() - n; i < pts.size(); ++i)
    if (std::isfinite(pts[i].second)) s += pts[i].second, ++k;
  return k ? s / static_cast<double>(k) : NAN;
}

std::vector<std::pair<int64_t, double>> smoothed(const std::vector<std::pair<int64_t, double>>& pts, int64_t w) {
  if (w <= 1 || pts.size() <= 20) return pts;
  std::vector<std::pair<int64_t, double>> out;
  double s = 0;
  int64_t k = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (std::isfinite(pts[i].second)) s += pts[i].second, ++k;
    if (i >= static_cast<size_t>(w) && std::isfinite(pts[i - static_cast<size_t>(w)].second))
      s -= pts[i - static_cast<size_t>(w)].second, --k;
    out.emplace_back(pts[i].first, k ? s / static_cast<double>(k) : NAN);
  }
  return out;
}

std::string file_stem(const CompareMetric& m) {
  std::string s = m.kind + "_" + m.name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  return s;
}

}  // namespace

std::vector<CompareArmSummary> write_compare_report(const std::vector<CompareRun>& runs,
                                                    const std::vector<CompareMetric>& metrics, const CompareOptions& o) {
  TEMPER_CHECK(!runs.empty()) << "compare: no runs";
  TEMPER_CHECK(!metrics.empty()) << "compare: no metrics";
  TEMPER_CHECK(!o.out_dir.empty()) << "compare: no output directory";
  TEMPER_CHECK(o.tail > 0 && o.tail <= 1) << "compare: tail must be in (0, 1], got " << o.tail;
  std::vector<std::vector<MetricsRow>> rows;
  for (const CompareRun& r : runs) rows.push_back(read_metrics_jsonl((fs::path(r.dir) / "metrics.jsonl").string()));
  std::vector<std::string> arms;
  for (const CompareRun& r : runs)
    if (std::find(arms.begin(), arms.end(), r.arm) == arms.end()) arms.push_back(r.arm);
  auto color = [&](const std::string& arm) {
    size_t i = static_cast<size_t>(std::find(arms.begin(), arms.end(), arm) - arms.begin());
    return std::string(kPalette[i % (sizeof kPalette / sizeof kPalette[0])]);
  };
  fs::create_directories(o.out_dir);

  std::vector<CompareArmSummary> summary;
  std::ostringstream charts;
  for (const CompareMetric& m : metrics) {
    std::vector<ChartSeries> series;
    std::map<std::string, CompareArmSummary> per_arm;
    size_t found = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      auto pts = series_of(rows[i], m);
      found += pts.empty() ? 0 : 1;
      CompareArmSummary& a = per_arm[runs[i].arm];
      a.arm = runs[i].arm;
      a.metric = m.kind + ":" + m.name;
      a.finals.push_back(final_value(pts, o.tail));
      series.push_back({runs[i].arm, color(runs[i].arm), smoothed(pts, m.kind == "eval" ? 1 : o.smooth), 1.4, 0.8});
    }
    TEMPER_CHECK(found > 0) << "compare: no run has metric '" << m.name << "' in its " << m.kind << " rows";
    ChartOptions co;
    co.y_label = m.name + (o.smooth > 1 && m.kind != "eval" ? " (mean of " + std::to_string(o.smooth) + ")" : "");
    const std::string svg = svg_line_chart(series, co);
    io::write_text_atomic((fs::path(o.out_dir) / (file_stem(m) + ".svg")).string(), svg + "\n");
    charts << "<figure><figcaption>" << html_escape(m.kind + ": " + m.name) << "</figcaption>" << svg << "</figure>\n";
    for (const std::string& arm : arms) {
      CompareArmSummary a = per_arm[arm];
      double s = 0, s2 = 0, n = 0;
      for (double v : a.finals)
        if (std::isfinite(v)) s += v, s2 += v * v, n += 1;
      a.mean = n ? s / n : NAN;
      a.sd = n > 1 ? std::sqrt(std::max(0.0, (s2 - s * s / n) / (n - 1))) : 0.0;
      summary.push_back(a);
    }
  }

  // summary.md and summary.json
  std::ostringstream md, js;
  md << "| metric | " ;
  for (const std::string& arm : arms) md << arm << " | ";
  md << "\n|---|";
  for (size_t i = 0; i < arms.size(); ++i) md << "---|";
  md << "\n";
  js << "{\"title\": \"" << o.title << "\", \"arms\": [";
  for (size_t i = 0; i < arms.size(); ++i) js << (i ? ", " : "") << "\"" << arms[i] << "\"";
  js << "], \"summary\": [";
  bool first = true;
  for (const CompareMetric& m : metrics) {
    md << "| " << m.kind << ": " << m.name << " | ";
    for (const CompareArmSummary& a : summary) {
      if (a.metric != m.kind + ":" + m.name) continue;
      if (!std::isfinite(a.mean)) {
        md << "n/a | ";  // the arm's runs do not report this metric
      } else {
        md << fmt(a.mean, 4) << " &plusmn; " << fmt(a.sd, 2) << " (";
        for (size_t i = 0; i < a.finals.size(); ++i) md << (i ? ", " : "") << fmt(a.finals[i], 4);
        md << ") | ";
      }
      js << (first ? "" : ", ") << "{\"arm\": \"" << a.arm << "\", \"metric\": \"" << a.metric << "\", \"mean\": " << json_number(a.mean)
         << ", \"sd\": " << json_number(a.sd) << ", \"finals\": [";
      for (size_t i = 0; i < a.finals.size(); ++i) js << (i ? ", " : "") << json_number(a.finals[i]);
      js << "]}";
      first = false;
    }
    md << "\n";
  }
  js << "]}\n";
  io::write_text_atomic((fs::path(o.out_dir) / "summary.md").string(), md.str());
  io::write_text_atomic((fs::path(o.out_dir) / "summary.json").string(), js.str());

  std::ostringstream page;
  page << "<!doctype html><html><head><meta charset=\"utf-8\"><title>" << html_escape(o.title)
       << "</title><style>body{font-family:system-ui,sans-serif;margin:24px;color:#0f172a}"
          "figure{display:inline-block;margin:8px;vertical-align:top}figcaption{font-size:13px;color:#334155}"
          "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #e2e8f0;padding:4px 8px}</style></head><body>"
       << "<h1>" << html_escape(o.title) << "</h1><p>Runs:";
  for (const CompareRun& r : runs) page << " <span style=\"color:" << color(r.arm) << "\">" << html_escape(r.arm) << "</span>=" << html_escape(r.dir);
  page << "</p><table><tr><th>metric (final: mean &plusmn; sd over runs)</th>";
  for (const std::string& arm : arms) page << "<th>" << html_escape(arm) << "</th>";
  page << "</tr>";
  for (const CompareMetric& m : metrics) {
    page << "<tr><td>" << html_escape(m.kind + ": " + m.name) << "</td>";
    for (const CompareArmSummary& a : summary)
      if (a.metric == m.kind + ":" + m.name)
        page << "<td>" << (std::isfinite(a.mean) ? fmt(a.mean, 4) + " &plusmn; " + fmt(a.sd, 2) : std::string("n/a")) << "</td>";
    page << "</tr>";
  }
  page << "</table>\n" << charts.str() << "</body></html>\n";
  io::write_text_atomic((fs::path(o.out_dir) / "compare.html").string(), page.str());
  return summary;
}

}  // namespace temper::report
