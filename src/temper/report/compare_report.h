// Side-by-side comparison of runs (method experiments: arms x seeds): for each chosen metric, one SVG
// chart with a line per run coloured by arm (optionally smoothed by a trailing mean), written as
// OUT/<kind>_<metric>.svg and gathered in OUT/compare.html; and a summary per arm (mean and
// standard deviation over its runs of the final value: the last row for sparse series such as eval,
// the mean over the last `tail` share of steps for per-step series) as OUT/summary.md (a Markdown
// table for docs) and OUT/summary.json. Every file is written atomically.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::report {

struct CompareRun {
  std::string arm;  // e.g. "grpo", "stare"
  std::string dir;  // the run directory (metrics.jsonl)
};

struct CompareMetric {
  std::string kind;  // "train", "eval", "sft"
  std::string name;  // e.g. "entropy", "eval_accuracy"
};

struct CompareOptions {
  std::string out_dir;
  std::string title = "comparison";
  int64_t smooth = 1;   // trailing mean over this many points, per-step series only (charts, not summaries)
  double tail = 0.1;    // share of the last steps a per-step series' final value averages
};

struct CompareArmSummary {
  std::string arm, metric;  // metric: "kind:name"
  std::vector<double> finals;  // per run, in the order given
  double mean = 0, sd = 0;
};

// "kind:name" or "name" (kind: eval when the name starts with eval_, else train).
CompareMetric parse_compare_metric(const std::string& spec);
// "arm=dir"; throws naming the spec when it is not of that form.
CompareRun parse_compare_run(const std::string& spec);

std::vector<CompareArmSummary> write_compare_report(const std::vector<CompareRun>& runs,
                                                    const std::vector<CompareMetric>& metrics, const CompareOptions& o);

}  // namespace temper::report
