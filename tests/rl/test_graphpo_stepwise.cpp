// GraphPO's step-wise expansion as the default and the spec's variance measure (issue 42): with the default
// settings a task with states gets the rollout hook, a state reached again stops the later sequence and its budget
// buys a fork at the group's next new state, while a dataset (embedding states) and expansion = "after" merge after
// the fact; the per-edge variance across samplings by hand (two runs, two edges), merged classes give lower
// variance than a prefix tree on a process whose states decide the reward, and the method's metric is that
// measure over each group's two halves.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/scratch.h"
#include "rl/byte_codec.h"
#include "rl/graphpo_setting.h"
#include "rl/letter_task.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/rl/method_spec.h"
#include "temper/rl/methods/graphpo.h"
#include "temper/rl/state_graph.h"
#include "temper/tasks/arithmetic.h"
#include "temper/tasks/dataset.h"

using namespace temper;
using namespace temper::rl;

TEST(GraphPoStepwise, IsTheDefaultWhereTheTaskReportsStates) {
  const GraphPoConfig c;
  EXPECT_EQ(c.expansion, Expansion::automatic);
  EXPECT_EQ(c.expand_budget, 1);
  EXPECT_TRUE(c.reallocate);
  EXPECT_EQ(graphpo_expansion(c, Equivalence::state), Expansion::stepwise);
  EXPECT_EQ(graphpo_expansion(c, Equivalence::embedding), Expansion::after);
  // The default on arithmetic: a state reached again stops the later sequence (member 1 at 8, after member 0), and
  // the stop buys one fork for the next sequence reaching a state new to the group (member 0 at 11, token 13).
  test::GraphPoSetting set;
  GraphPo g{GraphPoConfig{}};
  g.attach(set.env);
  rollout::RolloutHook* hook = g.rollout_hook(set.round);
  ASSERT_NE(hook, nullptr);
  const std::vector<std::string> texts = {"4*2=8\n3+8=11\n#### 11", "hm\n4*2=8\n", "abcdefghij\n3+4=7\n#### 7"};
  const test::Lockstep run = test::run_lockstep(*hook, texts);
  EXPECT_EQ(run.stopped, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(run.forked_at, (std::map<int64_t, size_t>{{0, 13}}));
  // After the fact: no hook.
  GraphPoConfig after;
  after.expansion = Expansion::after;
  GraphPo a(after);
  a.attach(set.env);
  EXPECT_EQ(a.rollout_hook(set.round), nullptr);
  // A dataset (no states): "auto" merges its lines by embedding after the fact; "stepwise" there is refused.
  tasks::DatasetConfig dc;
  dc.path = test::write_scratch("graphpo_stepwise", "rows.jsonl", "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n");
  auto dataset = std::make_shared<tasks::DatasetTask>(dc);
  MethodEnv denv = set.env;
  denv.task = dataset;
  GraphPo d{GraphPoConfig{}};
  d.attach(denv);
  EXPECT_EQ(d.rollout_hook(set.round), nullptr);
  GraphPoConfig stepwise;
  stepwise.expansion = Expansion::stepwise;
  test::expect_error([&] { GraphPo(stepwise).attach(denv); },
                     {"rl.graphpo.expansion = \"stepwise\": task 'dataset' reports no reasoning states"});
  stepwise.equivalence = Equivalence::embedding;
  test::expect_error([&] { stepwise.validate(); },
                     {"rl.graphpo.expansion = \"stepwise\" needs equivalence = \"state\""});
  // The fork conflict with other forking methods follows the resolved setting's inputs.
  std::unique_ptr<MethodSetup> setup = kGraphPoMethod.setup();
  EXPECT_TRUE(setup->effects().forks_rollouts);
  dynamic_cast<MethodSetupOf<GraphPoConfig>&>(*setup).cfg.expansion = Expansion::after;
  EXPECT_FALSE(setup->effects().forks_rollouts);
}

TEST(GraphPoStepwise, EdgeVarianceAcrossSamplingsByHand) {
  // Two samplings of one prompt; each has a path root -> A -> leaf and one root -> B -> leaf (equal token counts,
  // so the efficiency term is 0). Run 1 rewards A 1 and B 0, run 2 the reverse: edge root->A has the correctness
  // advantages +-0.5 / (sqrt(0.5) + 1e-4), so its variance across the two runs is 2 x that squared; the same for B.
  auto p = [](const std::string& text, const std::string& state, double r) {
    return GraphPath{{{text, state, 2}, {"#### 1", "", 6}}, r};
  };
  const std::vector<std::vector<GraphPath>> runs = {{p("x\n", "A", 1), p("y\n", "B", 0)},
                                                    {p("x\n", "A", 0), p("y\n", "B", 1)}};
  const double a = 0.5 / (std::sqrt(0.5) + 1e-4);
  EdgeVariance v = graph_edge_variance(runs, GraphConfig{});
  EXPECT_EQ(v.edges, 2);
  EXPECT_NEAR(v.mean(), 2 * a * a, 1e-12);
  // Equal rewards in both runs: the estimates agree, variance 0; an edge in one run only is not counted.
  const std::vector<std::vector<GraphPath>> same = {{p("x\n", "A", 1), p("y\n", "B", 0)},
                                                    {p("x\n", "A", 1), p("y\n", "B", 0), p("z\n", "C", 1)}};
  v = graph_edge_variance(same, GraphConfig{});
  EXPECT_EQ(v.edges, 2);
  EXPECT_GT(v.sum_var, 0);  // C's arrival moves the root's outgoing group: A and B are standardised among three
  const std::vector<std::vector<GraphPath>> twice = {runs[0], runs[0]};
  EXPECT_EQ(graph_edge_variance(twice, GraphConfig{}).sum_var, 0);
  EXPECT_EQ(graph_edge_variance({runs[0]}, GraphConfig{}).edges, 0);
}

TEST(GraphPoStepwise, MergedStatesVaryLessAcrossSamplingsThanAPrefixTree) {
  // The spec's signature: two routes into each of the states A and B (different texts, the same token count), the
  // reward drawn from the state (A: 0.7, B: 0.3). A prefix tree estimates each route from its own few paths; the
  // graph pools the class (w = 0.7). Over 400 pairs of samplings of 8 paths the graph's per-edge variance is lower.
  Rng rng(17, 0);
  double graph = 0, tree = 0;
  GraphConfig merged, prefix;
  prefix.merge = false;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<std::vector<GraphPath>> runs(2);
    for (auto& run : runs)
      for (int k = 0; k < 8; ++k) {
        const uint32_t route = rng.next_u32() % 4;
        const std::string state = route < 2 ? "A" : "B";
        const double r = rng.uniform_f64() < (state == "A" ? 0.7 : 0.3) ? 1.0 : 0.0;
        run.push_back(GraphPath{{{"r" + std::to_string(route) + "\n", state, 3}, {"#### 1", "", 6}}, r});
      }
    graph += graph_edge_variance(runs, merged).mean() / 400;
    tree += graph_edge_variance(runs, prefix).mean() / 400;
  }
  std::printf("per-edge variance across samplings: graph %.4f, prefix tree %.4f\n", graph, tree);
  EXPECT_LT(graph, 0.85 * tree);
  EXPECT_GT(graph, 0);
}

