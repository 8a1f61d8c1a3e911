// Procedural task "countdown": reach a target from given numbers with + - * / (exact integer division), each
// number used at most once. Prompt "3 7 25 5 -> 83:" lists the numbers in random order, then the target.
// Gold writes one step per line ("a op b=c", larger operand first) and ends with the whole expression:
// "25-5=20\n20*4=80\n80+3=83\n#### (25-5)*4+3". The verifier's rules and the generator: above CountdownTask.
// Difficulty = steps of the generating expression. Leaves out "closest wins" partial credit.
#pragma once

#include <string>

#include "temper/tasks/task.h"

namespace temper::tasks {

struct CountdownConfig {
  uint64_t seed = 0;
  int numbers = 4;             // numbers given per problem
  int64_t max_number = 25;     // numbers are in [1, max_number]
  int64_t max_target = 100;    // target in [1, max_target], never one of the given numbers
  int min_steps = 1, max_steps = -1;            // train split; max_steps -1: numbers - 1
  int eval_min_steps = -1, eval_max_steps = -1;  // eval split; -1: same as train
  std::string ops = "+-*/";
  void validate() const;
  static CountdownConfig from_params(const TaskParams& params);  // keys as the fields
};

// The verifier reads "#### <expr>" or "#### <expr>=<target>"; <expr> has non-negative integer literals,
// + - * /, parentheses and spaces; every literal must be one of the given numbers (as often as given at most),
// every division exact, only the configured ops used, and the value equal to the target. Problems are generated
// from a random expression over steps+1 of the numbers (the others are distractors; every gold step feeds the
// next), so each is solvable; the target is never one of the numbers.
class CountdownTask : public Task {
 public:
  explicit CountdownTask(CountdownConfig cfg);
  std::string name() const override { return "countdown"; }
  int64_t size(Split) const override { return -1; }
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  // After each step line "a op b=c": the multiset of numbers still available (a and b removed, c added),
  // ascending and space-separated, e.g. "3 7 20". Stops at a step that uses a number not available.
  std::vector<std::string> intermediate_states(const Problem& p, const std::string& completion) const override;
  const CountdownConfig& config() const { return cfg_; }

 private:
  CountdownConfig cfg_;
};

// Parsed "3 7 25 5 -> 83:" prompt (numbers, target); nullopt if malformed.
std::optional<std::pair<std::vector<int64_t>, int64_t>> countdown_parse_prompt(std::string_view prompt);
// Value of a countdown expression under the rules above; nullopt if invalid.
std::optional<int64_t> countdown_eval(std::string_view expr, const std::vector<int64_t>& numbers,
                                      std::string_view allowed_ops = "+-*/");

}  // namespace temper::tasks
