// Group-relative advantages; see advantages.h. Sums in double, two passes (mean, then squared
// deviations) as torch.std does.
#include "temper/rl/advantages.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "temper/core/error.h"

namespace temper::rl {

void AdvantageConfig::visit(KeyVisitor& v) {
  v("advantage", estimator, "advantage estimator: grpo, dr_grpo (no std division), rloo (leave-one-out baseline)",
    kAdvantageEstimatorNames);
  if (estimator != AdvantageEstimator::grpo) scale = RewardScale::none;  // the default of the other estimators
  v("scale_rewards", scale,
    "the std rewards are divided by: group, batch, batch_active (ZPPO: over the groups whose rewards differ), none "
    "(default group with grpo, else none)",
    kRewardScaleNames);
  v("advantage_eps", eps, "added to the std before dividing (TRL's epsilon)");
}

void AdvantageConfig::validate() const {
  TEMPER_CHECK(std::isfinite(eps) && eps >= 0) << "advantage eps must be finite and >= 0, got " << eps;
}

namespace {

// Dense index of each sequence's group (order of first appearance) and the number of groups.
int64_t group_index(const int64_t* group, int64_t B, std::vector<int64_t>& idx, std::vector<int64_t>& ids) {
  std::unordered_map<int64_t, int64_t> slot;
  idx.resize(static_cast<size_t>(B));
  ids.clear();
  for (int64_t b = 0; b < B; ++b) {
    auto [it, fresh] = slot.emplace(group[b], static_cast<int64_t>(ids.size()));
    if (fresh) ids.push_back(group[b]);
    idx[static_cast<size_t>(b)] = it->second;
  }
  return static_cast<int64_t>(ids.size());
}

double unbiased_std(double sum_sq_dev, int64_t n) { return n > 1 ? std::sqrt(sum_sq_dev / static_cast<double>(n - 1)) : 0.0; }

}  // namespace

std::vector<GroupRewardStats> group_reward_stats(const float* rewards, const int64_t* group, int64_t B, double tol) {
  TEMPER_CHECK(B >= 0) << "batch size must be >= 0, got " << B;
  std::vector<int64_t> idx, ids;
  int64_t ng = group_index(group, B, idx, ids);
  std::vector<GroupRewardStats> st(static_cast<size_t>(ng));
  std::vector<double> lo(static_cast<size_t>(ng), INFINITY), hi(static_cast<size_t>(ng), -INFINITY), ss(st.size(), 0.0);
  for (int64_t g = 0; g < ng; ++g) st[static_cast<size_t>(g)].group = ids[static_cast<size_t>(g)];
  for (int64_t b = 0; b < B; ++b) {
    size_t g = static_cast<size_t>(idx[static_cast<size_t>(b)]);
    double r = rewards[b];
    TEMPER_CHECK(std::isfinite(r)) << "reward of sequence " << b << " is not finite (" << r << ")";
    st[g].size += 1;
    st[g].mean += r;
    lo[g] = std::min(lo[g], r);
    hi[g] = std::max(hi[g], r);
  }
  for (auto& s : st) s.mean /= static_cast<double>(s.size);
  for (int64_t b = 0; b < B; ++b) {
    size_t g = static_cast<size_t>(idx[static_cast<size_t>(b)]);
    double d = rewards[b] - st[g].mean;
    ss[g] += d * d;
  }
  for (size_t g = 0; g < st.size(); ++g) {
    st[g].std = unbiased_std(ss[g], st[g].size);
    st[g].uniform = hi[g] - lo[g] <= tol;
  }
  return st;
}

void compute_advantages(const AdvantageConfig& cfg, const float* rewards, const int64_t* group, int64_t B,
                        float* advantages, const int64_t* stratum) {
  cfg.validate();
  if (B == 0) return;
  std::vector<int64_t> idx, ids;
  group_index(group, B, idx, ids);
  std::vector<GroupRewardStats> st = group_reward_stats(rewards, group, B);

  // The batch-level std of each stratum (one stratum, 0, without `stratum`).
  std::map<int64_t, double> stratum_std;
  auto in = [&](int64_t b, int64_t s) { return (stratum ? stratum[b] : 0) == s; };
  std::set<int64_t> strata;
  for (int64_t b = 0; b < B; ++b) strata.insert(stratum ? stratum[b] : 0);
  for (int64_t s : strata) {
    double ss = 0;
    int64_t n = 0;
    if (cfg.scale == RewardScale::batch) {
      double mean = 0;
      for (int64_t b = 0; b < B; ++b)
        if (in(b, s)) mean += rewards[b], ++n;
      mean /= static_cast<double>(n);
      for (int64_t b = 0; b < B; ++b)
        if (in(b, s)) ss += (rewards[b] - mean) * (rewards[b] - mean);
    } else if (cfg.scale == RewardScale::batch_active) {
      for (int64_t b = 0; b < B; ++b) {
        const GroupRewardStats& g = st[static_cast<size_t>(idx[static_cast<size_t>(b)])];
        if (!in(b, s) || g.uniform || g.size < 2) continue;
        double d = rewards[b] - g.mean;  // group-centred: the mean over active groups is 0
        ss += d * d;
        ++n;
      }
    }
    stratum_std[s] = unbiased_std(ss, n);
  }
  bool scaled = cfg.estimator != AdvantageEstimator::dr_grpo && cfg.scale != RewardScale::none;
  for (int64_t b = 0; b < B; ++b) {
    const GroupRewardStats& g = st[static_cast<size_t>(idx[static_cast<size_t>(b)])];
    if (g.size < 2) {
      advantages[b] = 0.f;
      continue;
    }
    double n = static_cast<double>(g.size);
    double a = static_cast<double>(rewards[b]) - g.mean;
    if (cfg.estimator == AdvantageEstimator::rloo) a *= n / (n - 1.0);  // r - (sum - r) / (n - 1)
    bool batch = cfg.scale == RewardScale::batch || cfg.scale == RewardScale::batch_active;
    if (scaled) a /= (batch ? stratum_std[stratum ? stratum[b] : 0] : g.std) + cfg.eps;
    advantages[b] = static_cast<float>(a);
  }
}

int64_t flag_uniform_groups(const float* rewards, const int64_t* group, int64_t B, uint8_t* flags, double tol) {
  std::vector<int64_t> idx, ids;
  group_index(group, B, idx, ids);
  std::vector<GroupRewardStats> st = group_reward_stats(rewards, group, B, tol);
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b) {
    bool u = st[static_cast<size_t>(idx[static_cast<size_t>(b)])].uniform;
    flags[b] = u ? 1 : 0;
    n += u;
  }
  return n;
}

void expand_to_tokens(const float* seq_values, const float* mask, int64_t B, int64_t T, float* out) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) out[b * T + t] = mask ? seq_values[b] * mask[b * T + t] : seq_values[b];
}

}  // namespace temper::rl
