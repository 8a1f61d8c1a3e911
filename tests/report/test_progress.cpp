// Progress display: the redrawn terminal line and the plain per-step log lines, with an injected clock.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "temper/report/progress.h"

namespace temper::report {
namespace {

struct FakeClock {
  double t = 100;
  std::function<double()> fn() {
    return [this] { return t; };
  }
};

TEST(Progress, PlainLinesWhenNotATerminal) {
  std::ostringstream out;
  FakeClock clock;
  ProgressOptions o;
  o.out = &out;
  o.tty = 0;
  o.clock = clock.fn();
  {
    Progress p(100, 0, o);
    clock.t += 30;
    p.update(10, {{"reward_mean", 0.4125}, {"accuracy", 0.375}, {"rss_mb", 900}, {"kl", std::nan("")}});
    clock.t += 3630;
    p.update(100, {{"reward_mean", 0.9}});
    p.message("eval: accuracy 0.8");
  }
  EXPECT_EQ(out.str(),
            "step 10/100 (10%) elapsed 00:30 eta 04:30 reward_mean=0.4125 accuracy=0.375 kl=-\n"
            "step 100/100 (100%) elapsed 1:01:00 eta 00:00 reward_mean=0.9\n"
            "eval: accuracy 0.8\n");
}

TEST(Progress, OneRedrawnLineOnATerminal) {
  std::ostringstream out;
  FakeClock clock;
  ProgressOptions o;
  o.out = &out;
  o.tty = 1;
  o.clock = clock.fn();
  o.bar_width = 10;
  {
    Progress p(20, 10, o);  // resumed at step 10: the ETA counts from there
    clock.t += 10;
    p.update(15, {{"reward_mean", 0.5}, {"tokens_per_s", 12345.6}});
    clock.t += 0.01;
    p.update(16, {{"reward_mean", 0.6}});  // within min_redraw_s: skipped
    p.message("checkpoint saved");
    clock.t += 1;
    p.update(20, {{"reward_mean", 0.7}});
  }
  const std::string bar15 = "step 15/20 [=======>..]  75%  00:10 < 00:10  reward 0.5  tok/s 12346";
  const std::string bar16 = "step 16/20 [========>.]  80%  00:10 < 00:07  reward 0.6";
  const std::string bar20 = "step 20/20 [==========] 100%  00:11 < 00:00  reward 0.7";
  EXPECT_EQ(out.str(), "\r" + bar15 + "\x1b[K" +                                   // first draw
                           "\r\x1b[Kcheckpoint saved\n\r" + bar16 + "\x1b[K" +      // message, bar redrawn
                           "\r" + bar20 + "\x1b[K" +                                 // last step always drawn
                           "\r" + bar20 + "\x1b[K\n");                               // finish ends the line
}

TEST(Progress, FormatDuration) {
  EXPECT_EQ(format_duration(0), "00:00");
  EXPECT_EQ(format_duration(59.6), "01:00");
  EXPECT_EQ(format_duration(3599), "59:59");
  EXPECT_EQ(format_duration(3600 * 26 + 61), "26:01:01");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_duration(INFINITY), "--:--");
}

}  // namespace
}  // namespace temper::report
