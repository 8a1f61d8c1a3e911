// `temper report RUN_DIR [--out FILE]`: writes the run's report.html (charts of metrics.jsonl, the
// last samples, the config) and prints its path. The page is built by temper/report/html_report;
// `temper compare` by temper/report/compare_report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::app {

struct ReportOptions {
  std::string run_dir;
  std::string out;  // default: RUN_DIR/report.html
};

int report(const ReportOptions& o);

// `temper compare --out DIR [--metric KIND:NAME ...] [--smooth N] ARM=RUN_DIR ...`: charts of runs side by
// side (a colour per arm), OUT/compare.html, one SVG per metric, summary.md / summary.json; prints the summary.
struct CompareCmdOptions {
  std::vector<std::string> runs, metrics;
  std::string out, title = "comparison";
  int64_t smooth = 1;
  double tail = 0.1;
};

int compare(const CompareCmdOptions& o);

}  // namespace temper::app
