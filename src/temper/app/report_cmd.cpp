#include "temper/app/report_cmd.h"

#include <cstdio>

#include "temper/report/html_report.h"

namespace temper::app {

int report(const ReportOptions& o) {
  report::HtmlReportOptions ro;
  ro.out = o.out;
  const std::string path = report::write_html_report(o.run_dir, ro);
  std::printf("%s\n", path.c_str());
  return 0;
}

}  // namespace temper::app
