// The SFT -> RL compositional curriculum (spec methods-other section 5): SFT on compound traces that
// cover every atomic module of a compositional task, then RL on compositions outside the SFT
// support, with the SFT:RL budget given as a ratio (default 4:1) of prompts or of optimiser steps.
// The task provides the sets (task param train_set: the SFT stage draws from `sft_set`, RL from `rl_set`)
// and names each problem's modules (Problem::modules, Task::module_inventory), so the coverage of the SFT
// stage is counted before training: task `compose`, or a `dataset` whose rows declare `modules` (and `set`).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/tasks/task.h"

namespace temper::rl {

enum class BudgetUnit { prompts, steps };  // prompts, or optimiser steps
inline constexpr EnumNames<BudgetUnit, 2> kBudgetUnitNames{
    {{BudgetUnit::prompts, "prompts"}, {BudgetUnit::steps, "steps"}}};

struct CurriculumConfig {
  int64_t sft_parts = 4, rl_parts = 1;  // ratio SFT:RL
  BudgetUnit budget = BudgetUnit::prompts;
  int64_t total = 0;  // prompts or optimiser steps of both stages together
  std::string sft_set = "sft", rl_set = "rl";
  bool require_coverage = true;  // a module the SFT stage never shows is an error
  void validate() const;
  void visit(KeyVisitor& v);                                                                // [curriculum]
  static void parse_ratio(const std::string& text, int64_t& sft_parts, int64_t& rl_parts);  // "4:1"
};

struct CurriculumPlan {
  int64_t sft_steps = 0, rl_steps = 0;      // trainer steps of each stage
  int64_t sft_prompts = 0, rl_prompts = 0;  // prompts each stage draws
  int64_t sft_updates = 0, rl_updates = 0;  // optimiser steps of each stage
  std::string describe() const;
};

// Split the budget into whole steps (nearest; at least one for a stage with a share; RL takes what the
// SFT stage's whole steps leave). sft_batch: prompts per SFT step (one optimiser step each); rl_prompts: prompts per
// RL step; rl_updates_per_step: optimiser steps per RL step (epochs x mini-batches).
CurriculumPlan plan_curriculum(const CurriculumConfig& c, int64_t sft_batch, int64_t rl_prompts,
                               int64_t rl_updates_per_step);

struct Coverage {
  int64_t problems = 0;
  std::map<std::string, int64_t> count;  // module -> problems that use it (every inventory module listed)
  std::vector<std::string> missing;      // inventory modules no problem uses
  std::string describe() const;
};

// The modules of the first n training problems of `task` (those an SFT stage of n prompts draws).
Coverage count_coverage(const tasks::Task& task, int64_t n);

}  // namespace temper::rl
