// Turing rewards (spec methods-other section 2): the judge's gap-to-rating thresholds; the order of the
// pair fixed by SHA-256 parity (values from Python's hashlib); swapping A and B with the rating mirrored
// gives the same s; ratings above the cap (6, 7) earn the cap's reward; format bonuses, hard zeros and the
// length penalty to the exact values of steps 3e-3g; the scripted judge prefers the reply in the user's
// own style and penalises assistant-like and copied turns; the method writes those rewards into a batch.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "temper/core/error.h"
#include "temper/rl/methods/turing.h"
#include "temper/rl/pairwise_judge.h"
#include "temper/rl/turing_reward.h"

using namespace temper;
using namespace temper::rl;

namespace {

// Rates with a fixed rating, recording what it was shown.
struct FixedJudge : PairwiseJudge {
  int rating = 4;
  std::string a, b;
  std::string name() const override { return "fixed"; }
  int rate(const tasks::Problem&, const std::string& x, const std::string& y) override {
    a = x, b = y;
    return rating;
  }
};

// Knows which text is "human" (the real reply): rates the pair from that.
struct OracleJudge : PairwiseJudge {
  std::string name() const override { return "oracle"; }
  int rate(const tasks::Problem& p, const std::string& x, const std::string& y) override {
    return rating_from_gap((y == p.answer ? 1.5 : 0.0) - (x == p.answer ? 1.5 : 0.0));
  }
};

tasks::Problem item(const std::string& id, const std::string& real) {
  tasks::Problem p;
  p.id = id;
  p.answer = real;
  p.history = {"lol the bus was late again!", "lol pizza tonight!", "lol i forgot my keys!"};
  p.context = "ASSISTANT: How was the concert last night?";
  return p;
}

}  // namespace

TEST(Turing, GapToRatingThresholds) {
  const std::vector<std::pair<double, int>> cases = {{-5, 1}, {-2, 1}, {-1.99, 2}, {-1, 2}, {-0.99, 3}, {-0.25, 3}, {-0.24, 4}, {0, 4},
                                                     {0.249, 4}, {0.25, 5}, {0.99, 5}, {1, 6}, {1.99, 6}, {2, 7}, {9, 7}};
  for (auto [gap, want] : cases) EXPECT_EQ(rating_from_gap(gap), want) << "gap " << gap;
}

TEST(Turing, OrderIsTheParityOfSha256) {
  // int(hashlib.sha256(f"{key}|{reply}".encode()).hexdigest(), 16) % 2 == 0
  EXPECT_FALSE(generated_is_b("a", "1"));
  EXPECT_TRUE(generated_is_b("a", "2"));
  EXPECT_FALSE(generated_is_b("a", "3"));
  EXPECT_TRUE(generated_is_b("a", "4"));
  EXPECT_TRUE(generated_is_b("b", "hello"));
  EXPECT_FALSE(generated_is_b("e", "hello"));
  EXPECT_FALSE(generated_is_b("conv-1", "ok sounds good"));
}

TEST(Turing, SwappingThePairWithTheRatingMirroredGivesTheSameScore) {
  for (int r = 1; r <= 7; ++r) EXPECT_EQ(turing_score(r, true), turing_score(8 - r, false));
  // Through the reward: the same reply shown as B (problem "b") and as A (problem "e"); a judge that sees
  // through it rates from the side it is on, and s comes out the same.
  OracleJudge judge;
  TuringRewardConfig cfg;
  const std::string c = "<reasoning>i liked it</reasoning>\n[HUMAN]: hello";
  TuringReward as_b = turing_reward(judge, item("b", "lol it was great!"), c, cfg), as_a = turing_reward(judge, item("e", "lol it was great!"), c, cfg);
  EXPECT_TRUE(as_b.generated_b);
  EXPECT_FALSE(as_a.generated_b);
  EXPECT_EQ(as_b.rating, 2);  // the real one is A: "surely A"
  EXPECT_EQ(as_a.rating, 6);  // the real one is B
  EXPECT_EQ(as_b.s, 2);
  EXPECT_EQ(as_a.s, 2);
  EXPECT_EQ(as_b.total, as_a.total);
}

