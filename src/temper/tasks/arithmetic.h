// Procedural task "arithmetic": multi-step integer expressions over + - * / with precedence, e.g. prompt
// "12+7*3=", gold "7*3=21\n12+21=33\n#### 33" (one operation per line: leftmost * or / first, then leftmost
// + or -). Division only where exact. Operands are in [0, max_operand]; intermediate values may be negative.
// Difficulty = number of operations. Optional "check" lines after the last step (check_lines) give SFT data
// that keeps writing after the answer. Leaves out parentheses and unary minus in prompts.
#pragma once

#include <string>

#include "temper/tasks/task.h"

namespace temper::tasks {

struct ArithmeticConfig {
  uint64_t seed = 0;
  int min_ops = 1, max_ops = 3;            // train split
  int eval_min_ops = -1, eval_max_ops = -1;  // eval split; -1: same as train
  int64_t max_operand = 20;
  std::string ops = "+-*";  // any non-empty subset of "+-*/"
  // Gold solutions append 0..check_lines (uniform) lines "check <an earlier step>" after the last step:
  // redundant work after the answer has appeared (the overthinking setting of the DRE experiment).
  int check_lines = 0;
  void validate() const;
  static ArithmeticConfig from_params(const TaskParams& params);  // keys as the fields
};

class ArithmeticTask : public Task {
 public:
  explicit ArithmeticTask(ArithmeticConfig cfg);
  std::string name() const override { return "arithmetic"; }
  int64_t size(Split) const override { return -1; }
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  // The value after each step line "a op b=c" (the c the completion wrote), as a decimal integer.
  std::vector<std::string> intermediate_states(const Problem& p, const std::string& completion) const override;
  const ArithmeticConfig& config() const { return cfg_; }

 private:
  ArithmeticConfig cfg_;
};

}  // namespace temper::tasks
