// DRE on hand-made rollouts of the arithmetic task with a byte codec: the answer detector finds the
// first verified step boundary and the answer line; the online hook forks once there with the close
// forced, and never for forks, wrong answers or after the answer line; composition keeps an edit
// only when the original is correct, the edit verifies and it saves min_tail tokens, and applies
// add_beside / add_and_prefer / replace as specified; offline mode regenerates exactly the verified
// prefix + the close for correct overthinking rollouts and nothing else; the overthinking ratio is
// measured for correct and incorrect rollouts. Through the trainer, forced tokens are out of the loss
// and forks are left out of the rollout statistics.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "rl/arithmetic_env.h"
#include "rl/byte_codec.h"
#include "rl/letter_task.h"
#include "temper/rl/methods/dre.h"
#include "temper/tasks/arithmetic.h"

using namespace temper;
using namespace temper::rl;

namespace {

using test::ids;
using test::kEos;

tasks::Problem problem() {
  tasks::Problem p;
  p.id = "p0";
  p.prompt = "12+7*3=";
  p.answer = "33";
  return p;
}

const std::string kSteps = "7*3=21\n12+21=33\n";  // the answer appears at the end of this prefix
const std::string kLong = kSteps + "check 7*3=21\ncheck 12+21=33\n#### 33";
const std::string kShort = kSteps + "#### 33";
const std::string kWrong = "7*3=21\n12+21=34\ncheck 7*3=21\n#### 34";

struct Env : test::ArithmeticEnv {  // requests: what offline mode asked to generate
  MethodEnv env() {                 // the policy writes the forced close, then "33" and the end
    return method_env(256, [](int64_t i, const rollout::RolloutRequest& r) {
      return std::vector<rollout::Completion>{test::scripted_completion(i, 0, "33", r.forced)};
    });
  }
};

Trajectory traj(const std::string& text, int64_t group, int64_t member, int64_t parent = -1) {
  Trajectory t;
  t.group = group;
  t.problem = group;
  t.member = member;
  t.lineage.parent = parent;
  t.prompt = ids(problem().prompt);
  t.tokens = ids(text);
  t.tokens.push_back(kEos);
  t.text = text;
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    t.sample_logprob.push_back(-0.1f * static_cast<float>(i));
    t.old_logprob.push_back(-0.2f * static_cast<float>(i));
    t.entropy.push_back(0.5f);
  }
  tasks::ArithmeticTask task{tasks::ArithmeticConfig{}};
  tasks::Verdict v = task.verify(problem(), text);
  t.reward = v.reward;
  t.correct = v.correct;
  t.scored = true;
  return t;
}

// Runs the hook over a completion token by token; returns the positions where it forked.
std::vector<size_t> drive(rollout::RolloutHook* h, const std::string& text, int64_t request, int64_t member,
                          int64_t parent, std::vector<int32_t>* forced = nullptr, int64_t* cap = nullptr) {
  rollout::RolloutRequest q;
  rollout::Completion c;
  c.request = request;
  c.member = member;
  c.parent = parent;
  std::vector<size_t> at;
  for (int32_t t : ids(text)) {
    c.tokens.push_back(t);
    rollout::HookDecision d = h->after_token(q, c);
    EXPECT_FALSE(d.stop);
    if (d.forks) {
      EXPECT_EQ(d.forks, 1);
      at.push_back(c.tokens.size());
      if (forced) *forced = d.fork_forced;
      if (cap) *cap = d.fork_max_new;
    }
  }
  return at;
}

}  // namespace

