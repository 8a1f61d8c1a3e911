// Fair multi-objective RL: preferences on the simplex grid (deterministic, extremes reachable), the
// preference in the prompt, the objective vector of a rollout, the group's scalar rewards from the
// GGF supergradient at its mean vector (hand-computed), and the method inside the trainer.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "common/scratch.h"
#include "rl/letter_task.h"
#include "rl/two_answer_task.h"
#include "temper/core/error.h"
#include "temper/rl/evaluate.h"
#include "temper/rl/methods/fair.h"
#include "temper/rl/welfare.h"
#include "temper/tasks/task.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

namespace {

Trajectory traj(int64_t group, bool correct, int64_t tokens, const std::string& text = "") {
  Trajectory t;
  t.group = group;
  t.problem = group;
  t.correct = correct;
  t.tokens.assign(static_cast<size_t>(tokens), 1);
  t.text = text;
  return t;
}

}  // namespace

TEST(Fair, PreferencesLieOnTheSimplexGridAndReachTheExtremes) {
  FairConfig c;
  c.objectives = {"correct", "brevity", "format"};
  c.grid = 4;
  Fair f(c);
  MethodEnv env;
  env.seed = 3;
  f.attach(env);
  std::set<std::vector<double>> seen;
  for (uint64_t i = 0; i < 2000; ++i) {
    std::vector<double> w = f.sample_preference(7, i);
    ASSERT_EQ(w.size(), 3u);
    double s = 0;
    for (double x : w) {
      EXPECT_GE(x, 0);
      EXPECT_NEAR(x * 4, std::round(x * 4), 1e-12);
      s += x;
    }
    EXPECT_NEAR(s, 1, 1e-12);
    seen.insert(w);
  }
  EXPECT_EQ(seen.size(), 15u);  // every grid point of the 3-simplex with step 1/4: C(6, 2)
  EXPECT_TRUE(seen.count({1, 0, 0}) && seen.count({0, 0, 1}));
  EXPECT_EQ(f.sample_preference(7, 11), f.sample_preference(7, 11));
  c.fixed = {0.25, 0.25, 0.5};
  EXPECT_EQ(Fair(c).sample_preference(0, 5), c.fixed);
}

// rl.fair.concentration: Dirichlet draws rounded to the grid. On the grid, summing to 1, reproducible;
// their mean is the Dirichlet's (alpha / sum alpha) within sampling and rounding error; a small
// concentration piles the draws at that objective's zero end: brevity lands on 0 or 0.05 when the
// draw is under 0.075 (rounding to the nearest grid point), P = 0.40 under Beta(0.5, 2).
TEST(Fair, DirichletPreferencesTiltTheSamplingAndStayOnTheGrid) {
  FairConfig c;
  c.concentration = {2.0, 0.5};
  Fair f(c);
  MethodEnv env;
  env.seed = 5;
  f.attach(env);
  const int n = 20000;
  double mean_c = 0;
  int brief_low = 0, extremes = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<double> w = f.sample_preference(3, static_cast<uint64_t>(i));
    ASSERT_EQ(w.size(), 2u);
    EXPECT_NEAR(w[0] + w[1], 1, 1e-12);
    EXPECT_NEAR(w[0] * 20, std::round(w[0] * 20), 1e-9);
    mean_c += w[0] / n;
    brief_low += w[1] < 0.1;  // 0 or 0.05 on the grid
    extremes += w[0] == 0.0 || w[0] == 1.0;
  }
  EXPECT_NEAR(mean_c, 0.8, 0.01);  // 2 / 2.5
  EXPECT_NEAR(brief_low / double(n), 0.40, 0.015);
  EXPECT_GT(extremes, 0);
  EXPECT_EQ(f.sample_preference(3, 17), f.sample_preference(3, 17));
  int differ = 0;  // another step, other draws
  for (uint64_t i = 0; i < 200; ++i) differ += f.sample_preference(3, i) != f.sample_preference(4, i);
  EXPECT_GT(differ, 100);
  // Three objectives, equal concentrations: every mean 1/3.
  FairConfig c3;
  c3.objectives = {"correct", "brevity", "format"};
  c3.concentration = {1.0, 1.0, 1.0};
  Fair f3(c3);
  f3.attach(env);
  std::vector<double> mean(3, 0.0);
  for (int i = 0; i < n; ++i) {
    auto w = f3.sample_preference(1, static_cast<uint64_t>(i));
    for (int k = 0; k < 3; ++k) mean[k] += w[k] / n;
  }
  for (double m : mean) EXPECT_NEAR(m, 1.0 / 3, 0.01);
}

