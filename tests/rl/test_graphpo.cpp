// GraphPO's graph advantage: with one step per rollout it is GRPO's advantage exactly; on a hand-built
// graph (two paths merging into one state by different routes, a shared physical edge, a separate state)
// every correctness and efficiency advantage matches the hand computation; a merge that would close a
// cycle is refused; merging off is a prefix tree; rollouts are cut into steps where the task's state
// extractor reports a new state; in the trainer every token carries its step's advantage.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "rl/byte_codec.h"
#include "rl/graphpo_setting.h"
#include "rl/letter_task.h"
#include "temper/core/error.h"
#include "temper/rl/methods/graphpo.h"
#include "temper/rl/rl_trainer.h"
#include "temper/rl/state_graph.h"
#include "temper/tasks/arithmetic.h"

using namespace temper;
using namespace temper::rl;

namespace {

std::vector<double> standardised(std::vector<double> x) {
  double mean = 0, ss = 0;
  for (double v : x) mean += v;
  mean /= double(x.size());
  for (double v : x) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / double(x.size() - 1));
  for (double& v : x) v = (v - mean) / (sd + 1e-4);
  return x;
}

GraphPath path(std::vector<GraphStep> s, double r) {
  return GraphPath{std::move(s), r};
}

}  // namespace

TEST(GraphPo, OneStepPerRolloutIsGrpo) {
  const std::vector<double> r = {1, 0, 0, 1, 1};
  std::vector<GraphPath> paths;
  for (size_t i = 0; i < r.size(); ++i) paths.push_back(path({{"answer " + std::to_string(i), "", 3}}, r[i]));
  for (bool merge : {true, false}) {
    GraphConfig c;
    c.merge = merge;
    auto credit = graph_advantages(paths, c);
    const std::vector<double> want = standardised(r);
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_NEAR(credit[i][0].advantage, want[i], 1e-12);
      EXPECT_EQ(credit[i][0].efficiency, 0);
      EXPECT_TRUE(credit[i][0].counted);
    }
  }
}

