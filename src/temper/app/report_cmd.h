// `temper report RUN_DIR [--out FILE]`: writes the run's report.html (charts of metrics.jsonl, the
// last samples, the config) and prints its path. The page is built by temper/report/html_report.
#pragma once

#include <string>

namespace temper::app {

struct ReportOptions {
  std::string run_dir;
  std::string out;  // default: RUN_DIR/report.html
};

int report(const ReportOptions& o);

}  // namespace temper::app
