// Procedural task "compose": the compositional-generalisation benchmark of the SFT -> RL curriculum
// (Kong et al., ICML 2026; spec methods-other section 5, CPU miniature). A problem is a string put
// through L steps, each an atomic skill applied through a routing; reward = exact match of the final
// string. Compositions of depth L are assigned by a stable hash to the SFT support, the RL set or the
// unseen test. Difficulty = depth. The skills, routings, format and sets: above ComposeTask.
#pragma once

#include <string>
#include <vector>

#include "temper/tasks/task.h"

namespace temper::tasks {

struct ComposeConfig {
  uint64_t seed = 0;        // inputs and compositions drawn
  uint64_t split_seed = 0;  // the assignment of compositions to sets
  int depth = 3, deep_depth = 4;
  int min_len = 4, max_len = 6, cap = 12;
  std::vector<std::string> skills = {"rev", "rotl", "swap", "repl", "dupf", "dropl", "sort", "shift"};
  std::vector<std::string> routings = {"prev", "orig", "cat", "half"};
  std::string alphabet = "abcdef";
  double sft_share = 0.5, rl_share = 0.3;
  std::string holdout;  // a skill kept out of the SFT support ("" = none)
  std::string train_set = "all", eval_set = "unseen";
  void validate() const;
  static ComposeConfig from_params(const TaskParams& params);  // keys as the fields; skills/routings: comma lists
};

// A problem is a string put through L steps, each an atomic skill applied through a routing:
//   skills   rev (reverse), rotl (rotate left), swap (swap adjacent pairs), repl (first alphabet letter
//            -> second), dupf (duplicate the first char), dropl (drop the last char, never the only
//            one), sort (ascending), shift (each char to the next alphabet letter, cyclic)
//   routings prev (the previous result), orig (the original input), cat (the result before the
//            previous one, or the input, followed by the previous result), half (the skill on the
//            first half of the previous result, the second half kept)
// Every result is cut to `cap` characters. Prompt "abcd|rev:prev|sort:orig|swap:cat="; the gold trace
// writes each intermediate, "rev:prev=dcba\nsort:orig=abcd\nswap:cat=cdab\n#### cdab"; reward = exact
// match of the final string.
// Compositions of depth L are assigned to sets by a stable hash of their sequence of (skill, routing):
// SFT support (sft_share), RL set (rl_share), unseen test (the rest). A `holdout` skill never enters
// the SFT support (its compositions go to the RL set or the test). Sets of problems:
//   train_set: sft | rl | atomic (depth 1, no held-out skill) | all (any depth-L composition)
//   eval_set:  seen (SFT support) | unseen (test compositions without the held-out skill) |
//              deeper (depth deep_depth, no held-out skill) | holdout (test compositions with it) | atomic | rl
// Train and eval problems never coincide (split_of on the prompt).
class ComposeTask : public Task {
 public:
  explicit ComposeTask(ComposeConfig cfg);
  std::string name() const override { return "compose"; }
  int64_t size(Split) const override { return -1; }
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  std::vector<std::string> intermediate_states(const Problem& p, const std::string& completion) const override;
  std::vector<std::string> module_inventory() const override;  // the skills, then "route:" + each routing
  const ComposeConfig& config() const { return cfg_; }
  // The set a composition "s1:r1|s2:r2|..." of depth `depth` belongs to: "sft", "rl" or "test".
  std::string set_of(const std::string& composition) const;

 private:
  ComposeConfig cfg_;
};

// The states after each step of a composition ((skill, routing) pairs) on input x, each cut to cfg.cap.
std::vector<std::string> compose_states(const std::string& x, const std::vector<std::pair<std::string, std::string>>& steps,
                                        const ComposeConfig& cfg);
// One skill on s (rev, rotl, swap and shift are string_ops' ops); throws on an unknown name.
std::string compose_skill(std::string_view skill, const std::string& s, const std::string& alphabet);
const std::vector<std::string>& compose_skills_all();
const std::vector<std::string>& compose_routings_all();

}  // namespace temper::tasks
