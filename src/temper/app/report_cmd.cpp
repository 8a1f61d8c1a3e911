#include "temper/app/report_cmd.h"

#include <cstdio>

#include "temper/report/compare_report.h"
#include "temper/report/html_report.h"

namespace temper::app {

int report(const ReportOptions& o) {
  report::HtmlReportOptions ro;
  ro.out = o.out;
  const std::string path = report::write_html_report(o.run_dir, ro);
  std::printf("%s\n", path.c_str());
  return 0;
}

int compare(const CompareCmdOptions& o) {
  std::vector<report::CompareRun> runs;
  for (const std::string& r : o.runs) runs.push_back(report::parse_compare_run(r));
  std::vector<report::CompareMetric> metrics;
  for (const std::string& m : o.metrics) metrics.push_back(report::parse_compare_metric(m));
  if (metrics.empty())
    for (const char* m : {"eval:eval_accuracy", "train:reward_mean", "train:entropy", "train:response_len_mean"})
      metrics.push_back(report::parse_compare_metric(m));
  report::CompareOptions co;
  co.out_dir = o.out;
  co.title = o.title;
  co.smooth = o.smooth;
  co.tail = o.tail;
  auto summary = report::write_compare_report(runs, metrics, co);
  for (const auto& a : summary) {
    std::printf("%-10s %-32s mean %.4f sd %.4f  runs:", a.arm.c_str(), a.metric.c_str(), a.mean, a.sd);
    for (double v : a.finals) std::printf(" %.4f", v);
    std::printf("\n");
  }
  std::printf("%s/compare.html\n", o.out.c_str());
  return 0;
}

}  // namespace temper::app
