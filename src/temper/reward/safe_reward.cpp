#include "temper/reward/safe_reward.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

#include "temper/core/error.h"
#include "temper/core/log.h"

namespace temper::reward {

struct SafeReward::Shared {
  std::atomic<int64_t> calls{0}, exceptions{0}, timeouts{0}, abandoned{0}, failures{0};
};

namespace {

// One call on its own thread: the worker fills it, the caller waits on it or abandons it.
struct CallState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, abandoned = false, threw = false;
  std::string error;
};

std::string short_reason(std::string_view r) {
  std::string s(r.substr(0, 160));
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (r.size() > 160) s += "...";
  return s;
}

}  // namespace

void SafeRewardOptions::validate() const {
  TEMPER_CHECK(std::isfinite(timeout_s)) << "safe reward '" << name << "': timeout_s must be finite, got " << timeout_s;
  TEMPER_CHECK(max_abandoned >= 0) << "safe reward '" << name << "': max_abandoned must be >= 0, got " << max_abandoned;
  TEMPER_CHECK(log_first >= 0 && log_every >= 1)
      << "safe reward '" << name << "': log_first must be >= 0 and log_every >= 1, got " << log_first << " and "
      << log_every;
}

SafeReward::SafeReward(SafeRewardOptions opt) : opt_(std::move(opt)), shared_(std::make_shared<Shared>()) {
  opt_.validate();
}

SafeReward::~SafeReward() = default;

int64_t SafeReward::calls() const { return shared_->calls.load(); }
int64_t SafeReward::exceptions() const { return shared_->exceptions.load(); }
int64_t SafeReward::timeouts() const { return shared_->timeouts.load(); }

SafeRewardStats SafeReward::stats() const {
  return {shared_->calls.load(), shared_->exceptions.load(), shared_->timeouts.load(), shared_->abandoned.load()};
}

void SafeReward::report(const char* kind, std::string_view what, std::string_view reason) {
  int64_t n = ++shared_->failures;
  if (n > opt_.log_first && n % opt_.log_every != 0) return;
  std::ostringstream line;
  line << "reward '" << opt_.name << "': " << kind;
  if (!what.empty()) line << " on " << what;
  line << ": " << short_reason(reason) << "; scored as failed (calls " << calls() << ", exceptions " << exceptions()
       << ", timeouts " << timeouts() << ")";
  if (n == opt_.log_first) line << "; further failures are logged every " << opt_.log_every << "th";
  TEMPER_LOG(warn) << line.str();
}

bool SafeReward::run(std::function<void()> fn, std::string_view what) {
  ++shared_->calls;
  if (opt_.timeout_s <= 0) {
    try {
      fn();
      return true;
    } catch (const std::exception& e) {
      ++shared_->exceptions;
      report("exception", what, e.what());
    } catch (...) {
      ++shared_->exceptions;
      report("exception", what, "unknown exception");
    }
    return false;
  }

  if (shared_->abandoned.load() >= opt_.max_abandoned) {
    ++shared_->timeouts;
    report("timeout", what,
           "not started: " + std::to_string(shared_->abandoned.load()) + " timed-out calls are still running");
    return false;
  }
  auto st = std::make_shared<CallState>();
  try {
    std::thread([fn = std::move(fn), st, shared = shared_]() {
      bool threw = false;
      std::string err;
      try {
        fn();
      } catch (const std::exception& e) {
        threw = true;
        err = e.what();
      } catch (...) {
        threw = true;
        err = "unknown exception";
      }
      std::lock_guard<std::mutex> g(st->mu);
      st->done = true;
      st->threw = threw;
      st->error = std::move(err);
      if (st->abandoned) --shared->abandoned;
      st->cv.notify_all();
    }).detach();
  } catch (const std::exception& e) {  // could not start a thread
    ++shared_->exceptions;
    report("exception", what, std::string("cannot start the reward thread: ") + e.what());
    return false;
  }

  std::unique_lock<std::mutex> lk(st->mu);
  bool finished = st->cv.wait_for(lk, std::chrono::duration<double>(opt_.timeout_s), [&] { return st->done; });
  if (!finished) {
    st->abandoned = true;
    ++shared_->abandoned;
    lk.unlock();
    ++shared_->timeouts;
    report("timeout", what, "no result after " + std::to_string(opt_.timeout_s) + " s (the call is abandoned)");
    return false;
  }
  if (st->threw) {
    std::string err = st->error;
    lk.unlock();
    ++shared_->exceptions;
    report("exception", what, err);
    return false;
  }
  return true;
}

}  // namespace temper::reward