TEST(GraphPo, HandBuiltGraph) {
  // P0: a -> X -> leaf (1); P1: b -> X -> leaf (0) (X by a longer route); P2: a -> X -> leaf (0) (shares edge
  // "a" with P0); P3: f -> Y -> leaf (1).
  std::vector<GraphPath> paths = {path({{"a", "X", 2}, {"c", "", 1}}, 1), path({{"b", "X", 4}, {"d", "", 1}}, 0),
                                  path({{"a", "X", 2}, {"e", "", 1}}, 0), path({{"f", "Y", 3}, {"g", "", 1}}, 1)};
  GraphConfig cfg;
  GraphStats st;
  auto credit = graph_advantages(paths, cfg, &st);
  EXPECT_EQ(st.tree_nodes, 3);  // n_a, n_b, n_f
  EXPECT_EQ(st.classes, 2);     // X = {n_a, n_b}, Y = {n_f}
  EXPECT_EQ(st.edges, 7);       // 3 from the root, 4 to leaves
  EXPECT_EQ(st.shared_steps, 1);
  // Scores: S(n_a) = 1/2, S(n_b) = 0, S(n_f) = 1; S_class(X) = 1/3 (P0, P1, P2), S_class(Y) = 1.
  const double pa = 0.7 / 3 + 0.3 * 0.5, pb = 0.7 / 3, pf = 1.0;
  const std::vector<double> root = standardised({pa, pb, pf});  // edges leaving the root
  const std::vector<double> fromx = standardised({1, 0, 0});    // leaves of n_a (P0, P2) and n_b (P1)
  const std::vector<double> intox = standardised({-2, -4});     // routes into X: 2 and 4 tokens
  EXPECT_NEAR(credit[0][0].correctness, root[0], 1e-12);
  EXPECT_NEAR(credit[1][0].correctness, root[1], 1e-12);
  EXPECT_NEAR(credit[3][0].correctness, root[2], 1e-12);
  EXPECT_NEAR(credit[0][0].efficiency, intox[0], 1e-12);  // the shorter route is preferred
  EXPECT_NEAR(credit[1][0].efficiency, intox[1], 1e-12);
  EXPECT_EQ(credit[3][0].efficiency, 0);  // Y is reached one way
  EXPECT_NEAR(credit[0][0].advantage, root[0] + intox[0], 1e-12);
  EXPECT_NEAR(credit[0][1].correctness, fromx[0], 1e-12);  // P0's leaf, grouped with P2's and P1's (all leave X)
  EXPECT_NEAR(credit[2][1].correctness, fromx[1], 1e-12);
  EXPECT_NEAR(credit[1][1].correctness, fromx[2], 1e-12);
  EXPECT_EQ(credit[3][1].advantage, 0);  // the only edge leaving Y
  EXPECT_TRUE(credit[0][0].counted);
  EXPECT_FALSE(credit[2][0].counted);  // P2's copy of edge "a"
  EXPECT_NEAR(credit[2][0].advantage, credit[0][0].advantage, 1e-12);
  // Without merging: a prefix tree; n_a and n_b are compared only through the root, no efficiency group.
  cfg.merge = false;
  auto tree = graph_advantages(paths, cfg, &st);
  EXPECT_EQ(st.classes, 3);
  const std::vector<double> root_tree = standardised({0.5, 0.0, 1.0});
  EXPECT_NEAR(tree[0][0].advantage, root_tree[0], 1e-12);
  EXPECT_NEAR(tree[0][1].advantage, standardised({1, 0})[0], 1e-12);  // n_a's two leaves only
  EXPECT_EQ(tree[1][1].advantage, 0);
  // The efficiency weight scales A_eff only.
  cfg.merge = true;
  cfg.efficiency = 0;
  EXPECT_NEAR(graph_advantages(paths, cfg)[0][0].advantage, root[0], 1e-12);
}

TEST(GraphPo, MergesThatWouldCloseACycleAreRefused) {
  // P0 reaches X then Y; P1 reaches Y then X: merging P1's X into P0's X would make X -> Y -> X.
  std::vector<GraphPath> paths = {path({{"x", "X", 1}, {"y", "Y", 1}, {"end", "", 1}}, 1),
                                  path({{"y", "Y", 1}, {"x", "X", 1}, {"end", "", 1}}, 0)};
  GraphStats st;
  auto credit = graph_advantages(paths, GraphConfig{}, &st);
  EXPECT_EQ(st.refused, 1);
  EXPECT_EQ(st.tree_nodes, 4);
  EXPECT_EQ(st.classes, 3);               // X, Y (merged: P1's first step joins P0's Y) and P1's own X
  EXPECT_NE(credit[1][0].efficiency, 0);  // P1 reaches Y in 1 token, P0 in 2: an incoming group of two
  EXPECT_EQ(credit[1][1].efficiency, 0);  // P1's X stayed apart
  EXPECT_THROW(graph_advantages({GraphPath{}}, GraphConfig{}), Error);
  GraphConfig bad;
  bad.pool = 1.5;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(GraphPo, StepsEndWhereTheStateChanges) {
  tasks::ArithmeticTask task(tasks::ArithmeticConfig{});
  tasks::Problem p;
  p.prompt = "3+4*2=";
  p.answer = "11";
  rl::PromptCodec codec = test::byte_codec();
  const std::string text = "4*2=8\nhmm\n3+8=11\n#### 11";
  std::vector<int32_t> toks = test::ids(text);
  toks.push_back(test::kEos);
  std::vector<int64_t> owner;
  std::vector<GraphStep> steps = segment_steps(task, p, codec, toks, &owner);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].text, "4*2=8\n");
  EXPECT_EQ(steps[0].state, "8");
  EXPECT_EQ(steps[1].text, "hmm\n3+8=11\n");  // a line that changes nothing joins the next step
  EXPECT_EQ(steps[1].state, "11");
  EXPECT_EQ(steps[2].text.substr(0, 8), "#### 11");
  EXPECT_EQ(steps[0].tokens + steps[1].tokens + steps[2].tokens, static_cast<int64_t>(toks.size()));
  ASSERT_EQ(owner.size(), toks.size());
  EXPECT_EQ(owner[0], 0);
  EXPECT_EQ(owner[6], 1);
  EXPECT_EQ(owner.back(), 2);
}

