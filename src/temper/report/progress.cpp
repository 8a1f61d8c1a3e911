#include "temper/report/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

namespace temper::report {

const std::vector<std::string> kProgressKeys = {"reward_mean", "accuracy", "eval_accuracy", "kl",
                                                 "entropy",     "loss",     "tokens_per_s"};

namespace {
const std::map<std::string, std::string>& short_names() {
  static const std::map<std::string, std::string> m = {
      {"reward_mean", "reward"}, {"accuracy", "acc"}, {"eval_accuracy", "eval_acc"}, {"tokens_per_s", "tok/s"},
      {"response_len_mean", "len"}};
  return m;
}
std::string fmt_value(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  if (std::fabs(v) >= 1e4 && std::fabs(v) < 1e9)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
}  // namespace

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  auto t = static_cast<int64_t>(std::llround(s));
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  return buf;
}

Progress::Progress(int64_t total_steps, int64_t first_step, ProgressOptions o)
    : total_(std::max<int64_t>(total_steps, 1)), first_(first_step), o_(std::move(o)) {
  if (!o_.out) o_.out = &std::cerr;
  tty_ = o_.tty < 0 ? ::isatty(::fileno(stderr)) != 0 : o_.tty != 0;
  if (!o_.clock) {
    o_.clock = [] {
      using namespace std::chrono;
      return duration<double>(steady_clock::now().time_since_epoch()).count();
    };
  }
  if (o_.keys.empty()) o_.keys = kProgressKeys;
  o_.bar_width = std::max(o_.bar_width, 4);
  start_ = o_.clock();
  last_step_ = first_;
}

Progress::~Progress() { finish(); }

std::string Progress::render(int64_t step, const MetricValues& values, double now) const {
  const double frac = std::clamp(static_cast<double>(step) / static_cast<double>(total_), 0.0, 1.0);
  const double elapsed = now - start_;
  const double eta = step > first_ ? elapsed / static_cast<double>(step - first_) * static_cast<double>(total_ - step)
                                   : -1.0;
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3d%%", static_cast<int>(std::floor(frac * 100)));
  std::string s = "step " + std::to_string(step) + "/" + std::to_string(total_);
  if (tty_) {
    const int filled = static_cast<int>(std::floor(frac * o_.bar_width));
    std::string bar(static_cast<size_t>(o_.bar_width), '.');
    for (int i = 0; i < filled; ++i) bar[static_cast<size_t>(i)] = '=';
    if (filled < o_.bar_width) bar[static_cast<size_t>(filled)] = '>';
    s += " [" + bar + "] " + pct + "  " + format_duration(elapsed) + " < " + format_duration(eta);
  } else {
    std::string p = pct;
    p.erase(0, p.find_first_not_of(' '));
    s += " (" + p + ") elapsed " + format_duration(elapsed) + " eta " + format_duration(eta);
  }
  for (const std::string& k : o_.keys) {
    auto it = std::find_if(values.begin(), values.end(), [&](const auto& kv) { return kv.first == k; });
    if (it == values.end()) continue;
    if (tty_) {
      auto sn = short_names().find(k);
      s += "  " + (sn == short_names().end() ? k : sn->second) + " " + fmt_value(it->second);
    } else {
      s += " " + k + "=" + fmt_value(it->second);
    }
  }
  return s;
}

void Progress::update(int64_t step, const MetricValues& values) {
  last_step_ = step;
  last_values_ = values;
  const double now = o_.clock();
  if (!tty_) {
    *o_.out << render(step, values, now) << '\n' << std::flush;
    return;
  }
  if (step < total_ && now - last_draw_ < o_.min_redraw_s) return;
  last_draw_ = now;
  const std::string line = render(step, values, now);
  *o_.out << '\r' << line << "\x1b[K" << std::flush;  // \x1b[K: clear what a longer line left
  drawn_ = true;
}

void Progress::message(const std::string& line) {
  if (tty_ && drawn_) {
    *o_.out << "\r\x1b[K" << line << '\n';
    *o_.out << '\r' << render(last_step_, last_values_, o_.clock()) << "\x1b[K" << std::flush;
  } else {
    *o_.out << line << '\n' << std::flush;
  }
}

void Progress::finish() {
  if (!tty_ || !drawn_) return;
  // Draw the last state (an update may have been skipped by the redraw limit), then end the line.
  *o_.out << '\r' << render(last_step_, last_values_, o_.clock()) << "\x1b[K\n" << std::flush;
  drawn_ = false;
}

}  // namespace temper::report
