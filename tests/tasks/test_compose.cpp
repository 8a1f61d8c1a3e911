// The compositional task of the curriculum: each skill and routing on hand-checked strings; problems'
// gold traces follow their prompts; the sets (SFT support, RL set, unseen test, deeper, atomic,
// held-out skill) are disjoint where they must be and have the configured shares; train and eval
// never share a problem. The curriculum's budget split and the SFT stage's module coverage.
#include <gtest/gtest.h>

#include <set>

#include "temper/core/error.h"
#include "temper/rl/curriculum.h"
#include "temper/tasks/compose.h"

using namespace temper;
using namespace temper::tasks;

namespace {

// "x|s1:r1|s2:r2=" -> x and the steps.
std::pair<std::string, std::vector<std::pair<std::string, std::string>>> parse(const std::string& prompt) {
  std::vector<std::pair<std::string, std::string>> steps;
  std::string body = prompt.substr(0, prompt.size() - 1), x;
  size_t at = body.find('|');
  x = body.substr(0, at);
  while (at != std::string::npos) {
    size_t next = body.find('|', at + 1);
    std::string st = body.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    steps.emplace_back(st.substr(0, st.find(':')), st.substr(st.find(':') + 1));
    at = next;
  }
  return {x, steps};
}

std::string key_of(const std::string& prompt) { return prompt.substr(prompt.find('|') + 1, prompt.size() - prompt.find('|') - 2); }

}  // namespace

TEST(Compose, SkillsOnHandCheckedStrings) {
  const std::string ab = "abcdef";
  EXPECT_EQ(compose_skill("rev", "abcd", ab), "dcba");
  EXPECT_EQ(compose_skill("rotl", "abcd", ab), "bcda");
  EXPECT_EQ(compose_skill("swap", "abcde", ab), "badce");
  EXPECT_EQ(compose_skill("repl", "abca", ab), "bbcb");
  EXPECT_EQ(compose_skill("dupf", "cab", ab), "ccab");
  EXPECT_EQ(compose_skill("dropl", "cab", ab), "ca");
  EXPECT_EQ(compose_skill("dropl", "c", ab), "c");
  EXPECT_EQ(compose_skill("sort", "fcaeb", ab), "abcef");
  EXPECT_EQ(compose_skill("shift", "afe", ab), "baf");  // cyclic: f -> a
  EXPECT_THROW(compose_skill("nope", "ab", ab), Error);
}

TEST(Compose, RoutingsOnAHandCheckedTrace) {
  ComposeConfig c;
  // rev on the input; sort on the original input; swap on (the result before + the previous):
  // swap("dcba" + "abcd") = swap("dcbaabcd") = "cdabbadc"; rotl on the first half of it: "dabc" + "badc".
  EXPECT_EQ(compose_states("abcd", {{"rev", "prev"}, {"sort", "orig"}, {"swap", "cat"}, {"rotl", "half"}}, c),
            (std::vector<std::string>{"dcba", "abcd", "cdabbadc", "dabcbadc"}));
  // cat at the first step doubles the input; results are cut to cap.
  c.cap = 6;
  EXPECT_EQ(compose_states("abcd", {{"dupf", "cat"}}, c), (std::vector<std::string>{"aabcda"}));
  EXPECT_EQ(compose_states("abcde", {{"rev", "half"}}, c), (std::vector<std::string>{"bacde"}));
}

TEST(Compose, GoldTracesFollowTheirPrompts) {
  ComposeConfig c;
  c.seed = 3;
  ComposeTask t(c);
  for (uint64_t i = 0; i < 200; ++i) {
    Problem p = t.problem(Split::train, i);
    auto [x, steps] = parse(p.prompt);
    ASSERT_EQ(steps.size(), 3u) << p.prompt;
    std::vector<std::string> y = compose_states(x, steps, c);
    std::string gold;
    for (size_t k = 0; k < steps.size(); ++k) gold += steps[k].first + ":" + steps[k].second + "=" + y[k] + "\n";
    EXPECT_EQ(p.gold_solution, gold + "#### " + y.back());
    EXPECT_EQ(p.answer, y.back());
    EXPECT_TRUE(t.verify(p, p.gold_solution).correct);
    EXPECT_FALSE(t.verify(p, "#### " + y.back() + "a").correct);
    EXPECT_EQ(t.intermediate_states(p, p.gold_solution), y);
    std::set<std::string> mods(p.modules.begin(), p.modules.end());
    for (auto& [s, r] : steps) EXPECT_TRUE(mods.count(s) && mods.count("route:" + r)) << p.prompt;
  }
}

