// Per-sequence advantages from scalar rewards of prompt groups: GRPO (Shao et al. 2024, DeepSeekMath),
// Dr.GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training": no division by the std), RLOO
// (Ahmadian et al. 2024: leave-one-out baseline); the DAPO dynamic-sampling filter (Yu et al. 2025) and
// the broadcast of a sequence's advantage to its tokens. The std convention is TRL GRPOTrainer's
// exactly: unbiased (N-1) standard deviation, A = (r - mean_g) / (std + 1e-4). Token-level estimators
// (GraphPO, RCSD) live with their methods.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/core/settings.h"

namespace temper::rl {

enum class AdvantageEstimator {
  grpo,     // A = (r - mean_g) / (std + eps), std as `scale` says
  dr_grpo,  // A = r - mean_g (Dr.GRPO; `scale` is ignored)
  rloo,     // A = r - mean of the other members = G/(G-1) (r - mean_g); divided by std + eps unless scale none
};

inline constexpr EnumNames<AdvantageEstimator, 3> kAdvantageEstimatorNames{
    {{AdvantageEstimator::grpo, "grpo"}, {AdvantageEstimator::dr_grpo, "dr_grpo"}, {AdvantageEstimator::rloo, "rloo"}}};

// TRL's `scale_rewards` (TRL >= 0.22 strings; TRL 0.19's bool True = group, False = none).
enum class RewardScale {
  group,  // std of the sequence's group (unbiased)
  batch,  // std of all rewards in the batch (unbiased); the mean stays the group's
  batch_active,  // ZPPO: std of the group-centred rewards over the groups whose rewards differ (groups with
                 // equal rewards have advantage 0 and would shrink a whole-batch std and inflate the rest)
  none,   // no division
};

inline constexpr EnumNames<RewardScale, 4> kRewardScaleNames{{{RewardScale::group, "group"},
                                                              {RewardScale::batch, "batch"},
                                                              {RewardScale::batch_active, "batch_active"},
                                                              {RewardScale::none, "none"}}};

struct AdvantageConfig {
  AdvantageEstimator estimator = AdvantageEstimator::grpo;
  RewardScale scale = RewardScale::group;
  double eps = 1e-4;  // added to the std (TRL)
  void validate() const;
  void visit(KeyVisitor& v);  // in [rl]; scale_rewards defaults to none for the estimators other than grpo
};

// rewards [B], group [B] (any ids, members need not be adjacent) -> advantages [B].
// A group of one sequence gets advantage 0 (its std and leave-one-out baseline are undefined; TRL
// >= 0.22 uses std 0 there, which gives 0 as well).
// stratum [B] (optional; members of a group share one): the batch-level scales (batch, batch_active) take
// their std over the sequences of the same stratum only, so groups rewarded on different scales (fair RL's
// preferences) do not set each other's step size. Null: one stratum, the whole batch.
void compute_advantages(const AdvantageConfig& cfg, const float* rewards, const int64_t* group, int64_t B,
                        float* advantages, const int64_t* stratum = nullptr);

struct GroupRewardStats {
  int64_t group = 0;  // the id
  int64_t size = 0;
  double mean = 0;
  double std = 0;        // unbiased; 0 for a group of one
  bool uniform = false;  // max - min <= tol: every member has the same reward
};

// One entry per distinct group id, in order of first appearance.
std::vector<GroupRewardStats> group_reward_stats(const float* rewards, const int64_t* group, int64_t B,
                                                 double tol = 0.0);

// flags[b] = 1 when every reward in b's group is equal within tol (DAPO dynamic sampling drops those
// groups: they carry no GRPO gradient), else 0. Returns how many sequences were flagged.
int64_t flag_uniform_groups(const float* rewards, const int64_t* group, int64_t B, uint8_t* flags,
                            double tol = 0.0);

// out[b, t] = seq_values[b] * mask[b, t] (mask null: 1), out [B, T] row-major.
void expand_to_tokens(const float* seq_values, const float* mask, int64_t B, int64_t T, float* out);

}  // namespace temper::rl
