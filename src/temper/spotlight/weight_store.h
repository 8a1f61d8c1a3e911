// Numbered snapshots of one flat parameter vector (Spotlight, spec methods-other section 3): the trainer's
// current version and at most max_staleness older ones, so explorers can be sent the weights one version behind
// the trainer's (theta_{k-1} while theta_k trains) straight from memory. Version v = the parameters after v
// optimiser updates. Leaves out transport (explorer_pool.h ships a version over a socket).
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

namespace temper::spotlight {

class WeightStore {
 public:
  explicit WeightStore(int64_t max_staleness = 1);
  int64_t max_staleness() const { return max_staleness_; }
  // Adds version `version` (a copy of params): the first push may carry any version >= 0, later ones
  // current() + 1. Versions older than current() - max_staleness are dropped.
  void push(int64_t version, std::span<const float> params);
  bool empty() const { return held_.empty(); }
  int64_t current() const;  // -1 when empty
  int64_t oldest() const;   // -1 when empty
  bool has(int64_t version) const;
  const std::vector<float>& get(int64_t version) const;  // throws naming the versions held
  // The version explorers use: current() - max_staleness, or the oldest held (early in a run).
  int64_t explorer_version() const;

 private:
  int64_t max_staleness_;
  std::deque<std::pair<int64_t, std::vector<float>>> held_;  // oldest first
};

}  // namespace temper::spotlight
