// Advantage estimators: GRPO / Dr.GRPO / RLOO by hand, group ids in any order, scale options,
// groups of one, the all-equal (DAPO) flags and the token broadcast. TRL agreement is in
// test_policy_loss.cpp (golden).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "temper/core/error.h"
#include "temper/rl/advantages.h"

using namespace temper::rl;

namespace {

std::vector<float> advantages(const AdvantageConfig& cfg, const std::vector<float>& r, const std::vector<int64_t>& g) {
  std::vector<float> a(r.size(), -99.f);
  compute_advantages(cfg, r.data(), g.data(), static_cast<int64_t>(r.size()), a.data());
  return a;
}

double ustd(const std::vector<double>& x) {
  double m = 0, s = 0;
  for (double v : x) m += v;
  m /= static_cast<double>(x.size());
  for (double v : x) s += (v - m) * (v - m);
  return std::sqrt(s / static_cast<double>(x.size() - 1));
}

}  // namespace

TEST(Advantages, GrpoGroupStdIsUnbiasedPlusEps) {
  // Two interleaved groups: ids need not be adjacent.
  std::vector<float> r = {1, 0, 0, 3, 1, 5, 0, 1};
  std::vector<int64_t> g = {7, 2, 7, 2, 7, 2, 7, 2};
  auto a = advantages({}, r, g);
  std::vector<double> g7 = {1, 0, 1, 0}, g2 = {0, 3, 5, 1};
  double m7 = 0.5, s7 = ustd(g7), m2 = 2.25, s2 = ustd(g2);
  for (size_t i = 0; i < r.size(); ++i) {
    double want = g[i] == 7 ? (r[i] - m7) / (s7 + 1e-4) : (r[i] - m2) / (s2 + 1e-4);
    EXPECT_NEAR(a[i], want, 1e-6 * std::fabs(want) + 1e-7) << i;
  }
}

