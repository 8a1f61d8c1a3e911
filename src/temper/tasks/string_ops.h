// Procedural task "string_ops": a string put through a pipeline of atomic operations, for SFT -> RL
// compositional generalisation (train on shallow pipelines, evaluate deeper ones: eval_min_depth/eval_max_depth).
// Prompt "abcde|rev|rotl=" applies ops left to right; gold writes each intermediate string, "op=string":
// "rev=edcba\nrotl=dcbae\n#### dcbae". Difficulty = depth. The ops and how pipelines are drawn: above
// StringOpsTask.
#pragma once

#include <string>
#include <vector>

#include "temper/tasks/task.h"

namespace temper::tasks {

struct StringOpsConfig {
  uint64_t seed = 0;
  int min_depth = 1, max_depth = 3;              // train split
  int eval_min_depth = -1, eval_max_depth = -1;  // eval split; -1: same as train
  int min_len = 3, max_len = 6;                  // input length, train split
  int eval_min_len = -1, eval_max_len = -1;      // eval split; -1: same as train
  std::vector<std::string> ops = {"rev", "rotl", "rotr", "swap", "shift", "drop", "dup"};  // param: comma list
  std::string alphabet = "abcdefghijklmnopqrstuvwxyz";  // printable ASCII, distinct, none of space | = #
  void validate() const;
  static StringOpsConfig from_params(const TaskParams& params);  // keys as the fields
};

// Ops: rev (reverse), rotl ("abcd"->"bcda"), rotr ("abcd"->"dabc"), swap (swap adjacent pairs,
// "abcde"->"badce"), shift (each char to the next in the alphabet, cyclic), drop (remove the first char), dup
// (append a copy of the last char). Each step changes the string and never undoes the step before (ops giving
// the current or the previous string are not drawn, so "rev|rev" or "rotl|rotr" never occur); the string never
// becomes empty.
class StringOpsTask : public Task {
 public:
  explicit StringOpsTask(StringOpsConfig cfg);
  std::string name() const override { return "string_ops"; }
  int64_t size(Split) const override { return -1; }
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  // The string after each step line "op=string" whose op is a known op name.
  std::vector<std::string> intermediate_states(const Problem& p, const std::string& completion) const override;
  const StringOpsConfig& config() const { return cfg_; }

 private:
  StringOpsConfig cfg_;
};

// The names of every op, and one op applied to s (alphabet for shift); throws on an unknown name.
const std::vector<std::string>& string_ops_all();
std::string string_op_apply(std::string_view op, const std::string& s, const std::string& alphabet);

}  // namespace temper::tasks