TEST(Turing, RatingsAboveTheCapEarnTheCapsReward) {
  TuringRewardConfig cfg;
  FixedJudge j;
  const tasks::Problem p = item("b", "hello");
  const std::string c = "<reasoning>i liked it</reasoning>\n[HUMAN]: hello";  // shown as B: s = rating
  std::vector<double> r(8);
  for (int k = 1; k <= 7; ++k) {
    j.rating = k;
    TuringReward t = turing_reward(j, p, c, cfg);
    ASSERT_EQ(t.s, k);
    r[static_cast<size_t>(k)] = t.total;
    EXPECT_NEAR(t.turing, 0.9 * (std::min(k, 5) - 1) / 6.0, 1e-12);
  }
  EXPECT_EQ(r[6], r[7]);
  EXPECT_EQ(r[5], r[6]);
  EXPECT_LT(r[4], r[5]);
  EXPECT_NEAR(r[5], 0.9 * 4 / 6 + 0.1, 1e-12);
  EXPECT_EQ(j.a, "hello");  // what the judge saw: the real one as A, the parsed reply as B
  EXPECT_EQ(j.b, "hello");
}

TEST(Turing, FormatHardZeroAndLengthShaping) {
  TuringRewardConfig cfg;
  FixedJudge j;  // rating 4
  tasks::Problem p = item("conv-1", "ok sounds fine");
  // "ok sounds good" is shown as A (parity above): s = 8 - 4 = 4, turing = 0.45; both format checks pass.
  TuringReward r = turing_reward(j, p, "<reasoning>i agree</reasoning>\n[HUMAN]: ok sounds good", cfg);
  EXPECT_FALSE(r.generated_b);
  EXPECT_EQ(r.s, 4);
  EXPECT_NEAR(r.format, 0.1, 1e-12);
  EXPECT_EQ(r.length, 0);
  EXPECT_NEAR(r.total, 0.55, 1e-12);
  // Two [HUMAN]: tags: one bonus; a second block after the reply: none; two reasoning blocks: one bonus.
  EXPECT_NEAR(turing_reward(j, p, "<reasoning>i agree</reasoning>\n[HUMAN]: x [HUMAN]: ok sounds good", cfg).format, 0.05, 1e-12);
  EXPECT_NEAR(turing_reward(j, p, "<reasoning>i agree</reasoning>\n[HUMAN]: ok <reasoning>hm</reasoning>", cfg).format, 0, 1e-12);  // two blocks, one after
  EXPECT_NEAR(turing_reward(j, p, "<reasoning>a</reasoning><reasoning>b</reasoning>\n[HUMAN]: ok sounds good", cfg).format, 0.05, 1e-12);
  // Hard zeros: no reasoning, reasoning without a letter, no reply. The judge is not asked.
  for (const char* c : {"[HUMAN]: ok sounds good", "<reasoning>... 42</reasoning>\n[HUMAN]: ok sounds good", "<reasoning>fine</reasoning>\n[HUMAN]:"}) {
    TuringReward z = turing_reward(j, p, c, cfg);
    EXPECT_TRUE(z.hard_zero) << c;
    EXPECT_EQ(z.total, 0) << c;
    EXPECT_EQ(z.rating, 0) << c;
  }
  TuringRewardConfig plain = cfg;  // a format without reasoning: no hard zero, no reasoning bonus
  plain.reasoning = false;
  EXPECT_NEAR(turing_reward(j, p, "[HUMAN]: ok sounds good", plain).total, 0.45 + 0.05, 1e-12);
  // Length: rho = 1/5 -> (0.8 - 0.2) / 0.8 x 0.35 = 0.2625, capped at 0.25; rho = 2 -> 0.9 / 1.1 x 0.15.
  EXPECT_NEAR(length_penalty(1, 5, cfg), 0.25, 1e-12);
  EXPECT_NEAR(length_penalty(3, 5, cfg), 0.2 / 0.8 * 0.35, 1e-12);
  EXPECT_NEAR(length_penalty(4, 2, cfg), 0.9 / 1.1 * 0.15, 1e-12);
  EXPECT_EQ(length_penalty(5, 5, cfg), 0);
  EXPECT_EQ(length_penalty(11, 10, cfg), 0);
  // The total never goes below zero: s = 1 (shown as A, rated 7) and the largest length penalty.
  j.rating = 7;
  tasks::Problem q = item("conv-3", "one two three four five six seven eight nine ten");
  TuringReward low = turing_reward(j, q, "<reasoning>hm</reasoning>\n[HUMAN]: ok", cfg);
  EXPECT_EQ(low.s, 1);
  EXPECT_NEAR(low.turing + low.format - low.length, 0 + 0.1 - 0.25, 1e-12);
  EXPECT_EQ(low.total, 0);
}