TEST(Dre, AnswerDetectorFindsTheFirstVerifiedBoundaryAndTheAnswerLine) {
  Env e;
  tasks::Problem p = problem();
  auto accept = [&](const std::string& c) { return e.task->accepts(p, c); };
  Emergence a = find_emergence(*e.task, p, e.codec, ids(kLong), accept);
  EXPECT_EQ(a.at, static_cast<int64_t>(kSteps.size()));
  EXPECT_EQ(a.close, static_cast<int64_t>(kLong.find("####")));
  Emergence b = find_emergence(*e.task, p, e.codec, ids(kShort), accept);
  EXPECT_EQ(b.at, static_cast<int64_t>(kSteps.size()));
  EXPECT_EQ(b.close, b.at);  // nothing between the answer and the answer line
  Emergence w = find_emergence(*e.task, p, e.codec, ids(kWrong), accept);
  EXPECT_EQ(w.at, -1);
  EXPECT_EQ(w.close, static_cast<int64_t>(kWrong.find("####")));
  Emergence direct = find_emergence(*e.task, p, e.codec, ids("#### 33"), accept);
  EXPECT_EQ(direct.at, -1);
  EXPECT_EQ(direct.close, 0);
  // The default candidate: the text after the last '=' of the last complete line, before "####".
  EXPECT_EQ(e.task->answer_candidate(p, "7*3=21\n"), std::optional<std::string>("21"));
  EXPECT_EQ(e.task->answer_candidate(p, "7*3=21"), std::nullopt);
  EXPECT_EQ(e.task->answer_candidate(p, "7*3= \n"), std::nullopt);
  EXPECT_EQ(e.task->answer_candidate(p, "rev=cba\n"), std::optional<std::string>("cba"));
  EXPECT_EQ(e.task->answer_candidate(p, "#### 3\n4=4\n"), std::nullopt);
  EXPECT_EQ(e.task->answer_candidate(p, "a=-3/4 \n"), std::optional<std::string>("-3/4"));
}

TEST(Dre, OnlineHookForksOnceAtTheFirstVerifiedAnswerWithTheCloseForced) {
  Env e;
  MethodEnv env = e.env();
  DreConfig cfg;
  cfg.answer_budget = 6;
  Dre dre(cfg);
  dre.attach(env);
  std::vector<tasks::Problem> problems(3, problem());
  RolloutRound round{0, 0, &problems, 1};  // request r answers problem 1 + r
  rollout::RolloutHook* h = dre.rollout_hook(round);
  ASSERT_NE(h, nullptr);
  std::vector<int32_t> forced;
  int64_t cap = 0;
  EXPECT_EQ(drive(h, kLong, 0, 0, -1, &forced, &cap), std::vector<size_t>{kSteps.size()});
  EXPECT_EQ(forced, ids("#### "));
  EXPECT_EQ(cap, 5 + 6);
  EXPECT_TRUE(drive(h, kLong, 0, 0, -1).empty());                             // once per sequence
  EXPECT_TRUE(drive(h, kLong, 0, 3, 1).empty());                              // forks are not edited again
  EXPECT_TRUE(drive(h, kWrong, 1, 0, -1).empty());                            // a wrong answer never verifies
  EXPECT_TRUE(drive(h, "#### 33\n12+21=33\n", 1, 1, -1).empty());             // after the answer line: nothing
  EXPECT_EQ(drive(h, kShort, 1, 2, -1), std::vector<size_t>{kSteps.size()});  // forks; composition drops it (no saving)
  EXPECT_EQ(static_cast<DreHook*>(h)->forked(), (std::set<std::pair<int64_t, int64_t>>{{1, 0}, {2, 2}}));
  cfg.mode = DreMode::offline;
  Dre off(cfg);
  off.attach(env);
  EXPECT_EQ(off.rollout_hook(round), nullptr);
}

TEST(Dre, OnlineHookOnARankShareKeysSequencesByTheRoundPosition) {
  // Data-parallel: this rank runs the round's requests 1 and 3 as its requests 0 and 1; the hook
  // reads problem first + 1 / first + 3 and records global keys.
  Env e;
  MethodEnv env = e.env();
  Dre dre(DreConfig{});
  dre.attach(env);
  std::vector<tasks::Problem> problems(5, problem());
  problems[2].answer = "34";  // request 0 of this rank: round position 1, problem 2, where 33 is wrong
  const std::vector<int64_t> mine = {1, 3};
  RolloutRound round{0, 0, &problems, 1, &mine};
  rollout::RolloutHook* h = dre.rollout_hook(round);
  EXPECT_TRUE(drive(h, kLong, 0, 0, -1).empty());                            // problem 2 wants 34
  EXPECT_EQ(drive(h, kLong, 1, 0, -1), std::vector<size_t>{kSteps.size()});  // problem 4
  EXPECT_EQ(static_cast<DreHook*>(h)->forked(), (std::set<std::pair<int64_t, int64_t>>{{4, 0}}));
}

