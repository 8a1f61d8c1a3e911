// A [[reward]] term with `program = [...]`: the trainer's samples as the reward protocol's items
// (reward/program_reward.h) — id, the question (prompt, and messages when the row has them), the completion,
// the answer, the rubric and the dataset row with every column — scored by the program's workers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "temper/rl/reward_set.h"

namespace temper::rl {

// One item of the protocol: a JSON object's text.
std::string reward_item_json(const RewardQuery& q);

// `env`: "KEY=value" for the workers (TEMPER_BIN: the temper binary, for the helper's run_sandboxed).
std::unique_ptr<RewardTerm> make_program_term(const RewardTermConfig& c, const std::vector<std::string>& env);

}  // namespace temper::rl
