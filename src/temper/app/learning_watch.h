// Says it when RL cannot learn, from the step metrics: no learning signal (every group's samples got the same
// reward, so every advantage is 0) or completions cut at rl.max_new, each for several steps in a row; once per
// stretch, with the remedies; and a [[reward]] term that gives every sample of a step the same value (its
// reward/<name>/std is 0), which adds nothing to the advantages.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "temper/rl/method.h"

namespace temper::app {

class LearningWatch {
 public:
  // max_new: rl.max_new (named in the truncation warning); after: consecutive steps before a warning.
  explicit LearningWatch(int64_t max_new, int64_t after = 3) : max_new_(max_new), after_(after) {}
  // One RL step's metrics (rl_step: 1-based within RL); returns the warnings to print (usually none).
  std::vector<std::string> observe(int64_t rl_step, const rl::Metrics& m);

 private:
  struct Streak {
    int64_t first = 0, length = 0;
    bool warned = false;
  };
  static bool advance(Streak& s, bool on, int64_t step, int64_t after);  // true: warn now
  int64_t max_new_, after_;
  Streak flat_, truncated_;
  std::map<std::string, Streak> constant_terms_;  // by term name
};

}  // namespace temper::app
