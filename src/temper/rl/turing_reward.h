// The Turing reward of a user-simulator completion (spec methods-other section 2, steps 3a-3g; Wang et
// al. 2026): the generated reply and the real one go to a pairwise judge in an order fixed by a hash
// (generated is B iff the SHA-256 of "<problem id>|<reply>" is even), the judge's 1..7 rating becomes
// s (7: the generated reply is surely the human's), and the reward R is s shaped with a format bonus
// and a length penalty (the formula: above TuringRewardConfig).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "temper/core/settings.h"
#include "temper/rl/pairwise_judge.h"
#include "temper/tasks/task.h"

namespace temper::rl {

// The reward:
//   R = max(0, scale x (min(s, cap) - 1) / 6 + format - length_penalty)
// with format = +0.05 for exactly one well-formed reasoning block, +0.05 for exactly one "[HUMAN]:" and no
// reasoning after it; R = 0 when the reasoning holds no alphabetic character (or the reply is empty);
// length_penalty = min(cap, max(0.8 - rho, 0) / 0.8 x 0.35 + max(rho - 1.1, 0) / 1.1 x 0.15) with rho the
// generated reply's word count over the real one's.
struct TuringRewardConfig {
  double scale = 0.9;
  int64_t cap = 5;               // ratings above count as the cap: no reward for "more human than likely"
  double format_bonus = 0.05;    // each of the two format checks
  bool reasoning = true;         // the format has a reasoning block (false: no hard zero, no reasoning bonus)
  double short_ratio = 0.8, short_weight = 0.35;
  double long_ratio = 1.1, long_weight = 0.15;
  double length_cap = 0.25;
  void validate() const;
  void visit(KeyVisitor& v);  // scale, cap, format_bonus, reasoning
};

// Whether the generated reply is shown as B: SHA-256("<key>|<reply>") taken as a big-endian integer is even.
bool generated_is_b(std::string_view key, std::string_view reply);
// s from the judge's rating of (A, B): rating if the generated reply is B, else 8 - rating.
int turing_score(int rating, bool generated_b);
double length_penalty(int64_t generated_words, int64_t real_words, const TuringRewardConfig& cfg);

struct TuringReward {
  bool hard_zero = false;
  bool generated_b = false;
  int rating = 0, s = 0;  // 0: the judge was not asked (hard zero)
  double turing = 0, format = 0, length = 0, total = 0;
};

// The reward of `completion` for problem p (the real reply is p.answer).
TuringReward turing_reward(PairwiseJudge& judge, const tasks::Problem& p, const std::string& completion, const TuringRewardConfig& cfg);
// The same for many completions (problems[i] with completions[i]), the judge asked for every pair at once
// (PairwiseJudge::rate_all: one batch for a model judge).
std::vector<TuringReward> turing_rewards(PairwiseJudge& judge, const std::vector<const tasks::Problem*>& problems,
                                         const std::vector<const std::string*>& completions,
                                         const TuringRewardConfig& cfg);

}  // namespace temper::rl