TEST(GraphPo, InTheTrainerWithoutStatesItIsGrpo) {
  // The letter task reports no states: every rollout is one step, and the advantages GraphPO writes equal
  // the GRPO estimator's on the same rollouts (same seed, same weights).
  std::vector<std::vector<float>> adv[2];
  for (int use : {0, 1}) {
    test::RlSetup s;
    GraphPo g{GraphConfig{}};
    std::vector<Method*> ms;
    if (use) ms.push_back(&g);
    RlConfig cfg = test::config();
    cfg.optimizer.lr.peak = 1e-30;
    RlTrainer t(s.model, s.task, test::codec(), cfg, s.safe, ms);
    Metrics m = t.step();
    for (const Trajectory& x : t.last_batch().traj) adv[use].push_back(x.advantage);
    if (use) {
      EXPECT_EQ(test::value(m, "graphpo_states_per_group"), 0);
      EXPECT_EQ(test::value(m, "graphpo_steps_per_rollout"), 1);
    }
  }
  ASSERT_EQ(adv[0].size(), adv[1].size());
  for (size_t i = 0; i < adv[0].size(); ++i) {
    ASSERT_EQ(adv[0][i].size(), adv[1][i].size());
    for (size_t k = 0; k < adv[0][i].size(); ++k) EXPECT_NEAR(adv[0][i][k], adv[1][i][k], 1e-5) << i;
  }
}

TEST(GraphPo, TheExpansionBudgetStopsLaterArrivalsAndTheyShareTheSuffix) {
  // Budget 1 on arithmetic "3+4*2=": member 0 reaches state 8 first and continues; member 1 reaches 8 later
  // and stops there; member 2 takes another route (state 7) and continues. After scoring, member 1's reward
  // is the mean of the finished paths through 8 (member 0's), and its last step joins the graph at 8.
  test::GraphPoSetting set;
  GraphPoConfig cfg;
  cfg.expand_budget = 1;
  GraphPo g(cfg);
  g.attach(set.env);
  Batch b;
  b.problems = set.problems;
  rollout::RolloutHook* hook = g.rollout_hook(set.round);
  ASSERT_NE(hook, nullptr);
  const std::vector<std::string> texts = {"4*2=8\n3+8=11\n#### 11", "hm\n4*2=8\n", "3+4=7\n#### 7"};
  const test::Lockstep run = test::run_lockstep(*hook, texts);
  EXPECT_EQ(run.stopped, (std::vector<bool>{false, true, false}));
  for (int64_t m = 0; m < 3; ++m) {
    Trajectory t;
    t.problem = 0, t.group = 0, t.member = m;
    t.tokens = run.completions[static_cast<size_t>(m)].tokens;
    t.text = texts[static_cast<size_t>(m)];
    t.finish = run.stopped[static_cast<size_t>(m)] ? rollout::FinishReason::hook : rollout::FinishReason::stop;
    t.reward = m == 0 ? 1.0 : 0.0;  // the verifier's: member 1's cut text has no answer
    t.loss_mask.assign(t.tokens.size(), 1.f);
    b.traj.push_back(t);
  }
  g.after_reward(b);
  EXPECT_EQ(b.traj[1].reward, 1.0);  // member 0 is the finished path through 8
  EXPECT_EQ(b.traj[2].reward, 0.0);
  ASSERT_TRUE(g.advantages(b));
  Metrics m;
  g.metrics(m);
  EXPECT_EQ(test::value(m, "graphpo_stopped"), 1);
  EXPECT_EQ(test::value(m, "graphpo_tokens_per_group"), double(texts[0].size() + 9 + texts[2].size()));
  // The graph: 8 is reached by member 0 in 6 tokens and by member 1 in 9: member 1's route into 8 is the longer.
  EXPECT_LT(b.traj[1].advantage.back(), b.traj[0].advantage.front());
  GraphPath open{{{"hm\n4*2=8\n", "8", 9}}, 1.0, true};
  GraphPath closed{{{"4*2=8\n", "8", 6}, {"3+8=11\n#### 11", "", 14}}, 1.0, false};
  GraphStats st;
  auto credit = graph_advantages({closed, open}, GraphConfig{}, &st);
  EXPECT_EQ(st.classes, 1);  // the open path's last step merged into 8
  EXPECT_NEAR(credit[1][0].efficiency, standardised({-6, -9})[1], 1e-12);
}

