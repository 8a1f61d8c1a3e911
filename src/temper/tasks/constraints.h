// Procedural task "constraints": a small constraint-satisfaction problem over integer variables with a
// unique solution, e.g. prompt "a+b=9,a-c=2,b<c?" with gold "a=5\nb=4\nc=3\n#### 5,4,3". Variables are
// a, b, c, ... (min_vars..max_vars), each in [0, max_value]; constraints relate two variables: "x+y=k",
// "x-y=k", "x<y" and "x!=y" (the kinds in `kinds`, a subset of "+-<!"). Difficulty = the number of
// variables. A family for revision (REVES) and held-out evaluation beside arithmetic.
#pragma once

#include <string>

#include "temper/tasks/task.h"

namespace temper::tasks {

struct ConstraintsConfig {
  uint64_t seed = 0;
  int min_vars = 2, max_vars = 3;              // train split
  int eval_min_vars = -1, eval_max_vars = -1;  // eval split; -1: same as train
  int max_value = 9;
  std::string kinds = "+-<!";
  void validate() const;
  static ConstraintsConfig from_params(const TaskParams& params);  // keys as the fields
};

// Constraints true under a hidden assignment are added until brute force over the whole domain finds
// exactly one solution, so the answer (the values in variable order, comma-separated) is unique and
// checked exactly.
class ConstraintsTask : public Task {
 public:
  explicit ConstraintsTask(ConstraintsConfig cfg);
  std::string name() const override { return "constraints"; }
  bool has_reasoning_states() const override { return false; }
  int64_t size(Split) const override { return -1; }
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  const ConstraintsConfig& config() const { return cfg_; }

 private:
  ConstraintsConfig cfg_;
};

}  // namespace temper::tasks