TEST(Compose, SetsAreDisjointWithTheirSharesAndTheHeldOutSkillNeverInSft) {
  ComposeConfig c;
  c.holdout = "sort";
  // Shares over every depth-3 composition (32^3).
  std::map<std::string, int> n;
  int held_in_sft = 0;
  ComposeTask t(c);
  for (auto& s1 : c.skills) for (auto& r1 : c.routings) for (auto& s2 : c.skills) for (auto& r2 : c.routings)
    for (auto& s3 : c.skills) for (auto& r3 : c.routings) {
      std::string key = s1 + ":" + r1 + "|" + s2 + ":" + r2 + "|" + s3 + ":" + r3;
      std::string set = t.set_of(key);
      ++n[set];
      if (set == "sft" && key.find("sort:") != std::string::npos) ++held_in_sft;
    }
  const double total = 32.0 * 32 * 32;
  EXPECT_EQ(held_in_sft, 0);
  // Compositions without sort: (28/32)^3 = 0.67 of all; half of them in SFT.
  EXPECT_NEAR(n["sft"] / total, 0.5 * 0.67, 0.02);
  EXPECT_NEAR(n["test"] / total, 0.2, 0.02);
  std::map<std::string, std::set<std::string>> keys;
  for (std::string set : {"sft", "rl", "unseen", "holdout", "deeper", "atomic"}) {
    ComposeConfig cs = c;
    (set == "sft" || set == "rl" || set == "atomic" ? cs.train_set : cs.eval_set) = set;
    ComposeTask ts(cs);
    const Split split = set == "sft" || set == "rl" || set == "atomic" ? Split::train : Split::eval;
    for (uint64_t i = 0; i < 300; ++i) {
      Problem p = ts.problem(split, i);
      const std::string key = key_of(p.prompt);
      keys[set].insert(key);
      const bool held = key.find("sort:") != std::string::npos;
      EXPECT_EQ(p.difficulty, set == "deeper" ? 4 : set == "atomic" ? 1 : 3) << set;
      const std::string want = set == "sft" || set == "rl" ? set : set == "unseen" || set == "holdout" ? "test" : "";
      if (!want.empty()) {
        EXPECT_EQ(t.set_of(key), want) << set;
      }
      EXPECT_EQ(held, set == "holdout" || (set == "rl" && held)) << set << " " << key;
    }
  }
  for (auto& k : keys["rl"]) EXPECT_FALSE(keys["sft"].count(k));
  for (auto& k : keys["unseen"]) EXPECT_FALSE(keys["sft"].count(k) || keys["rl"].count(k));
  int rl_held = 0;
  for (auto& k : keys["rl"]) rl_held += k.find("sort:") != std::string::npos;
  EXPECT_GT(rl_held, 0) << "the RL set holds compositions with the held-out skill";
}

TEST(Compose, TrainAndEvalNeverShareAProblem) {
  ComposeConfig c;
  c.train_set = "sft";
  c.eval_set = "seen";
  ComposeTask t(c);
  std::set<std::string> train;
  for (uint64_t i = 0; i < 2000; ++i) train.insert(t.problem(Split::train, i).prompt);
  for (uint64_t i = 0; i < 500; ++i) EXPECT_FALSE(train.count(t.problem(Split::eval, i).prompt));
}