TEST(GraphPo, CosineClustersAndLineSteps) {
  const std::vector<std::vector<float>> v = {{1, 0}, {0.99f, 0.1f}, {0, 1},       {0.6f, 0.8f},
                                             {0, 0}, {0, 0},        {0.5f, 0.01f}};
  EXPECT_EQ(cosine_clusters(v, 0.92), (std::vector<int64_t>{0, 0, 1, 2, 3, 3, 0}));
  EXPECT_EQ(cosine_clusters(v, 0.5),
            (std::vector<int64_t>{0, 0, 1, 0, 2, 2, 0}));  // 0.6 >= 0.5: joins the first founder
  std::vector<int64_t> owner;
  auto steps = segment_lines(test::byte_codec(), test::ids("a\nbb\nc"), &owner);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].text, "a\n");
  EXPECT_EQ(steps[1].tokens, 3);
  EXPECT_EQ(steps[2].text, "c");
  EXPECT_EQ(owner, (std::vector<int64_t>{0, 0, 1, 1, 1, 2}));
  EXPECT_EQ(segment_lines(test::byte_codec(), test::ids("a\n"), nullptr).size(), 1u);
}

TEST(GraphPo, EmbeddingEquivalenceMergesLinesWithTheSameMeaning) {
  // Features: each letter or digit its own axis, spaces and line ends none, so "x=5" and "x = 5" point the
  // same way (cosine 1) and "y=7" elsewhere. The advantages GraphPO writes are graph_advantages' on paths
  // whose first steps carry the cluster keys by hand.
  const std::vector<std::string> texts = {"x=5\nA", "x = 5\nB", "y=7\nA", "y=7\nC"};
  Batch b = test::graphpo_group(texts, {1, 1, 0, 1});
  GraphPoConfig c;
  c.equivalence = Equivalence::embedding;
  c.pooling = StatePooling::mean;  // the mean over a step's tokens (the line end's own row is 0 here)
  GraphPo g(c);
  MethodEnv env;
  const PromptCodec codec = test::byte_codec();
  env.codec = &codec;
  g.attach(env);
  g.set_features([](const Trajectory& t) {
    std::vector<float> f(t.tokens.size() * 64, 0.f);
    for (size_t i = 0; i < t.tokens.size(); ++i)
      if (std::isalnum(t.tokens[i]) || t.tokens[i] == '=') f[i * 64 + static_cast<size_t>(t.tokens[i]) % 64] = 1.f;
    return f;
  });
  ASSERT_TRUE(g.advantages(b));
  std::vector<GraphPath> paths = {
      path({{"x=5\n", "e0", 4}, {"A", "", 1}}, 1), path({{"x = 5\n", "e0", 6}, {"B", "", 1}}, 1),
      path({{"y=7\n", "e1", 4}, {"A", "", 1}}, 0), path({{"y=7\n", "e1", 4}, {"C", "", 1}}, 1)};
  GraphStats st;
  auto credit = graph_advantages(paths, GraphConfig{}, &st);
  EXPECT_EQ(st.classes, 2);  // "x=5" and "x = 5" are one state
  for (size_t k = 0; k < paths.size(); ++k) {
    const Trajectory& t = b.traj[k];
    size_t i = 0;
    for (size_t s = 0; s < paths[k].steps.size(); ++s)
      for (int64_t j = 0; j < paths[k].steps[s].tokens; ++j, ++i) {
        EXPECT_NEAR(t.advantage[i], credit[k][s].advantage, 1e-6) << k << " " << i;
        EXPECT_EQ(t.loss_mask[i], credit[k][s].counted ? 1.f : 0.f);
      }
  }
  // The shared "y=7" edge is in the loss once; the merged state pools "x=5" and "x = 5".
  EXPECT_EQ(b.traj[3].loss_mask[0], 0.f);
  Metrics m;
  g.metrics(m);
  EXPECT_NEAR(test::value(m, "graphpo_merge_rate"), 1.0 - 2.0 / 3.0, 1e-9);  // 3 tree states, 2 classes
  // Below the threshold nothing merges: a cosine of 1 is needed at similarity 1, and "x=5" vs "y=7" is 0.
  c.similarity = 1.0;
  GraphPo strict(c);
  strict.attach(env);
  strict.set_features([](const Trajectory& t) { return std::vector<float>(t.tokens.size(), 1.f); });  // all alike
  ASSERT_TRUE(strict.advantages(b));
  Metrics m2;
  strict.metrics(m2);
  EXPECT_NEAR(test::value(m2, "graphpo_merge_rate"), 1.0 - 1.0 / 3.0, 1e-9);  // identical features: one class
}

