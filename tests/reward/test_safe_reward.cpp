// SafeReward: results pass through; exceptions and timeouts score the fallback, are counted and logged at warn
// (rate-limited, never at info); a timed-out call is abandoned and its thread finishes in the background;
// at max_abandoned still running, further calls fail fast.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/reward/safe_reward.h"

using namespace temper;
using namespace temper::reward;

namespace {

// Captures log lines for the lifetime of the object.
struct LogCapture {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  LogCapture() {
    log_set_sink([this](LogLevel l, std::string_view m) {
      std::lock_guard<std::mutex> g(mu);
      lines.emplace_back(l, std::string(m));
    });
  }
  ~LogCapture() { log_set_sink(nullptr); }
  size_t count(LogLevel l) {
    std::lock_guard<std::mutex> g(mu);
    size_t n = 0;
    for (auto& [lv, m] : lines) n += lv == l;
    return n;
  }
};

bool wait_until(const std::function<bool()>& cond, double seconds = 30) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace

TEST(SafeReward, InlineCountsExceptions) {
  LogCapture logs;
  SafeReward safe({.name = "unit"});
  EXPECT_EQ(safe.call([] { return 0.75; }), 0.75);
  EXPECT_EQ(safe.call([]() -> double { throw std::runtime_error("bad sample"); }, "p/1"), 0.0);
  EXPECT_EQ(safe.call([]() -> double { throw 17; }), 0.0);  // not a std::exception
  EXPECT_EQ(safe.call<std::string>([] { return std::string("ok"); }, "fallback"), "ok");
  EXPECT_EQ(safe.calls(), 4);
  EXPECT_EQ(safe.exceptions(), 2);
  EXPECT_EQ(safe.timeouts(), 0);
  ASSERT_EQ(logs.count(LogLevel::warn), 2u);
  EXPECT_EQ(logs.count(LogLevel::info), 0u);
  const std::string& m = logs.lines[0].second;
  EXPECT_NE(m.find("reward 'unit'"), std::string::npos) << m;
  EXPECT_NE(m.find("bad sample"), std::string::npos) << m;
  EXPECT_NE(m.find("p/1"), std::string::npos) << m;
  EXPECT_NE(logs.lines[1].second.find("unknown exception"), std::string::npos) << logs.lines[1].second;
}

TEST(SafeReward, LogIsRateLimited) {
  LogCapture logs;
  SafeReward safe({.name = "flood", .log_first = 3, .log_every = 10});
  for (int i = 0; i < 25; ++i) safe.call([]() -> double { throw std::runtime_error("x"); });
  EXPECT_EQ(safe.exceptions(), 25);
  // Failures 1, 2, 3, then 10 and 20.
  EXPECT_EQ(logs.count(LogLevel::warn), 5u);
  EXPECT_NE(logs.lines[2].second.find("every 10th"), std::string::npos) << logs.lines[2].second;
}

TEST(SafeReward, TimeoutScoresFallbackAndAbandonsTheCall) {
  LogCapture logs;
  SafeReward safe({.name = "slow", .timeout_s = 0.05, .max_abandoned = 1});
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto finished = std::make_shared<std::atomic<bool>>(false);
  auto blocked = [release, finished]() -> double {
    while (!release->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    finished->store(true);
    return 1.0;
  };
  EXPECT_EQ(safe.call(blocked, "p/slow"), 0.0);
  EXPECT_EQ(safe.timeouts(), 1);
  EXPECT_EQ(safe.stats().abandoned_running, 1);
  // With one abandoned call still running, the next call is refused at once and counted as a timeout.
  std::atomic<bool> ran{false};
  EXPECT_EQ(safe.call([&ran] { ran = true; return 1.0; }), 0.0);
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(safe.timeouts(), 2);
  // Release the abandoned call: it finishes in the background, its result is dropped.
  release->store(true);
  ASSERT_TRUE(wait_until([&] { return safe.stats().abandoned_running == 0; }));
  EXPECT_TRUE(finished->load());
  // Fast calls still succeed through the thread path; exceptions there are caught too.
  EXPECT_EQ(safe.call([] { return 0.5; }), 0.5);
  EXPECT_EQ(safe.call([]() -> double { throw Error("threaded throw"); }), 0.0);
  SafeRewardStats s = safe.stats();
  EXPECT_EQ(s.calls, 4);
  EXPECT_EQ(s.timeouts, 2);
  EXPECT_EQ(s.exceptions, 1);
  EXPECT_EQ(logs.count(LogLevel::warn), 3u);
  EXPECT_NE(logs.lines[0].second.find("timeout on p/slow"), std::string::npos) << logs.lines[0].second;
  EXPECT_NE(logs.lines[1].second.find("still running"), std::string::npos) << logs.lines[1].second;
}

TEST(SafeReward, ConcurrentCallersCountExactly) {
  SafeReward safe({.name = "mt", .log_first = 0, .log_every = 1000000});
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        double r = safe.call([i]() -> double {
          if (i % 4 == 0) throw std::runtime_error("every fourth");
          return 1.0;
        });
        ok += r == 1.0;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(safe.calls(), 800);
  EXPECT_EQ(safe.exceptions(), 200);
  EXPECT_EQ(ok.load(), 600);
}

TEST(SafeReward, OptionsAreValidated) {
  EXPECT_THROW(SafeReward({.max_abandoned = -1}), Error);
  EXPECT_THROW(SafeReward({.log_every = 0}), Error);
}