TEST(Compose, BadParamsNameTheKey) {
  auto err = [](TaskParams p) {
    try {
      make_task("compose", p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err({{"holdout", "nope"}}).find("holdout"), std::string::npos);
  EXPECT_NE(err({{"train_set", "seen"}}).find("train_set"), std::string::npos);
  EXPECT_NE(err({{"eval_set", "holdout"}}).find("needs a holdout"), std::string::npos);
  EXPECT_NE(err({{"skills", "rev,fly"}}).find("skills"), std::string::npos);
  EXPECT_NE(err({{"sft_share", "0.8"}, {"rl_share", "0.3"}}).find("sum below 1"), std::string::npos);
}

TEST(Curriculum, RatioParsesAndRejects) {
  int64_t a = 0, b = 0;
  rl::CurriculumConfig::parse_ratio("4:1", a, b);
  EXPECT_EQ(a, 4);
  EXPECT_EQ(b, 1);
  rl::CurriculumConfig::parse_ratio("1:0", a, b);
  EXPECT_EQ(b, 0);
  for (const char* bad : {"4", "4:", ":1", "0:0", "4:1:1", "-1:2", "a:b", "4.5:1"})
    EXPECT_THROW(rl::CurriculumConfig::parse_ratio(bad, a, b), Error) << bad;
}

TEST(Curriculum, BudgetSplitsInPromptsOrOptimiserSteps) {
  rl::CurriculumConfig c;
  c.total = 640;  // 4:1 in prompts: 512 SFT prompts (16 steps of 32), 128 RL prompts (8 steps of 16)
  rl::CurriculumPlan p = rl::plan_curriculum(c, 32, 16, 2);
  EXPECT_EQ(p.sft_steps, 16);
  EXPECT_EQ(p.rl_steps, 8);
  EXPECT_EQ(p.sft_prompts, 512);
  EXPECT_EQ(p.rl_prompts, 128);
  EXPECT_EQ(p.rl_updates, 16);
  c.budget = rl::BudgetUnit::steps;
  c.total = 100;  // 80 SFT optimiser steps, 20 RL optimiser steps = 10 RL steps of 2 updates
  p = rl::plan_curriculum(c, 32, 16, 2);
  EXPECT_EQ(p.sft_steps, 80);
  EXPECT_EQ(p.rl_steps, 10);
  EXPECT_EQ(p.sft_updates + p.rl_updates, 100);
  c.sft_parts = 1, c.rl_parts = 0;
  p = rl::plan_curriculum(c, 32, 16, 2);
  EXPECT_EQ(p.sft_steps, 100);
  EXPECT_EQ(p.rl_steps, 0);
  c.sft_parts = 2, c.rl_parts = 1, c.budget = rl::BudgetUnit::prompts,
  c.total = 100;  // 66.7 SFT prompts: 2 whole steps of 32
  p = rl::plan_curriculum(c, 32, 16, 1);
  EXPECT_EQ(p.sft_steps, 2);
  EXPECT_EQ(p.rl_steps, 2);  // the 36 prompts left: 2 steps of 16
  c.total = 10;  // less than a step: each stage with a share still gets one
  p = rl::plan_curriculum(c, 32, 16, 1);
  EXPECT_EQ(p.sft_steps, 1);
  EXPECT_EQ(p.rl_steps, 1);
}

TEST(Curriculum, CoverageCountsModulesAndNamesTheMissingOnes) {
  ComposeConfig c;
  c.train_set = "sft";
  rl::Coverage full = rl::count_coverage(ComposeTask(c), 400);
  EXPECT_EQ(full.problems, 400);
  EXPECT_TRUE(full.missing.empty());
  EXPECT_EQ(full.count.size(), 12u);
  int64_t uses = 0;
  for (auto& [m, k] : full.count) uses += k;
  EXPECT_GE(uses, 400 * 2);  // each problem uses at least one skill and one routing
  c.holdout = "sort";
  rl::Coverage held = rl::count_coverage(ComposeTask(c), 400);
  EXPECT_EQ(held.missing, std::vector<std::string>{"sort"});
  EXPECT_EQ(held.count.at("sort"), 0);
}