namespace {
struct EnvProbe : Method {  // keeps the trainer's MethodEnv
  MethodEnv env;
  std::string name() const override { return "probe"; }
  void attach(const MethodEnv& e) override { env = e; }
};
}  // namespace

TEST(GraphPo, EmbeddingEquivalenceInTheTrainerUsesThePolicysHiddenStates) {
  // The features GraphPO reads by default (MethodEnv::hidden) are the policy's final hidden states at the
  // completion's tokens: rows T_prompt .. T-1 of forward_hidden over prompt + completion.
  test::RlSetup s;
  GraphPoConfig c;
  c.equivalence = Equivalence::embedding;
  GraphPo g(c);
  EnvProbe probe;
  RlConfig cfg = test::config();
  RlTrainer t(s.model, s.task, test::codec(), cfg, s.safe, {&g, &probe});
  const std::vector<int32_t> prompt = {1, 2, 3}, tokens = {4, 5};
  const std::vector<float> h = probe.env.hidden(prompt, tokens);
  const int64_t H = s.model.config().hidden_size;
  ASSERT_EQ(static_cast<int64_t>(h.size()), 2 * H);
  std::vector<int32_t> all = {1, 2, 3, 4, 5};
  std::vector<float> ref(static_cast<size_t>(5 * H));
  s.model.forward_hidden(all.data(), 1, 5, ref.data());
  for (int64_t i = 0; i < 2 * H; ++i) ASSERT_FLOAT_EQ(h[static_cast<size_t>(i)], ref[static_cast<size_t>(3 * H + i)]);
  Metrics m = t.step();
  for (const Trajectory& x : t.last_batch().traj)
    for (float a : x.advantage) ASSERT_TRUE(std::isfinite(a));
  EXPECT_TRUE(std::isfinite(test::value(m, "adv_token_var")));
  GraphPoConfig bad = c;
  bad.expansion = Expansion::stepwise;  // stops sequences at task states: not with embeddings
  EXPECT_THROW(GraphPo{bad}, Error);
}

