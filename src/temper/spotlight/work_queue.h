// Spotlight's pull-based work queue (spec methods-other section 3, item 7): the trainer adds small exploration
// requests (a group's class label and a chunk of candidate noise seeds, for a future step; [rl.async]'s explorer
// processes: a block of a batch's rollout requests as an opaque payload); explorers pull one at a time, so fast
// explorers take more. A result is committed the moment it arrives. When an explorer dies, the request it held goes
// back to the front of the queue: once with the default `tries` of 2 (a request whose second explorer dies too is
// dropped and counted), up to tries - 1 times in all. Requests for a step that has started are expired (never block the
// trainer); results that arrive after their step started are counted as late and discarded. Thread-safe (the pool's I/O
// thread and the trainer share it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace temper::spotlight {

struct ExploreRequest {
  int64_t id = -1;  // set by WorkQueue::add
  int64_t step = 0, group = 0;
  int32_t label = 0;
  uint64_t first_seed = 0;  // seeds first_seed .. first_seed + count - 1
  int64_t count = 0;
  int64_t failures = 0;  // explorers that died holding it
  std::string payload;   // the request's own bytes, sent as the request message's blob (empty for the flow's)
};

struct ExploreResult {
  int64_t request = -1, step = 0, group = 0;
  int32_t label = 0;
  int64_t version = -1;  // the weights' version the rewards were computed with
  int worker = -1;
  double seconds = 0;  // the explorer's time on the request
  double arrived = 0;  // seconds since the queue was made
  std::vector<uint64_t> seeds;
  std::vector<double> rewards;
  std::string payload;  // a result without seeds: the result message's blob as it came
};

struct QueueCounters {
  int64_t added = 0, committed = 0, requeued = 0, dropped = 0, expired = 0, late = 0;
};

class WorkQueue {
 public:
  // `tries`: explorers a request may be handed to before it is dropped (>= 1).
  explicit WorkQueue(int64_t tries = 2);
  // Appends requests (in order: the planner's priority); returns their ids.
  std::vector<int64_t> add(std::vector<ExploreRequest> requests);
  // The next pending request, now held by `worker`; nullopt when none is pending.
  std::optional<ExploreRequest> pull(int worker);
  // Commits a result for a request `worker` holds. False (nothing kept) when the request is unknown or its step
  // has started (late).
  bool commit(int worker, ExploreResult r);
  // `worker` died: the request it held (if any) is re-queued at the front, or dropped on its second failure.
  // Returns the ids re-queued.
  std::vector<int64_t> worker_lost(int worker);
  // The committed results of `step`, and the step marks started: its pending requests expire, its in-flight ones
  // will be late.
  std::vector<ExploreResult> take(int64_t step);
  // Nothing pending or in flight for `step`.
  bool step_done(int64_t step) const;
  // Blocks until step_done(step) or the timeout; returns step_done(step).
  bool wait_step_done(int64_t step, double timeout_s) const;
  // The committed results of steps > started (for a checkpoint), and back.
  std::vector<ExploreResult> committed_ahead() const;
  void restore_committed(std::vector<ExploreResult> r);
  QueueCounters counters() const;
  bool has_pending() const;
  std::optional<int64_t> held_by(int worker) const;  // the request id `worker` holds
  double now() const;                                // seconds since the queue was made

 private:
  bool step_done_locked(int64_t step) const;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::chrono::steady_clock::time_point t0_;
  int64_t tries_;
  int64_t next_id_ = 0, started_ = -1;
  std::deque<ExploreRequest> pending_;
  std::map<int64_t, std::pair<int, ExploreRequest>> in_flight_;  // id -> (worker, request)
  std::map<int64_t, std::vector<ExploreResult>> results_;        // step -> committed
  QueueCounters n_;
};

}  // namespace temper::spotlight
