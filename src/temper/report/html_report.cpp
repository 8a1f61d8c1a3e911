#include "temper/report/html_report.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "temper/core/base64.h"
#include "temper/core/error.h"
#include "temper/io/atomic_file.h"
#include "temper/report/svg_chart.h"

namespace temper::report {
namespace fs = std::filesystem;

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size() + s.size() / 8);
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

namespace {

// ---- which metrics, in which order, and what "best" means ----

const std::vector<std::string> kKeyOrder = {
    "reward_mean", "accuracy", "eval_accuracy", "eval_pass_at_k", "reward_std", "loss",
    "kl",          "entropy",  "clip_frac",     "grad_norm",      "lr",         "response_len_mean"};

bool contains(const std::string& s, const char* sub) {
  return s.find(sub) != std::string::npos;
}

// +1: higher is better, -1: lower is better, 0: neither (kl, entropy, lengths, timings).
int better_direction(const std::string& name) {
  if (contains(name, "reward") && !contains(name, "_std") && !contains(name, "/std") && !contains(name, "reward_s") &&
      !contains(name, "failures"))
    return 1;
  if (contains(name, "failures")) return -1;
  if (contains(name, "accuracy") || contains(name, "pass_at") || name == "tokens_per_s") return 1;
  if (contains(name, "loss")) return -1;
  return 0;
}

int kind_rank(const std::string& kind) {
  if (kind == "train") return 0;
  if (kind == "sft") return 1;
  if (kind == "eval") return 2;
  return 3;
}

const char* kind_color(const std::string& kind) {
  switch (kind_rank(kind)) {
    case 0:
      return "#2563eb";
    case 1:
      return "#16a34a";
    case 2:
      return "#dc2626";
    default:
      return "#9333ea";
  }
}

struct Series {
  std::string kind;
  std::vector<std::pair<int64_t, double>> points;  // sorted by step; NaN = a gap
};

struct Metric {
  std::string name;
  std::vector<Series> series;  // by kind rank
};

std::vector<Metric> collect_metrics(const std::vector<MetricsRow>& rows) {
  std::vector<std::string> order;
  std::map<std::string, std::map<std::string, Series>> by_name;
  for (const MetricsRow& r : rows) {
    for (const auto& [k, v] : r.values) {
      auto it = by_name.find(k);
      if (it == by_name.end()) {
        order.push_back(k);
        it = by_name.emplace(k, std::map<std::string, Series>{}).first;
      }
      Series& s = it->second[r.kind];
      s.kind = r.kind;
      s.points.emplace_back(r.step, v);
    }
  }
  auto key_pos = [&](const std::string& n) {
    for (size_t i = 0; i < kKeyOrder.size(); ++i)
      if (n == kKeyOrder[i] || (kKeyOrder[i] == "eval_pass_at_k" && n.rfind("eval_pass_at", 0) == 0)) return i;
    return kKeyOrder.size();
  };
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) { return key_pos(a) < key_pos(b); });
  std::vector<Metric> out;
  for (const std::string& n : order) {
    Metric m;
    m.name = n;
    for (auto& [kind, s] : by_name[n]) {
      std::stable_sort(s.points.begin(), s.points.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      m.series.push_back(std::move(s));
    }
    std::stable_sort(m.series.begin(), m.series.end(),
                     [](const Series& a, const Series& b) { return kind_rank(a.kind) < kind_rank(b.kind); });
    out.push_back(std::move(m));
  }
  return out;
}

// ---- one chart per metric: a series per kind ----

std::string svg_chart(const Metric& m) {
  std::vector<ChartSeries> series;
  for (const Series& s : m.series) series.push_back({s.kind, kind_color(s.kind), s.points});
  ChartOptions o;
  o.y_label = m.name;
  o.legend = m.series.size() > 1;
  return svg_line_chart(series, o);
}

// ---- summary ----

struct Summary {
  double first = NAN, last = NAN, best = NAN;
  int64_t first_step = 0, last_step = 0, best_step = 0;
  size_t n = 0;
};