TEST(Advantages, DrGrpoIsCenteredOnlyAndIgnoresScale) {
  std::vector<float> r = {1, 0, 0, 0, 2, 2.5f};
  std::vector<int64_t> g = {0, 0, 0, 0, 1, 1};
  for (RewardScale s : {RewardScale::group, RewardScale::batch, RewardScale::none}) {
    auto a = advantages({AdvantageEstimator::dr_grpo, s}, r, g);
    std::vector<double> want = {0.75, -0.25, -0.25, -0.25, -0.25, 0.25};
    for (size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(a[i], want[i], 1e-7) << i;
    // GRPO with scale none is the same estimator.
    EXPECT_EQ(a, advantages({AdvantageEstimator::grpo, RewardScale::none}, r, g));
  }
}

TEST(Advantages, BatchScaleUsesTheStdOfAllRewardsAndTheGroupMean) {
  std::vector<float> r = {1, 0, 0, 3, 1, 5};
  std::vector<int64_t> g = {0, 0, 0, 1, 1, 1};
  auto a = advantages({AdvantageEstimator::grpo, RewardScale::batch}, r, g);
  double s = ustd({1, 0, 0, 3, 1, 5});
  std::vector<double> mean = {1 / 3., 1 / 3., 1 / 3., 3, 3, 3};
  for (size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(a[i], (r[i] - mean[i]) / (s + 1e-4), 1e-6) << i;
}

TEST(Advantages, StrataTakeTheBatchStdOverTheirOwnSequencesOnly) {
  // Fair RL: strata 7 (groups 0, 1: rewards on a large scale) and 3 (group 2: a small one).
  std::vector<float> r = {1, 0, 0, 3, 1, 5, 0.1f, 0.2f, 0.4f};
  std::vector<int64_t> g = {0, 0, 0, 1, 1, 1, 2, 2, 2};
  std::vector<int64_t> s = {7, 7, 7, 7, 7, 7, 3, 3, 3};
  std::vector<float> a(r.size());
  compute_advantages({AdvantageEstimator::grpo, RewardScale::batch}, r.data(), g.data(), 9, a.data(), s.data());
  const double s7 = ustd({1, 0, 0, 3, 1, 5}), s3 = ustd({0.1f, 0.2f, 0.4f});
  std::vector<double> want = {(1 - 1 / 3.) / s7, -1 / 3. / s7, -1 / 3. / s7, 0, -2 / s7, 2 / s7, 0, 0, 0};
  const double m2 = (0.1f + 0.2f + 0.4f) / 3.0;
  for (int i = 6; i < 9; ++i) want[static_cast<size_t>(i)] = (r[static_cast<size_t>(i)] - m2) / s3;
  for (size_t i = 0; i < r.size(); ++i) {
    const double sd = i < 6 ? s7 : s3;
    EXPECT_NEAR(a[i], want[i] * sd / (sd + 1e-4), 1e-5) << i;
  }
  // One stratum for the whole batch (its std 1.5 over all nine) would shrink group 2's advantages ~6x.
  EXPECT_GT(std::fabs(a[8]), 1.0);
  // batch_active: the std of the group-centred rewards of the stratum's groups whose rewards differ.
  std::vector<float> r2 = {1, 0, 0, 2, 2, 2, 0.1f, 0.2f, 0.4f};
  compute_advantages({AdvantageEstimator::grpo, RewardScale::batch_active}, r2.data(), g.data(), 9, a.data(), s.data());
  const double c7 = std::sqrt((4 / 9. + 1 / 9. + 1 / 9.) / 2.0);
  EXPECT_NEAR(a[0], (2 / 3.) / (c7 + 1e-4), 1e-5);
  EXPECT_NEAR(a[3], 0.0, 1e-9);
  EXPECT_NEAR(a[8], (0.4f - m2) / (s3 + 1e-4), 1e-5);
  // Without strata (null, or all equal) it is the whole-batch std, as before.
  std::vector<int64_t> one(9, 5);
  std::vector<float> b1(9), b2(9);
  compute_advantages({AdvantageEstimator::grpo, RewardScale::batch}, r.data(), g.data(), 9, b1.data(), one.data());
  compute_advantages({AdvantageEstimator::grpo, RewardScale::batch}, r.data(), g.data(), 9, b2.data());
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(b1[i], b2[i]) << i;
  // Group scaling ignores strata.
  compute_advantages({AdvantageEstimator::grpo, RewardScale::group}, r.data(), g.data(), 9, b1.data(), s.data());
  compute_advantages({AdvantageEstimator::grpo, RewardScale::group}, r.data(), g.data(), 9, b2.data());
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(b1[i], b2[i]) << i;
}

TEST(Advantages, BatchActiveScaleLeavesUniformGroupsOutOfTheStd) {
  // ZPPO: groups 1 (all 0) and 2 (all 1) add nothing to the std; a whole-batch std would be smaller.
  std::vector<float> r = {1, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 1};
  std::vector<int64_t> g = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3};
  auto a = advantages({AdvantageEstimator::grpo, RewardScale::batch_active}, r, g);
  // centred rewards of the active groups 0 and 3: {2/3, -1/3, -1/3, -2/3, 1/3, 1/3}
  double s = std::sqrt((4 / 9. + 1 / 9. + 1 / 9. + 4 / 9. + 1 / 9. + 1 / 9.) / 5.0);
  std::vector<double> want = {2 / 3., -1 / 3., -1 / 3., 0, 0, 0, 0, 0, 0, -2 / 3., 1 / 3., 1 / 3.};
  for (size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(a[i], want[i] / (s + 1e-4), 1e-6) << i;
  // With the uniform groups' zeros in the std (sqrt(12/9 / 11) = 0.348) the advantages would be 1.48x larger.
}

TEST(Advantages, RlooIsRewardMinusMeanOfTheOthers) {
  std::vector<float> r = {1, 0, 0, 1, 4, -2, 0.5f};
  std::vector<int64_t> g = {0, 0, 0, 0, 1, 1, 1};
  auto a = advantages({AdvantageEstimator::rloo, RewardScale::none}, r, g);
  for (size_t i = 0; i < r.size(); ++i) {
    double s = 0;
    int k = 0;
    for (size_t j = 0; j < r.size(); ++j)
      if (j != i && g[j] == g[i]) s += r[j], ++k;
    EXPECT_NEAR(a[i], r[i] - s / k, 1e-6) << i;
  }
  // With group scaling the leave-one-out advantage is divided by the group's std + eps.
  auto as = advantages({AdvantageEstimator::rloo, RewardScale::group}, r, g);
  double s0 = ustd({1, 0, 0, 1});
  EXPECT_NEAR(as[0], a[0] / (s0 + 1e-4), 1e-6);
}

TEST(Advantages, UniformGroupsAndSingletonsGetZero) {
  std::vector<float> r = {1, 1, 1, 0.3f, 0, 1, 2};
  std::vector<int64_t> g = {0, 0, 0, 1, 2, 2, 2};
  for (AdvantageEstimator e : {AdvantageEstimator::grpo, AdvantageEstimator::dr_grpo, AdvantageEstimator::rloo}) {
    auto a = advantages({e, RewardScale::group}, r, g);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(a[static_cast<size_t>(i)], 0.f) << i;  // uniform group, singleton
    EXPECT_LT(a[4], 0.f);
    EXPECT_GT(a[6], 0.f);
  }
}

TEST(Advantages, FlagUniformGroups) {
  std::vector<float> r = {1, 1, 1, 0, 1, 0, 0.5f, 0.5f, 0.5000001f, 2};
  std::vector<int64_t> g = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3};
  std::vector<uint8_t> f(r.size(), 9);
  EXPECT_EQ(flag_uniform_groups(r.data(), g.data(), 10, f.data()), 4);  // group 0 and the singleton
  EXPECT_EQ(f, (std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(flag_uniform_groups(r.data(), g.data(), 10, f.data(), 1e-6), 7);  // tolerance takes group 2 too
  auto st = group_reward_stats(r.data(), g.data(), 10);
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(st[1].group, 1);
  EXPECT_EQ(st[1].size, 3);
  EXPECT_NEAR(st[1].mean, 1 / 3., 1e-12);
  EXPECT_NEAR(st[1].std, ustd({0, 1, 0}), 1e-12);
  EXPECT_EQ(st[3].std, 0.0);
}

TEST(Advantages, ExpandToTokens) {
  std::vector<float> a = {2, -1};
  std::vector<float> m = {1, 1, 0, 1, 0, 0};
  std::vector<float> out(6);
  expand_to_tokens(a.data(), m.data(), 2, 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{2, 2, 0, -1, 0, 0}));
  expand_to_tokens(a.data(), nullptr, 2, 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{2, 2, 2, -1, -1, -1}));
}

TEST(Advantages, RejectsBadInput) {
  std::vector<float> r = {1, NAN};
  std::vector<int64_t> g = {0, 0};
  std::vector<float> a(2);
  EXPECT_THROW(compute_advantages({}, r.data(), g.data(), 2, a.data()), temper::Error);
  AdvantageConfig c;
  c.eps = -1;
  EXPECT_THROW(c.validate(), temper::Error);
}