namespace {
struct MaskProbe : Method {  // what a method's advantages() sees of the loss mask
  int64_t sized = 0, total = 0, forced_in_loss = 0;
  std::string name() const override { return "mask_probe"; }
  bool advantages(Batch& b) override {
    for (const Trajectory& t : b.traj) {
      ++total;
      if (t.loss_mask.size() == t.tokens.size()) ++sized;
    }
    return false;
  }
};
}  // namespace

TEST(GraphPo, TheLossMaskIsSizedBeforeMethodsAdvantages) {
  // GraphPO takes later copies of a shared edge out of the loss mask inside advantages(); the trainer once
  // sized the mask only after, so those writes went past its end (a crash on arithmetic rollouts).
  test::RlSetup s;
  MaskProbe probe;
  RlTrainer t(s.model, s.task, test::codec(), test::config(), s.safe, {&probe});
  t.step();
  EXPECT_EQ(probe.total, 24);
  EXPECT_EQ(probe.sized, probe.total);
}

TEST(GraphPo, ReallocationGivesEachStoppedSequencesBudgetToTheNextNewState) {
  // Budget 1 on "3+4*2=": member 1 stops at state 8 (member 0 continues from it) at token 9, which earns the
  // group one fork; the next sequence to reach a state new to the group gets it: member 0 reaching 11 at
  // token 13, not member 2 reaching 7 at token 17 (the credit is spent), and not member 0's first state 8
  // at token 6 (no credit yet). Without reallocation nobody forks; a fork's own arrivals count toward the
  // budget but never stop it.
  test::GraphPoSetting set;
  const std::vector<std::string> texts = {"4*2=8\n3+8=11\n#### 11", "hm\n4*2=8\n", "abcdefghij\n3+4=7\n#### 7"};
  for (bool reallocate : {false, true}) {
    SCOPED_TRACE(reallocate ? "reallocate" : "budget only");
    GraphPoConfig cfg;
    cfg.expand_budget = 1;
    cfg.reallocate = reallocate;
    GraphPo g(cfg);
    g.attach(set.env);
    rollout::RolloutHook* hook = g.rollout_hook(set.round);
    ASSERT_NE(hook, nullptr);
    const test::Lockstep run = test::run_lockstep(*hook, texts);
    EXPECT_EQ(run.stopped, (std::vector<bool>{false, true, false}));
    for (int64_t n : run.forks) EXPECT_EQ(n, 1);
    if (!reallocate) {
      EXPECT_TRUE(run.forked_at.empty());
      continue;
    }
    EXPECT_EQ(run.forked_at, (std::map<int64_t, size_t>{{0, 13}}));
    rollout::RolloutRequest req;
    // The fork (of member 0 at 11) reaching 7, already expanded by member 2: it goes on. Then it reaches 10,
    // new to the group: that arrival counts, so a later original reaching 10 stops there.
    rollout::Completion fork;
    fork.member = 3;
    fork.parent = 0;
    fork.fork_pos = 13;
    auto line = [&](rollout::Completion& c, const std::string& text) {
      rollout::HookDecision d;
      for (char ch : text) {
        c.tokens.push_back(static_cast<unsigned char>(ch));
        d = hook->after_token(req, c);
        if (d.stop) break;
      }
      return d;
    };
    for (char ch : std::string("4*2=8\n3+8=11\n")) fork.tokens.push_back(static_cast<unsigned char>(ch));
    EXPECT_FALSE(line(fork, "7+0=7\n").stop);
    EXPECT_FALSE(line(fork, "11-1=10\n").stop);
    rollout::Completion late;
    late.member = 4;
    EXPECT_TRUE(line(late, "a=10\n").stop);
  }
  GraphPoConfig bad;
  bad.expand_budget = 0;  // step-wise expansion continues from a state at least once
  EXPECT_THROW(bad.validate(), Error);
}