Summary summarize(const Series& s, int dir) {
  Summary r;
  for (const auto& [step, v] : s.points) {
    if (!std::isfinite(v)) continue;
    if (r.n == 0) {
      r.first = v;
      r.first_step = step;
    }
    r.last = v;
    r.last_step = step;
    if (dir != 0 && (r.n == 0 || (dir > 0 ? v > r.best : v < r.best))) {
      r.best = v;
      r.best_step = step;
    }
    ++r.n;
  }
  return r;
}

const char* kCss = R"css(
:root { --fg:#0f172a; --muted:#64748b; --line:#e2e8f0; --bg:#f8fafc; --card:#fff; --accent:#2563eb; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg); }
header { padding:20px 28px 12px; background:var(--card); border-bottom:1px solid var(--line); }
header h1 { margin:0 0 4px; font-size:20px; }
header .meta { color:var(--muted); font-size:13px; }
main { padding:8px 28px 40px; max-width:1500px; }
h2 { font-size:16px; margin:26px 0 10px; }
.cards { display:flex; flex-wrap:wrap; gap:12px; margin-top:16px; }
.stat { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 14px; min-width:150px; }
.stat .k { color:var(--muted); font-size:12px; } .stat .v { font-size:20px; font-weight:600; }
.grid { display:grid; grid-template-columns:repeat(auto-fill,minmax(460px,1fr)); gap:14px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 12px 6px; }
.card h3 { margin:0 0 2px; font-size:14px; font-family:ui-monospace,Menlo,Consolas,monospace; }
.card .sub { color:var(--muted); font-size:12px; }
svg.chart { width:100%; height:auto; display:block; }
svg .plot { fill:#fff; } svg .grid { stroke:#eef2f7; stroke-width:1; } svg .axis { stroke:#94a3b8; stroke-width:1; }
svg .tick { font-size:10.5px; fill:#475569; } svg .label { font-size:11px; fill:#334155; }
svg .legend { font-size:11px; fill:#334155; } svg .empty { font-size:12px; fill:var(--muted); }
svg .line { fill:none; stroke-width:1.8; stroke-linejoin:round; stroke-linecap:round; }
table { border-collapse:collapse; background:var(--card); border:1px solid var(--line); font-size:13px; }
th, td { padding:5px 10px; border-bottom:1px solid var(--line); text-align:left; vertical-align:top; }
th { background:#f1f5f9; font-weight:600; }
td.n { text-align:right; font-variant-numeric:tabular-nums; font-family:ui-monospace,Menlo,Consolas,monospace; }
td.name { font-family:ui-monospace,Menlo,Consolas,monospace; }
.kind { display:inline-block; padding:0 6px; border-radius:9px; color:#fff; font-size:11px; }
pre { margin:0; white-space:pre-wrap; word-break:break-word; font:12px/1.4 ui-monospace,Menlo,Consolas,monospace; }
td pre { max-height:14em; overflow:auto; max-width:46em; }
details { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:8px 12px; }
summary { cursor:pointer; font-weight:600; }
.ok { color:#16a34a; font-weight:600; } .bad { color:#dc2626; font-weight:600; } .muted { color:var(--muted); }
)css";

std::string kind_badge(const std::string& kind) {
  return std::string("<span class=\"kind\" style=\"background:") + kind_color(kind) + "\">" + html_escape(kind) +
         "</span>";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TEMPER_CHECK(in.good()) << path << ": cannot open (" << std::strerror(errno) << ")";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string utc_now() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// The summary table: first, last and best per metric and kind.
void summary_table(std::ostream& o, const std::vector<Metric>& ms) {
  o << "<h2>Summary</h2>\n<table><thead><tr><th>metric</th><th>kind</th><th>first</th><th>last</th><th>best</th>"
    << "<th>best at step</th><th>points</th></tr></thead><tbody>\n";
  for (const Metric& m : ms) {
    const int dir = better_direction(m.name);
    for (const Series& s : m.series) {
      Summary su = summarize(s, dir);
      o << "<tr><td class=\"name\">" << html_escape(m.name) << "</td><td>" << kind_badge(s.kind) << "</td>";
      if (su.n == 0) {
        o << "<td class=\"n muted\">&ndash;</td><td class=\"n muted\">&ndash;</td>";
      } else {
        o << "<td class=\"n\">" << fmt(su.first) << "</td><td class=\"n\">" << fmt(su.last) << "</td>";
      }
      if (dir != 0 && su.n)
        o << "<td class=\"n\">" << fmt(su.best) << "</td><td class=\"n\">" << su.best_step << "</td>";
      else
        o << "<td class=\"n muted\">&ndash;</td><td class=\"n muted\">&ndash;</td>";
      o << "<td class=\"n\">" << su.n << "</td></tr>\n";
    }
  }
  o << "</tbody></table>\n";
}

// The run's images, inline (data: URIs): the page stays one self-contained file.
void images_section(std::ostream& o, const std::vector<ReportImage>& images) {
  if (images.empty()) return;
  o << "<h2>Images</h2>\n<div class=\"grid\">\n";
  for (const ReportImage& im : images)
    o << "<div class=\"card\"><h3>" << html_escape(im.title) << "</h3><img alt=\"" << html_escape(im.title)
      << "\" style=\"width:100%;image-rendering:pixelated\" src=\"data:image/png;base64," << base64_encode(im.png)
      << "\"></div>\n";
  o << "</div>\n";
}

// The last max_samples rows of samples.jsonl.
void samples_section(std::ostream& o, const std::vector<Sample>& samples, size_t max_samples) {
  o << "<h2>Samples</h2>\n";
  if (samples.empty()) {
    o << "<p class=\"muted\">No samples.jsonl rows.</p>\n";
    return;
  }
  const size_t n = std::min(max_samples, samples.size());
  bool any_answer = false, any_correct = false;
  for (size_t i = samples.size() - n; i < samples.size(); ++i) {
    any_answer |= samples[i].answer.has_value();
    any_correct |= samples[i].correct.has_value();
  }
  o << "<p class=\"muted\">The last " << n << " of " << samples.size() << " samples.</p>\n";
  o << "<table><thead><tr><th>step</th><th>reward</th>" << (any_correct ? "<th>correct</th>" : "")
    << "<th>prompt</th><th>completion</th>" << (any_answer ? "<th>answer</th>" : "") << "</tr></thead><tbody>\n";
  for (size_t i = samples.size() - n; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    o << "<tr><td class=\"n\">" << s.step << "</td><td class=\"n\">" << fmt(s.reward) << "</td>";
    if (any_correct)
      o << "<td>"
        << (s.correct ? (*s.correct ? "<span class=\"ok\">&#10003;</span>" : "<span class=\"bad\">&#10007;</span>")
                      : "")
        << "</td>";
    o << "<td><pre>" << html_escape(s.prompt) << "</pre></td><td><pre>" << html_escape(s.completion) << "</pre></td>";
    if (any_answer) o << "<td><pre>" << (s.answer ? html_escape(*s.answer) : "") << "</pre></td>";
    o << "</tr>\n";
  }
  o << "</tbody></table>\n";
}

}  // namespace

std::string render_html_report(const std::string& title, const std::vector<MetricsRow>& metrics,
                               const std::vector<Sample>& samples, const std::string* config_toml, size_t max_samples,
                               const std::vector<ReportImage>& images) {
  const std::vector<Metric> ms = collect_metrics(metrics);
  int64_t min_step = 0, max_step = 0;
  std::map<std::string, size_t> rows_by_kind;
  for (size_t i = 0; i < metrics.size(); ++i) {
    min_step = i == 0 ? metrics[i].step : std::min(min_step, metrics[i].step);
    max_step = i == 0 ? metrics[i].step : std::max(max_step, metrics[i].step);
    ++rows_by_kind[metrics[i].kind];
  }
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<title>temper report: " << html_escape(title) << "</title>\n<style>" << kCss << "</style>\n</head>\n<body>\n";
  o << "<header><h1>temper run report</h1><div class=\"meta\">" << html_escape(title) << " &middot; steps " << min_step
    << "&ndash;" << max_step << " &middot; ";
  bool first = true;
  for (const auto& [kind, n] : rows_by_kind) {
    o << (first ? "" : ", ") << n << " " << html_escape(kind) << " rows";
    first = false;
  }
  o << " &middot; generated " << utc_now() << "</div>\n";

  // Headline numbers: the last value of the key metrics, and the best eval accuracy.
  o << "<div class=\"cards\"><div class=\"stat\"><div class=\"k\">last step</div><div class=\"v\">" << max_step
    << "</div></div>";
  for (const Metric& m : ms) {
    if (m.name != "reward_mean" && m.name != "accuracy" && m.name != "eval_accuracy") continue;
    for (const Series& s : m.series) {
      Summary su = summarize(s, better_direction(m.name));
      if (su.n == 0) continue;
      const bool use_best = m.name == "eval_accuracy";
      o << "<div class=\"stat\"><div class=\"k\">" << html_escape(m.name) << (use_best ? " (best)" : " (last)")
        << (s.kind != "train" && s.kind != "eval" ? " · " + html_escape(s.kind) : "") << "</div><div class=\"v\">"
        << fmt(use_best ? su.best : su.last) << "</div></div>";
    }
  }
  o << "</div></header>\n<main>\n";

  // Charts.
  o << "<h2>Metrics</h2>\n<div class=\"grid\">\n";
  for (const Metric& m : ms) {
    o << "<div class=\"card\"><h3>" << html_escape(m.name) << "</h3><div class=\"sub\">";
    for (size_t i = 0; i < m.series.size(); ++i) {
      const Series& s = m.series[i];
      Summary su = summarize(s, 0);
      o << (i ? " &nbsp; " : "") << kind_badge(s.kind) << " last " << (su.n ? fmt(su.last) : "&ndash;")
        << (su.n ? " @ " + std::to_string(su.last_step) : "");
    }
    o << "</div>" << svg_chart(m) << "</div>\n";
  }
  o << "</div>\n";

  summary_table(o, ms);
  images_section(o, images);
  samples_section(o, samples, max_samples);

  // Config.
  o << "<h2>Config</h2>\n";
  if (config_toml)
    o << "<details open><summary>config.toml</summary><pre>" << html_escape(*config_toml) << "</pre></details>\n";
  else
    o << "<p class=\"muted\">No config.toml in the run directory.</p>\n";
  o << "</main>\n</body>\n</html>\n";
  return o.str();
}

std::string write_html_report(const std::string& run_dir, const HtmlReportOptions& opt) {
  TEMPER_CHECK(fs::is_directory(run_dir))
      << run_dir << ": not a run directory (expected a directory holding metrics.jsonl)";
  const std::string metrics_path = (fs::path(run_dir) / "metrics.jsonl").string();
  TEMPER_CHECK(fs::exists(metrics_path))
      << metrics_path << ": missing; a run directory holds the metrics.jsonl that temper train writes";
  std::vector<MetricsRow> metrics = read_metrics_jsonl(metrics_path);
  TEMPER_CHECK(!metrics.empty()) << metrics_path << ": no metric rows (has the run finished its first step?)";
  const std::string samples_path = (fs::path(run_dir) / "samples.jsonl").string();
  std::vector<Sample> samples;
  if (fs::exists(samples_path)) samples = read_samples_jsonl(samples_path);
  const std::string config_path = (fs::path(run_dir) / "config.toml").string();
  std::string config;
  const bool has_config = fs::exists(config_path);
  if (has_config) config = read_text(config_path);

  std::vector<ReportImage> images;
  const fs::path image_dir = fs::path(run_dir) / "images";
  if (fs::is_directory(image_dir)) {
    std::vector<fs::path> pngs;
    for (const auto& e : fs::directory_iterator(image_dir))
      if (e.is_regular_file() && e.path().extension() == ".png") pngs.push_back(e.path());
    std::sort(pngs.begin(), pngs.end());
    const size_t first = pngs.size() > opt.max_images ? pngs.size() - opt.max_images : 0;
    for (size_t i = first; i < pngs.size(); ++i)
      images.push_back({pngs[i].stem().string(), read_text(pngs[i].string())});
  }

  std::string title = fs::path(run_dir).lexically_normal().string();
  if (title.size() > 1 && title.back() == '/') title.pop_back();
  const std::string html =
      render_html_report(title, metrics, samples, has_config ? &config : nullptr, opt.max_samples, images);
  const std::string out = opt.out.empty() ? (fs::path(run_dir) / "report.html").string() : opt.out;
  io::write_text_atomic(out, html);
  return out;
}

}  // namespace temper::report
