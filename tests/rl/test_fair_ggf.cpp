// Fair multi-objective RL with the Gini weights in the conditioning (rl.fair.sample_ggf, issue 42): sampled
// weights are strictly decreasing points of the simplex grid, uniform over them and reproducible; the prompt
// carries both the preference ({p}) and the weights ({w}), so two weightings give the policy different inputs;
// inside the trainer each group's rewards are the supergradient of its own sampled weights, and the run trains.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "common/scratch.h"
#include "rl/byte_codec.h"
#include "rl/letter_task.h"
#include "rl/two_answer_task.h"
#include "temper/core/error.h"
#include "temper/rl/methods/fair.h"
#include "temper/rl/welfare.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

TEST(FairGgf, SampledWeightsAreTheStrictlyDecreasingGridPointsUniformly) {
  // D = 2, grid 20: k_1 in 11..19, nine points from (0.55, 0.45) to (0.95, 0.05), each 1/9 of the draws.
  std::map<std::vector<double>, int> seen;
  const int n = 18000;
  for (int i = 0; i < n; ++i) {
    std::vector<double> w = fair_sample_ggf(2, 20, 7, 3, static_cast<uint64_t>(i));
    ASSERT_EQ(w.size(), 2u);
    EXPECT_NO_THROW(check_ggf_weights(w, "w"));
    EXPECT_NEAR(w[0] + w[1], 1, 1e-12);
    EXPECT_NEAR(w[0] * 20, std::round(w[0] * 20), 1e-9);
    ++seen[w];
  }
  ASSERT_EQ(seen.size(), 9u);
  EXPECT_EQ(seen.begin()->first, (std::vector<double>{0.55, 0.45}));
  EXPECT_EQ(seen.rbegin()->first, (std::vector<double>{0.95, 0.05}));
  for (auto& [w, c] : seen) EXPECT_NEAR(c / double(n), 1.0 / 9, 0.01) << w[0];  // sd 0.0023
  // D = 3, grid 10: the partitions of 10 into 3 distinct positive parts: 7+2+1, 6+3+1, 5+4+1, 5+3+2.
  std::map<std::vector<double>, int> three;
  for (int i = 0; i < 8000; ++i) ++three[fair_sample_ggf(3, 10, 1, 0, static_cast<uint64_t>(i))];
  ASSERT_EQ(three.size(), 4u);
  EXPECT_TRUE(three.count({0.7, 0.2, 0.1}) && three.count({0.5, 0.3, 0.2}));
  for (auto& [w, c] : three) EXPECT_NEAR(c / 8000.0, 0.25, 0.02) << w[0];
  // The smallest grid for 3 objectives has one point; reproducible; another step draws others.
  EXPECT_EQ(fair_sample_ggf(3, 6, 1, 0, 5), (std::vector<double>{0.5, 2.0 / 6, 1.0 / 6}));
  EXPECT_EQ(fair_sample_ggf(2, 20, 7, 3, 11), fair_sample_ggf(2, 20, 7, 3, 11));
  int differ = 0;
  for (uint64_t i = 0; i < 100; ++i) differ += fair_sample_ggf(2, 20, 7, 3, i) != fair_sample_ggf(2, 20, 7, 4, i);
  EXPECT_GT(differ, 70);
  EXPECT_THROW(fair_sample_ggf(3, 5, 1, 0, 0), Error);
}

