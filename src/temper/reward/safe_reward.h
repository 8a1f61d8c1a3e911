// Calling a reward function so that a bad sample never ends the run: if the function throws or runs past its
// timeout, the call scores the fallback (0 for a reward), the failure is counted and logged at warn with a
// short reason (the first `log_first` failures one by one, then every `log_every`-th with the running counts).
// A call past its timeout is abandoned, not killed (how, and what the function must own: above SafeReward).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace temper::reward {

struct SafeRewardOptions {
  std::string name = "reward";  // shown in log lines
  double timeout_s = 0;         // <= 0: no timeout (inline call)
  int max_abandoned = 4;        // timed-out calls allowed to keep running in the background
  int64_t log_first = 10;       // failures logged one by one
  int64_t log_every = 1000;     // after that, every log_every-th failure
  void validate() const;
};

struct SafeRewardStats {
  int64_t calls = 0;
  int64_t exceptions = 0;
  int64_t timeouts = 0;           // includes calls refused while max_abandoned calls were still running
  int64_t abandoned_running = 0;  // timed-out calls whose thread has not returned yet
};

// Timeouts. A C++ thread cannot be killed, so a call with a timeout runs on its own detached thread while the
// caller waits at most timeout_s. A call that is late is *abandoned*: the caller returns the fallback at once,
// the thread runs on until the function returns, and its result is then thrown away. The function must
// therefore own what it reads (capture by value or by shared_ptr; tasks::verify_safely does this). At most
// `max_abandoned` abandoned calls may still be running; while that many are, further calls fail fast as
// timeouts without starting the function, so a reward that hangs forever costs a bounded number of threads.
// timeout_s <= 0 runs the function inline on the caller's thread (exceptions are still caught).
//
// Thread-safe: call() may run concurrently from many threads; counters are atomic.
class SafeReward {
 public:
  explicit SafeReward(SafeRewardOptions opt = {});
  ~SafeReward();
  SafeReward(const SafeReward&) = delete;
  SafeReward& operator=(const SafeReward&) = delete;

  // fn's result, or `fallback` if fn throws or times out. `what` (e.g. the problem id) goes into the log line.
  template <class T>
  T call(std::function<T()> fn, T fallback, std::string_view what = {}) {
    auto out = std::make_shared<std::optional<T>>();
    bool ok = run([fn = std::move(fn), out]() { out->emplace(fn()); }, what);
    return ok ? std::move(**out) : std::move(fallback);
  }
  double call(std::function<double()> fn, std::string_view what = {}) { return call<double>(std::move(fn), 0.0, what); }

  int64_t calls() const;
  int64_t exceptions() const;
  int64_t timeouts() const;
  int64_t failures() const { return exceptions() + timeouts(); }
  SafeRewardStats stats() const;
  const SafeRewardOptions& options() const { return opt_; }

 private:
  struct Shared;
  // true: fn returned in time without throwing.
  bool run(std::function<void()> fn, std::string_view what);
  void report(const char* kind, std::string_view what, std::string_view reason);

  SafeRewardOptions opt_;
  std::shared_ptr<Shared> shared_;  // outlives this object while abandoned threads still hold it
};

}  // namespace temper::reward
