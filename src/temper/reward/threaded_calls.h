// Calls that may hang, run on one thread per batch: fn(0), fn(1), ... one after another on a worker thread while
// the caller waits at most timeout_s per item. An item past its timeout is abandoned with its thread (a thread
// cannot be killed: it runs on until fn returns, then exits without taking another item) and a fresh thread goes
// on with the next item. fn must own what it reads (capture by value or shared_ptr): an abandoned thread outlives
// the call. What a caller does once too many threads hang for good (reward/forked_calls.h: a process that can be
// killed) is the caller's; ThreadedCalls counts them. One thread per batch, not per item: ~50 us a batch.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace temper::reward {

class ThreadedCalls {
 public:
  // Results of fn(i) for i < n (nullopt: failed; `why` says how). An exception fails its item only.
  std::vector<std::optional<std::string>> run(size_t n, std::function<std::string(size_t)> fn, double timeout_s,
                                              std::vector<std::string>* why = nullptr);
  int64_t abandoned_running() const { return abandoned_->load(); }  // threads still inside a timed-out item
  int64_t timeouts() const { return timeouts_; }
  int64_t exceptions() const { return exceptions_; }

 private:
  std::shared_ptr<std::atomic<int64_t>> abandoned_ = std::make_shared<std::atomic<int64_t>>(0);
  int64_t timeouts_ = 0, exceptions_ = 0;
};

}  // namespace temper::reward