TEST(GraphPoStepwise, TheMetricIsTheMeasureOverEachGroupsHalves) {
  test::GraphPoSetting set;
  GraphPoConfig c;
  c.expansion = Expansion::after;
  GraphPo g(c);
  g.attach(set.env);
  // Members in even positions form one half, odd ones the other; both halves hold both routes.
  const std::vector<std::string> texts = {"4*2=8\n3+8=11\n#### 11", "4*2=8\n3+8=12\n#### 12", "3+4=7\n7*2=14\n#### 14",
                                          "3+4=7\n7*2=14\n#### 11", "4*2=8\n8+3=11\n#### 11", "4*2=8\n3+8=11\n#### 11"};
  Batch b;
  b.problems = set.problems;
  std::vector<std::vector<GraphPath>> halves(2);
  for (size_t m = 0; m < texts.size(); ++m) {
    Trajectory t;
    t.problem = t.group = 0;
    t.member = static_cast<int64_t>(m);
    t.tokens = test::ids(texts[m]);
    t.text = texts[m];
    t.reward = set.env.task->verify(set.problems[0], texts[m]).reward;
    t.loss_mask.assign(t.tokens.size(), 1.f);
    b.traj.push_back(t);
    GraphPath path;
    path.steps = segment_steps(*set.env.task, set.problems[0], set.codec, t.tokens, nullptr);
    path.reward = t.reward;
    halves[m % 2].push_back(path);
  }
  ASSERT_TRUE(g.advantages(b));
  GraphConfig tree;
  tree.merge = false;
  const EdgeVariance want = graph_edge_variance(halves, GraphConfig{}), want_tree = graph_edge_variance(halves, tree);
  EXPECT_EQ(test::graphpo_metric(g, "graphpo_edge_var_edges"), want.edges);
  EXPECT_GE(want.edges, 3);  // "4*2=8", "3+4=7", "4*2=8 | 3+8=11", ...
  EXPECT_NEAR(test::graphpo_metric(g, "graphpo_edge_var"), want.mean(), 1e-12);
  EXPECT_NEAR(test::graphpo_metric(g, "graphpo_edge_var_tree"), want_tree.mean(), 1e-12);
  EXPECT_GT(test::graphpo_metric(g, "graphpo_edge_var"), 0);
  // Off: nothing measured.
  c.edge_variance = false;
  GraphPo off(c);
  off.attach(set.env);
  Batch b2 = b;
  ASSERT_TRUE(off.advantages(b2));
  EXPECT_EQ(test::graphpo_metric(off, "graphpo_edge_var_edges"), 0);
}