TEST(Turing, ScriptedJudgePrefersTheUsersOwnStyle) {
  tasks::Problem p = item("x", "lol the concert was loud!");
  const std::string mine = "lol the concert was loud!", plain = "The concert was loud.", bot = "Sure! How can I help you with the concert?";
  TurnScore s = ScriptedJudge::score(p, mine);
  EXPECT_EQ(s.target, 1);        // "concert" is in the context
  EXPECT_NEAR(s.goal, std::exp(-std::fabs(std::log(6.0 / (14.0 / 3 + 1)))), 1e-12);
  EXPECT_NEAR(s.style, 1.0, 1e-12);  // no capitals as the history, uses "lol", ends with '!'
  EXPECT_EQ(s.penalty, 0);
  TurnScore t = ScriptedJudge::score(p, plain);
  EXPECT_LT(t.style, 0.5);
  EXPECT_NEAR(ScriptedJudge::score(p, bot).penalty, 0.75, 1e-12);  // assistant-like: 3 x 1/4
  EXPECT_NEAR(ScriptedJudge::score(p, "lol the bus was late again for sure").penalty, 0.75, 1e-12);  // copies 5 words of the history
  ScriptedJudge j;
  EXPECT_GE(j.rate(p, plain, mine), 5);  // B is the user's
  EXPECT_LE(j.rate(p, mine, plain), 3);
  EXPECT_EQ(j.rate(p, mine, mine), 4);
  EXPECT_LE(j.rate(p, mine, bot), 2);
  EXPECT_EQ(ScriptedJudge::score(p, "   ").total(), 0);
}

TEST(Turing, MethodWritesTheRewardsAndReportsThem) {
  TuringConfig cfg;
  Turing m(cfg);
  Batch b;
  b.problems = {item("b", "lol the concert was loud!")};
  const std::vector<std::string> texts = {"<reasoning>i liked it</reasoning>\n[HUMAN]: lol the concert was loud!",
                                          "<reasoning>i liked it</reasoning>\n[HUMAN]: Sure! How can I help?", "[HUMAN]: no reasoning"};
  for (const std::string& t : texts) {
    Trajectory tr;
    tr.text = t;
    tr.reward = -1;
    b.traj.push_back(tr);
  }
  m.after_reward(b);
  ScriptedJudge judge;
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(b.traj[i].reward, turing_reward(judge, b.problems[0], texts[i], cfg.reward).total) << i;
  EXPECT_GT(b.traj[0].reward, b.traj[1].reward);
  EXPECT_EQ(b.traj[2].reward, 0);
  Metrics ms;
  m.metrics(ms);
  std::map<std::string, double> got(ms.begin(), ms.end());
  EXPECT_NEAR(got.at("turing_hard_zero"), 1.0 / 3, 1e-12);
  EXPECT_NEAR(got.at("turing_reward_mean"), (b.traj[0].reward + b.traj[1].reward) / 3, 1e-12);
  EXPECT_EQ(got.at("turing_judged_human"), 0.5);  // the copy of the real turn: s = 4 ("cannot tell")
  TuringConfig bad;
  bad.reward.cap = 9;
  EXPECT_THROW(Turing{bad}, Error);
  bad = {};
  bad.refit.rounds = 2;  // refits without the steps between them
  EXPECT_THROW(Turing{bad}, Error);
}