TEST(FairGgf, TwoWeightingsGiveThePolicyDifferentInputs) {
  tasks::Problem p;
  p.prompt = "2+2=";
  p.messages = {{"system", "s"}, {"user", "2+2="}};
  const PromptCodec codec = byte_codec();
  const std::string prefix = "<pref {p} ggf {w}>\n";
  tasks::Problem fair_first = fair_condition(p, codec, prefix, {0.5, 0.5}, {0.9, 0.1});
  tasks::Problem near_mean = fair_condition(p, codec, prefix, {0.5, 0.5}, {0.6, 0.4});
  EXPECT_EQ(fair_first.asked, "<pref 0.50,0.50 ggf 0.90,0.10>\n2+2=");
  EXPECT_EQ(near_mean.asked, "<pref 0.50,0.50 ggf 0.60,0.40>\n2+2=");
  EXPECT_EQ(fair_first.messages[1].content, fair_first.asked);
  const std::vector<int32_t> a = codec.encode_prompt(fair_first), b = codec.encode_prompt(near_mean);
  ASSERT_EQ(a.size(), b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  EXPECT_EQ(differ, 2u);  // "9" vs "6" and "1" vs "4": the weights are what the policy reads
  // Without weights, {w} is the linear weights (the welfare's default); the preference alone as before.
  EXPECT_EQ(fair_condition(p, codec, prefix, {0.25, 0.75}).asked, "<pref 0.25,0.75 ggf 0.67,0.33>\n2+2=");
  EXPECT_EQ(fair_condition(p, codec, "<pref {p}>\n", {0.25, 0.75}, {0.9, 0.1}).asked, "<pref 0.25,0.75>\n2+2=");
  // SFT prompts carry them too.
  FairConfig c;
  c.prefix = prefix;
  c.sample_ggf = true;
  EXPECT_EQ(fair_sft_example(p, codec, c, {0.3, 0.7}, 3, 7, {0.8, 0.2}).asked, "<pref 0.30,0.70 ggf 0.80,0.20>\n2+2=");
}

TEST(FairGgf, BadSettingsAreNamed) {
  FairConfig c;
  c.sample_ggf = true;
  expect_error([&] { c.validate(); }, {"rl.fair.sample_ggf", "rl.fair.prefix must contain {w}"});
  c.prefix = "<pref {p} ggf {w}>\n";
  EXPECT_NO_THROW(c.validate());
  c.ggf = {0.7, 0.3};
  expect_error([&] { c.validate(); }, {"rl.fair.sample_ggf and rl.fair.ggf"});
  c.ggf = {};
  c.welfare = Welfare::linear;
  expect_error([&] { c.validate(); }, {"rl.fair.sample_ggf needs welfare = \"ggf\""});
  c.welfare = Welfare::ggf;
  c.objectives = {"correct", "brevity", "format"};
  c.grid = 5;
  expect_error([&] { c.validate(); }, {"rl.fair.grid >= 6, got 5"});
}

// The trainer with sampled Gini weights: every group's prompt carries its preference and weights ("0.35,0.65,0.90,
// 0.10" before the letters), its rewards are omega * lambda(w, omega * mean) . r with its own w, the weights vary
// over groups and steps, the metric fair_gini_first is their mean first weight, and the policy is updated.
TEST(FairGgf, ARunTrainsWithSampledGiniWeights) {
  RlSetup s;
  FairConfig c;
  c.objectives = {"task:0", "task:1"};
  c.prefix = "{p},{w}";  // the letters codec reads anything else as one token
  c.sample_ggf = true;
  Fair f(c);
  RlConfig rc = config();
  rc.group_size = 8;
  RlTrainer t(s.model, std::make_shared<TwoAnswerTask>(), codec(), rc, s.safe, {&f});
  std::set<std::vector<double>> weights;
  int64_t updates = 0, differs_from_fixed = 0;
  for (int step = 0; step < 3; ++step) {
    Metrics m = t.step();
    const Batch& b = t.last_batch();
    std::map<int64_t, std::vector<const Trajectory*>> groups;
    for (const Trajectory& x : b.traj) groups[x.group].push_back(&x);
    double first = 0;
    for (auto& [g, xs] : groups) {
      const std::string& prompt = b.problems[static_cast<size_t>(xs[0]->problem)].asked;  // "0.35,0.65,0.90,0.10abc"
      ASSERT_GE(prompt.size(), 19u) << prompt;
      const std::vector<double> omega = {std::stod(prompt.substr(0, 4)), std::stod(prompt.substr(5, 4))};
      const std::vector<double> w = {std::stod(prompt.substr(10, 4)), std::stod(prompt.substr(15, 4))};
      EXPECT_EQ(w, f.sample_gini(b.step, static_cast<uint64_t>(xs[0]->problem)));
      EXPECT_NO_THROW(check_ggf_weights(w, "w"));
      weights.insert(w);
      first += w[0] / double(groups.size());
      std::vector<double> mean(2, 0.0);
      for (const Trajectory* x : xs)
        for (size_t j = 0; j < 2; ++j) mean[j] += x->rewards[j] / double(xs.size());
      const std::vector<double> wm = {omega[0] * mean[0], omega[1] * mean[1]};
      const std::vector<double> lam = ggf_supergradient(w, wm), fixed = ggf_supergradient(f.gini(), wm);
      for (const Trajectory* x : xs) {
        EXPECT_NEAR(x->reward, omega[0] * lam[0] * x->rewards[0] + omega[1] * lam[1] * x->rewards[1], 1e-9);
        differs_from_fixed +=
            std::fabs(x->reward - (omega[0] * fixed[0] * x->rewards[0] + omega[1] * fixed[1] * x->rewards[1])) > 1e-6;
      }
    }
    EXPECT_NEAR(value(m, "fair_gini_first"), first, 1e-9);
    updates += static_cast<int64_t>(value(m, "updates"));
    EXPECT_TRUE(std::isfinite(value(m, "fair_welfare")));
  }
  EXPECT_GE(weights.size(), 4u);     // 12 groups over 3 steps, 9 possible weightings
  EXPECT_GT(differs_from_fixed, 0);  // the sampled weights change the rewards
  EXPECT_GT(updates, 0);
}
