// Two threads of one process that compute at once (rl.async: the explorer and the trainer) split the cores: each its
// share while both work, and one works with both shares while the other waits (work-conserving: an explorer done with
// its batch lends its cores to the trainer's update; a trainer waiting for a batch lends its cores to the rollout).
// Each side's thread follows its count through a moving ThreadLimit (core/thread_pool.h); results never depend on it.
// Leaves out more than two sides and cores bound to sides (the OS places the threads).
#pragma once

#include <atomic>
#include <mutex>

namespace temper {

class CoreSplit {
 public:
  // The sides' shares while both work (each >= 1). Both start working.
  CoreSplit(int first, int second);
  CoreSplit(const CoreSplit&) = delete;
  CoreSplit& operator=(const CoreSplit&) = delete;

  // Side 0 or 1 works (takes its share back) or waits (lends its share to the other side).
  void set_working(int side, bool working);
  // The threads side's work uses now: its share, plus the other's while the other waits. A ThreadLimit follows it.
  const std::atomic<int>& threads(int side) const;

  // Side `side` waits while this lives.
  class Waiting {
   public:
    Waiting(CoreSplit& split, int side) : split_(split), side_(side) { split_.set_working(side_, false); }
    ~Waiting() { split_.set_working(side_, true); }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    CoreSplit& split_;
    int side_;
  };

 private:
  std::mutex mu_;  // one update at a time: both counts follow the same two states
  int share_[2];
  bool working_[2] = {true, true};
  std::atomic<int> threads_[2];
};

}  // namespace temper