TEST(Dre, CompositionKeepsOnlyCorrectEditsThatSaveTokensAndAppliesTheMode) {
  for (DreCompose mode : {DreCompose::add_beside, DreCompose::add_and_prefer, DreCompose::replace}) {
    Env e;
    MethodEnv env = e.env();
    DreConfig cfg;
    cfg.compose = mode;
    cfg.min_tail = 8;
    Dre dre(cfg);
    dre.attach(env);
    std::vector<tasks::Problem> problems(3, problem());
    RolloutRound round{0, 0, &problems, 0};
    rollout::RolloutHook* h = dre.rollout_hook(round);
    // Group 0: a correct overthinking original (member 0) and its fork; a short correct one (member 1).
    // Group 1: a wrong original whose fork happened to verify. Group 2: a correct original whose
    // fork saves fewer than min_tail tokens.
    drive(h, kLong, 0, 0, -1);
    drive(h, kLong, 1, 0, -1);
    drive(h, kSteps + "ok\n#### 33", 2, 0, -1);
    Batch b;
    b.problems = problems;
    b.traj.push_back(traj(kLong, 0, 0));
    b.traj.push_back(traj(kShort, 0, 1));
    Trajectory f0 = traj(kShort, 0, 2, 0);
    f0.lineage.fork_pos = static_cast<int64_t>(kSteps.size());
    b.traj.push_back(f0);
    b.traj.push_back(traj(kWrong, 1, 0));
    b.traj.push_back(traj(kShort, 1, 1, 0));
    b.traj.push_back(traj(kSteps + "ok\n#### 33", 2, 0));
    b.traj.push_back(traj(kShort, 2, 1, 0));
    dre.after_reward(b);
    std::vector<std::string> got;
    for (const Trajectory& t : b.traj)
      got.push_back(std::to_string(t.group) + ":" + std::to_string(t.member) + ":" + std::to_string(t.lineage.parent));
    std::vector<std::string> want = mode == DreCompose::replace
                                        ? std::vector<std::string>{"0:1:-1", "0:2:0", "1:0:-1", "2:0:-1"}
                                        : std::vector<std::string>{"0:0:-1", "0:1:-1", "0:2:0", "1:0:-1", "2:0:-1"};
    EXPECT_EQ(got, want) << "mode " << static_cast<int>(mode);
    EXPECT_EQ(dre.stats().edits, 1);
    EXPECT_EQ(dre.stats().candidates, 3);
    EXPECT_EQ(dre.stats().saved_tokens, static_cast<int64_t>(kLong.size() - kShort.size()));
    for (const Trajectory& t : b.traj) {
      if (t.lineage.parent >= 0) {
        EXPECT_EQ(t.reward, 1.0);
        EXPECT_NE(std::find(t.tags.begin(), t.tags.end(), "dre_edit"), t.tags.end());
      }
      if (t.group == 0 && t.member == 0) {
        EXPECT_DOUBLE_EQ(t.reward, mode == DreCompose::add_and_prefer ? 0.8 : 1.0);
      } else {
        EXPECT_EQ(t.reward, t.correct ? 1.0 : 0.0);
      }
    }
  }
}

