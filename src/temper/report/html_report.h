// report.html for a run directory: one self-contained page (inline CSS and SVG, no scripts, no
// external URLs) with a line chart per metric (train / sft / eval series apart; nulls break the line),
// a summary table (first, last, best per metric), the resolved config.toml verbatim and the last
// samples. Everything taken from the run's files is HTML-escaped. Leaves out: interactivity (zoom,
// hover beyond SVG <title> tooltips), smoothing, comparing runs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "temper/report/metrics_sink.h"
#include "temper/report/svg_chart.h"

namespace temper::report {

struct HtmlReportOptions {
  std::string out;          // default: <run_dir>/report.html
  size_t max_samples = 20;  // the last N rows of samples.jsonl
  size_t max_images = 24;   // the last N (by name) of <run_dir>/images/*.png
};

struct ReportImage {
  std::string title;  // the file's stem: images/step-000200-samples.png -> step-000200-samples
  std::string png;    // the file's bytes
};

// Reads <run_dir>/metrics.jsonl (required, at least one row), samples.jsonl and config.toml
// (optional), and the PNG images under <run_dir>/images/ (optional: generators' sample grids, shown inline), writes
// the page atomically and returns its path. Bad rows throw temper::Error naming
// file:line and the field.
std::string write_html_report(const std::string& run_dir, const HtmlReportOptions& o = {});

// The page itself, from data already read (title: shown in the header, usually the run directory).
std::string render_html_report(const std::string& title, const std::vector<MetricsRow>& metrics,
                               const std::vector<Sample>& samples, const std::string* config_toml,
                               size_t max_samples = 20, const std::vector<ReportImage>& images = {});

std::string html_escape(const std::string& s);

}  // namespace temper::report