TEST(Fair, ThePreferenceIsWrittenBeforeTheQuestion) {
  tasks::Problem p;
  p.prompt = "2+2=";
  p.messages = {{"system", "s"}, {"user", "2+2="}};
  tasks::Problem q = fair_condition(p, PromptCodec{}, "<pref {p}>\n", {0.25, 0.75});
  EXPECT_EQ(q.asked, "<pref 0.25,0.75>\n2+2=");
  EXPECT_EQ(q.messages[1].content, "<pref 0.25,0.75>\n2+2=");
  EXPECT_EQ(q.messages[0].content, "s");
}

TEST(Fair, PreferenceDependentSftTargetsAreBriefAsOftenAsTheBrevityWeight) {
  tasks::Problem p;
  p.prompt = "2+3*4=";
  p.gold_solution = "3*4=12\n2+12=14\n#### 14";
  EXPECT_EQ(fair_brief_solution(p.gold_solution), "#### 14");
  EXPECT_EQ(fair_brief_solution("no answer line"), "no answer line");
  FairConfig c;
  c.objectives = {"correct", "brevity"};
  c.sft_targets = SftTargets::same;
  EXPECT_EQ(fair_sft_example(p, PromptCodec{}, c, {0.0, 1.0}, 3, 7).gold_solution,
            p.gold_solution);  // "same": never cut
  c.sft_targets = SftTargets::preference;
  EXPECT_EQ(fair_sft_example(p, PromptCodec{}, c, {1.0, 0.0}, 3, 7).gold_solution,
            p.gold_solution);                                                                   // brevity weight 0
  EXPECT_EQ(fair_sft_example(p, PromptCodec{}, c, {0.0, 1.0}, 3, 7).gold_solution, "#### 14");  // brevity weight 1
  EXPECT_EQ(fair_sft_example(p, PromptCodec{}, c, {0.3, 0.7}, 3, 7).asked, "<pref 0.30,0.70>\n2+3*4=");
  int brief = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i)
    brief += fair_sft_example(p, PromptCodec{}, c, {0.7, 0.3}, 3, static_cast<uint64_t>(i)).gold_solution == "#### 14";
  EXPECT_NEAR(static_cast<double>(brief) / n, 0.3, 0.025);  // 3.4 standard errors
  EXPECT_EQ(fair_sft_example(p, PromptCodec{}, c, {0.7, 0.3}, 3, 11).gold_solution,
            fair_sft_example(p, PromptCodec{}, c, {0.7, 0.3}, 3, 11).gold_solution);
  c.objectives = {"correct", "format"};
  EXPECT_THROW(c.validate(), Error);  // "preference" needs the brevity objective
}

