// The training progress display. On a terminal (isatty(stderr)) one line redrawn in place with '\r':
//   step 120/500 [=========>...............]  24%  01:02 < 03:17  reward 0.412  acc 0.38  kl 0.0031
// otherwise (a log file, CI) one plain line per update:
//   step 120/500 (24%) elapsed 01:02 eta 03:17 reward_mean=0.412 accuracy=0.38 kl=0.0031
// The stream, the tty flag and the clock are injectable for tests. Not a logger: lines printed while
// a bar is drawn go through message(), which clears and redraws the bar.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "temper/report/metrics_sink.h"

namespace temper::report {

struct ProgressOptions {
  std::ostream* out = nullptr;          // default: std::cerr
  int tty = -1;                         // 1 / 0; -1: isatty(fileno(stderr))
  std::function<double()> clock;        // seconds, monotonic; default: steady_clock
  std::vector<std::string> keys;        // metrics shown, in order; default: kProgressKeys
  int bar_width = 24;
  double min_redraw_s = 0.1;            // tty: redraws closer together are skipped (the last one is not)
};

// reward_mean, accuracy, eval_accuracy, kl, entropy, loss, tokens_per_s (those present in a row).
extern const std::vector<std::string> kProgressKeys;

class Progress {
 public:
  // total_steps: the last step of the run; first_step: where this process starts (a resume), for the ETA.
  Progress(int64_t total_steps, int64_t first_step = 0, ProgressOptions o = {});
  ~Progress();  // ends a drawn bar with '\n'

  // `step` finished (1-based, <= total). Values not listed in keys are ignored; NaN shows as "-".
  void update(int64_t step, const MetricValues& values);
  void message(const std::string& line);  // a line of its own (an eval result, a checkpoint saved)
  void finish();                          // ends the bar line; idempotent

  // The text of one update, without '\r' or '\n' (exposed for tests).
  std::string render(int64_t step, const MetricValues& values, double now) const;

 private:
  int64_t total_, first_;
  ProgressOptions o_;
  bool tty_;
  double start_, last_draw_ = -1e300;
  bool drawn_ = false;  // a bar line is on screen without its '\n'
  MetricValues last_values_;
  int64_t last_step_ = 0;
};

// "mm:ss", or "h:mm:ss" from an hour; "--:--" for a negative or non-finite time.
std::string format_duration(double seconds);

}  // namespace temper::report