TEST(Dre, OfflineRegeneratesTheVerifiedPrefixPlusTheCloseForCorrectOverthinkersOnly) {
  Env e;
  MethodEnv env = e.env();
  DreConfig cfg;
  cfg.mode = DreMode::offline;
  cfg.min_tail = 8;
  Dre dre(cfg);
  dre.attach(env);
  Batch b;
  b.step = 4;
  b.problems.assign(2, problem());
  b.traj.push_back(traj(kLong, 0, 0));      // edited
  b.traj.push_back(traj(kShort, 0, 1));     // no tail
  b.traj.push_back(traj(kWrong, 1, 0));     // wrong: never
  b.traj.push_back(traj("#### 33", 1, 1));  // no early answer
  EXPECT_EQ(dre.rollout_hook(RolloutRound{4, 0, &b.problems, 0}), nullptr);
  dre.after_reward(b);
  ASSERT_EQ(e.requests.size(), 1u);
  std::vector<int32_t> want_prompt = ids(problem().prompt + kSteps);
  EXPECT_EQ(e.requests[0].prompt, want_prompt);
  EXPECT_EQ(e.requests[0].forced, ids("#### "));
  ASSERT_EQ(b.traj.size(), 5u);
  const Trajectory& f = b.traj[4];
  EXPECT_EQ(f.lineage.parent, 0);
  EXPECT_EQ(f.group, 0);
  EXPECT_EQ(f.lineage.fork_pos, static_cast<int64_t>(kSteps.size()));
  EXPECT_EQ(f.lineage.forced_pos, f.lineage.fork_pos);
  EXPECT_EQ(f.lineage.forced, 5);
  std::vector<int32_t> want = ids(kShort);
  want.push_back(kEos);
  EXPECT_EQ(f.tokens, want);
  EXPECT_EQ(f.text, kShort);
  EXPECT_TRUE(f.correct);
  EXPECT_EQ(f.reward, 1.0);
  for (size_t i = 0; i < kSteps.size(); ++i) EXPECT_EQ(f.old_logprob[i], b.traj[0].old_logprob[i]);
  for (size_t i = kSteps.size(); i < f.tokens.size(); ++i) EXPECT_EQ(f.old_logprob[i], -0.5f);
  EXPECT_DOUBLE_EQ(b.traj[0].reward, 0.8);  // add_and_prefer
  // Overthinking ratio: correct rollouts' tokens between the answer and the answer line, over their tokens.
  double tail = static_cast<double>(kLong.find("####") - kSteps.size());
  double len = static_cast<double>(kLong.size() + 1 + kShort.size() + 1 + 8);  // "#### 33" is correct too
  EXPECT_NEAR(dre.stats().overthink_correct, tail / len, 1e-12);
  // Incorrect: measured against the rollout's own final answer (34 appears at the end of line 2).
  EXPECT_NEAR(dre.stats().overthink_incorrect,
              static_cast<double>(kWrong.find("####") - std::string("7*3=21\n12+21=34\n").size()) /
                  static_cast<double>(kWrong.size() + 1),
              1e-12);
  EXPECT_NEAR(dre.stats().len_correct, len / 3, 1e-12);
}

TEST(Dre, TrainerMasksForcedTokensAndLeavesForksOutOfRolloutStatistics) {
  using namespace temper::test;
  struct ForkFirst : Method, rollout::RolloutHook {
    std::string name() const override { return "fork-first"; }
    rollout::RolloutHook* rollout_hook(const RolloutRound&) override { return this; }
    rollout::HookDecision after_token(const rollout::RolloutRequest&, const rollout::Completion& c) override {
      rollout::HookDecision d;
      if (c.parent < 0 && c.member == 0 && c.tokens.size() == 2) d.forks = 1, d.fork_forced = {1, 2};
      return d;
    }
  } m;
  RlSetup s;
  RlTrainer t(s.model, s.task, codec(), config(), s.safe, {&m});
  Metrics mt = t.step();
  const Batch& b = t.last_batch();
  int forks = 0;
  double len = 0, originals = 0;
  for (const Trajectory& x : b.traj) {
    if (x.lineage.parent < 0) {
      len += static_cast<double>(x.tokens.size()), originals += 1;
      for (float v : x.loss_mask) EXPECT_EQ(v, 1.f);
      continue;
    }
    ++forks;
    EXPECT_EQ(x.lineage.forced_pos, 2);
    EXPECT_EQ(x.lineage.forced, 2);
    ASSERT_GE(x.tokens.size(), 4u);
    EXPECT_EQ(x.tokens[2], 1);
    EXPECT_EQ(x.tokens[3], 2);
    for (size_t i = 0; i < x.tokens.size(); ++i) EXPECT_EQ(x.loss_mask[i], i == 2 || i == 3 ? 0.f : 1.f) << i;
  }
  EXPECT_EQ(forks, 4);
  EXPECT_EQ(value(mt, "sequences"), 28);
  EXPECT_NEAR(value(mt, "response_len_mean"), len / originals, 1e-9);
}