TEST(Fair, BadSettingsAreNamed) {
  auto msg = [](FairConfig c) {
    try {
      c.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  FairConfig c;
  c.objectives = {"correct"};
  EXPECT_NE(msg(c).find("at least 2"), std::string::npos);
  c.objectives = {"correct", "speed"};
  EXPECT_NE(msg(c).find("rl.fair.objectives"), std::string::npos);
  c.objectives = {"correct", "brevity"};
  c.ggf = {0.3, 0.7};
  EXPECT_NE(msg(c).find("strictly decreasing"), std::string::npos);
  c.ggf = {};
  c.fixed = {0.3, 0.6};
  EXPECT_NE(msg(c).find("sum to 1"), std::string::npos);
  c.fixed = {};
  c.concentration = {1.0};
  EXPECT_NE(msg(c).find("rl.fair.concentration: 1 values for 2"), std::string::npos);
  c.concentration = {1.0, 0.0};
  EXPECT_NE(msg(c).find("must be > 0"), std::string::npos);
  c.concentration = {1.0, 1.0};
  c.fixed = {0.5, 0.5};
  EXPECT_NE(msg(c).find("samples nothing"), std::string::npos);
}

// A task names the entries of its reward vector; objectives read them as task:NAME or task:K, and a name the task
// does not give is an error listing the ones it does.
TEST(Fair, TaskObjectivesByNameOrIndex) {
  auto proxy = tasks::make_task("rubric_proxy", {});
  ASSERT_EQ(proxy->reward_names(), (std::vector<std::string>{"correct", "rubric", "keywords"}));
  EXPECT_EQ(task_objective_index("task:rubric", proxy.get()), 1u);
  EXPECT_EQ(task_objective_index("task:keywords", proxy.get()), 2u);
  EXPECT_EQ(task_objective_index("task:0", proxy.get()), 0u);
  const std::vector<double> rewards = {1.0, 0.0, 3.0};
  EXPECT_EQ(fair_objectives({"task:keywords", "correct", "task:rubric"}, true, 4, 8, "", proxy.get(), rewards),
            (std::vector<double>{3.0, 1.0, 0.0}));
  const std::vector<std::string> unknown = {"correct", "task:style"};
  expect_error([&] { check_objectives(unknown, *proxy); }, {"task:style", "rubric_proxy", "correct, rubric, keywords"});
  auto arith = tasks::make_task("arithmetic", {});
  expect_error([&] { check_objectives({"task:rubric"}, *arith); }, {"task:rubric", "names no reward entries"});
  FairConfig c;
  c.objectives = {"correct", "task:rubric"};
  EXPECT_NO_THROW(c.validate());
  c.objectives = {"correct", "task:Rubric!"};
  EXPECT_THROW(c.validate(), Error);
}

TEST(Fair, GroupRewardsAreTheSupergradientAtTheGroupMean) {
  FairConfig c;  // correct, brevity; Gini weights (2/3, 1/3)
  c.fixed = {0.5, 0.5};
  Fair f(c);
  MethodEnv env;
  env.max_new = 10;
  const PromptCodec codec;  // no user template: prompts as they are
  env.codec = &codec;
  f.attach(env);
  Batch b;
  b.problems.resize(2);
  f.prepare_problems(b.problems, 0, 0, 0);
  EXPECT_EQ(b.problems[0].asked, "<pref 0.50,0.50>\n");
  // Group 0: (correct, brevity) = (1, 0.2) and (0, 0.8): mean (0.5, 0.5), omega * mean ties -> the
  // first objective ranks first: lambda = (2/3, 1/3); rewards 0.5 * (2/3 * 1 + 1/3 * 0.2) and 0.5 * (1/3 * 0.8).
  // Group 1: (1, 0.1) twice: mean (1, 0.1): brevity is worse off: lambda = (1/3, 2/3).
  b.traj = {traj(0, true, 8), traj(0, false, 2), traj(1, true, 9), traj(1, true, 9)};
  f.after_reward(b);
  EXPECT_NEAR(b.traj[0].reward, 0.5 * (2.0 / 3 + 0.2 / 3), 1e-12);
  EXPECT_NEAR(b.traj[1].reward, 0.5 * (0.8 / 3), 1e-12);
  EXPECT_NEAR(b.traj[2].reward, 0.5 * (1.0 / 3 + 2.0 / 3 * 0.1), 1e-12);
  ASSERT_EQ(b.traj[0].rewards.size(), 2u);
  EXPECT_EQ(b.traj[0].rewards[0], 1);
  EXPECT_NEAR(b.traj[0].rewards[1], 0.2, 1e-12);
  // The group's welfare is linear in its members through lambda: the mean scalar reward equals GGF.
  EXPECT_NEAR(0.5 * (b.traj[0].reward + b.traj[1].reward), ggf(f.gini(), {0.25, 0.25}), 1e-12);
  Metrics m;
  f.metrics(m);
  EXPECT_NEAR(value(m, "fair_correct"), 0.75, 1e-12);
  // The linear scalarisation baseline: reward = omega . r whatever the group.
  c.welfare = Welfare::linear;
  Fair lin(c);
  lin.attach(env);
  lin.prepare_problems(b.problems, 0, 0, 0);
  lin.after_reward(b);
  EXPECT_NEAR(b.traj[0].reward, 0.5 * 1 + 0.5 * 0.2, 1e-12);
  EXPECT_NEAR(b.traj[3].reward, 0.5 * 1 + 0.5 * 0.1, 1e-12);
  EXPECT_NEAR(value(m, "fair_brevity"), (0.2 + 0.8 + 0.1 + 0.1) / 4, 1e-12);
}

TEST(Fair, InsideTheTrainerPromptsCarryTheirPreferenceAndRewardsFollowIt) {
  RlSetup s;
  FairConfig c;
  c.objectives = {"correct", "brevity"};
  c.prefix = "{p}";  // the letters codec reads anything else as one token
  Fair f(c);
  RlTrainer t(s.model, s.task, codec(), config(), s.safe, {&f});
  Metrics m = t.step();
  const Batch& b = t.last_batch();
  std::map<int64_t, std::vector<const Trajectory*>> groups;
  for (const Trajectory& x : b.traj) groups[x.group].push_back(&x);
  for (auto& [g, xs] : groups) {
    const std::string& prompt = b.problems[static_cast<size_t>(xs[0]->problem)].asked;  // e.g. "0.35,0.65abc"
    ASSERT_EQ(prompt.find("0.") == 0 || prompt.find("1.") == 0, true) << prompt;
    const std::vector<double> omega = {std::stod(prompt.substr(0, 4)), std::stod(prompt.substr(5, 4))};
    std::vector<double> mean(2, 0.0);
    for (const Trajectory* x : xs)
      for (size_t j = 0; j < 2; ++j) mean[j] += x->rewards[j] / double(xs.size());
    const std::vector<double> lam = ggf_supergradient(f.gini(), {omega[0] * mean[0], omega[1] * mean[1]});
    for (const Trajectory* x : xs) {
      EXPECT_NEAR(x->rewards[0], x->correct ? 1 : 0, 1e-12);
      EXPECT_NEAR(x->rewards[1], 1 - double(x->tokens.size()) / 6, 1e-12);
      EXPECT_NEAR(x->reward, omega[0] * lam[0] * x->rewards[0] + omega[1] * lam[1] * x->rewards[1], 1e-9);
    }
  }
  EXPECT_NEAR(value(m, "fair_correct"), value(m, "accuracy"), 1e-12);
  EXPECT_GT(value(m, "updates"), 0);
}

TEST(Fair, EvaluationRunsAtAChosenPreferenceAndReportsObjectivesAndWelfare) {
  RlSetup s;
  EvalConfig c;
  c.problems = 6;
  c.max_new = 6;
  c.kv_memory_mb = 4;
  c.preference = {0.75, 0.25};
  c.preference_prefix = "{p}";
  c.objectives = {"correct", "brevity"};
  reward::SafeReward safe;
  EvalResult r = evaluate(s.model, s.task, codec(), c, safe);
  ASSERT_EQ(r.objective_means.size(), 2u);
  double correct = 0, brevity = 0;
  for (const EvalExample& e : r.examples) {
    EXPECT_EQ(e.prompt.rfind("0.75,0.25", 0), 0u) << e.prompt;
    correct += e.correct ? 1.0 / 6 : 0;
    brevity += (1 - double(e.completion.size()) / 6) / 6;  // one letter per token
  }
  EXPECT_NEAR(r.objective_means[0], correct, 1e-12);
  EXPECT_NEAR(r.objective_means[1], brevity, 1e-12);
  EXPECT_NEAR(r.welfare, ggf(ggf_weights(2, "linear"), {0.75 * correct, 0.25 * brevity}), 1e-12);
  c.objectives = {"correct"};
  EXPECT_THROW(evaluate(s.model, s.task, codec(), c, safe), Error);  // 2 preference values, 1 objective
}

// The spec's mixture signature: two answers, one pays objective 1 only, the other objective 2 only
// (the convex coverage set {(1,0), (0,1)}). Any deterministic policy has min-objective 0; GGF on the
// group-mean vector pushes toward the worse-off objective, so the sampling policy settles near the
// (0.5, 0.5) mixture and raises the welfare, where the linear scalarisation is indifferent between them
// (TwoAnswerTask).
TEST(Fair, GgfOnTheGroupMeanLearnsTheMixtureOfTwoSingleObjectiveAnswers) {
  RlSetup s;
  FairConfig c;
  c.objectives = {"task:0", "task:1"};
  c.fixed = {0.5, 0.5};
  c.prefix = "{p}";
  Fair f(c);
  RlConfig cfg = config();
  cfg.group_size = 8;
  auto task = std::make_shared<TwoAnswerTask>();
  RlTrainer t(s.model, task, codec(), cfg, s.safe, {&f});
  double a = 0, b = 0, welfare0 = 0, welfare = 0;  // welfare: the first 3 steps; the rest: the last 20
  for (int i = 0; i < 80; ++i) {
    Metrics m = t.step();
    if (i < 3) welfare0 += value(m, "fair_welfare") / 3;
    if (i >= 60)
      a += value(m, "fair_task_0") / 20, b += value(m, "fair_task_1") / 20, welfare += value(m, "fair_welfare") / 20;
  }
  // Measured: 'a' then 'b' overshoot in turn (steps 30-50), then both near 0.5 from step ~50 on.
  std::printf("last 20 steps: first answer 'a' %.3f, 'b' %.3f; welfare %.4f (first steps %.4f; the mixture's 0.25)\n",
              a, b, welfare, welfare0);
  EXPECT_GT(a + b, 0.8);            // nearly every sample pays one objective
  EXPECT_GT(std::min(a, b), 0.25);  // and neither objective is abandoned
  EXPECT_GT(welfare, 0.17);
  EXPECT_LT(welfare0, 0.05);
}

TEST(Fair, PreferencesPerStepAreSharedByTheGroupsInTurnAndStratifyTheBatchStd) {
  RlSetup s;
  FairConfig c;
  c.objectives = {"task:0", "task:1"};  // first letter 'a', first letter 'b': rewards that vary
  c.prefix = "{p}";
  c.preferences_per_step = 2;
  Fair f(c);
  RlConfig rc = config();
  rc.prompts_per_step = 8;
  rc.group_size = 8;
  rc.advantage.scale = RewardScale::batch;
  auto task = std::make_shared<TwoAnswerTask>();
  RlTrainer t(s.model, task, codec(), rc, s.safe, {&f});
  t.step();
  const Batch& b = t.last_batch();
  std::map<int64_t, std::set<std::string>> prefs;  // stratum -> the preferences of its groups
  std::map<int64_t, std::vector<float>> rewards;
  for (const Trajectory& x : b.traj) {
    const std::string& asked = b.problems[static_cast<size_t>(x.problem)].asked;
    EXPECT_EQ(x.stratum, x.problem % 2);
    EXPECT_EQ(asked.substr(0, 9),
              fair_preference_text("{p}", f.sample_preference(b.step, static_cast<uint64_t>(x.problem % 2))));
    prefs[x.stratum].insert(asked.substr(0, 9));
    rewards[x.stratum].push_back(static_cast<float>(x.reward));
  }
  ASSERT_EQ(prefs.size(), 2u);
  EXPECT_EQ(prefs[0].size(), 1u);
  EXPECT_EQ(prefs[1].size(), 1u);
  EXPECT_GE(b.problems.size(), 4u);
  // The advantages are the ones with the std of each stratum.
  std::vector<float> r, a(b.traj.size());
  std::vector<int64_t> g, st;
  for (const Trajectory& x : b.traj)
    r.push_back(static_cast<float>(x.reward)), g.push_back(x.group), st.push_back(x.stratum);
  compute_advantages(rc.advantage, r.data(), g.data(), static_cast<int64_t>(r.size()), a.data(), st.data());
  for (size_t i = 0; i < b.traj.size(); ++i) EXPECT_FLOAT_EQ(b.traj[i].advantage[0], a[i]) << i;
  // and the strata matter here: one std for the whole batch gives other advantages.
  std::vector<float> a1(b.traj.size());
  compute_advantages(rc.advantage, r.data(), g.data(), static_cast<int64_t>(r.size()), a1.data());
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::fabs(double(a[i]) - a1[i]));
  EXPECT_GT(most, 0.05);
  // Without the key, every group has its own preference and one stratum.
  FairConfig c0 = c;
  c0.preferences_per_step = 0;
  Fair f0(c0);
  RlTrainer t0(s.model, task, codec(), rc, s.safe, {&f0});
  t0.step();
  std::set<std::string> seen;
  for (const Trajectory& x : t0.last_batch().traj) {
    EXPECT_EQ(x.stratum, 0);
    seen.insert(t0.last_batch().problems[static_cast<size_t>(x.problem)].asked.substr(0, 9));
  }
  EXPECT_GT(seen.size(), 2u);
  c0.preferences_per_step = -1;
  EXPECT_THROW(c0.validate(), Error);
}
