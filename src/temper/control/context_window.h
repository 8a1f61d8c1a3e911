// The recent transitions of each env in the current episode, newest first: W slots of (0.25 p, v, reward,
// valid), empty slots zero (valid = 0). It is the context the encoder infers the task mode from and the context
// the from-scratch baseline policy conditions on (the RL^2-style input, cut to a window). Leaves out: context
// carried across episodes (every episode is a fresh task).
#pragma once

#include <cstdint>
#include <vector>

namespace temper::control {

class ContextWindow {
 public:
  static constexpr int64_t kItem = 6;
  ContextWindow(int64_t n, int64_t window);
  int64_t size() const { return n_; }
  int64_t window() const { return w_; }
  int64_t dim() const { return w_ * kItem; }
  void clear();
  // abstract [N, 5] (ControlEnv::observe_abstract after the step), reward [N]
  void push(const float* abstract, const float* reward);
  const float* features() const { return buf_.data(); }  // [N, dim()]
  std::vector<float>& state() { return buf_; }

 private:
  int64_t n_, w_;
  std::vector<float> buf_;
};

}  // namespace temper::control
