// GraphPO on tasks that report no reasoning states (a `dataset`): equivalence = "auto" merges their lines by the
// policy's hidden states, "state" and the expansion budget are refused there naming the key, the hidden state at a
// step's line end (pooling = "last") decides what merges, and a step where nothing merges logs
// graphpo_nothing_merged = 1 and warns once per run.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/scratch.h"
#include "rl/byte_codec.h"
#include "rl/graphpo_setting.h"
#include "rl/letter_task.h"
#include "temper/core/log.h"
#include "temper/rl/method_spec.h"
#include "temper/rl/methods/graphpo.h"
#include "temper/tasks/arithmetic.h"
#include "temper/tasks/dataset.h"
#include "temper/tasks/mixture.h"

using namespace temper;
using namespace temper::rl;

namespace {

std::shared_ptr<tasks::DatasetTask> dataset() {
  static std::shared_ptr<tasks::DatasetTask> t = [] {
    tasks::DatasetConfig c;
    c.path = test::write_scratch("graphpo_dataset", "rows.jsonl",
                                 R"({"prompt": "Tom has 3 apples and buys 4 more. How many?", "answer": "7"})"
                                 "\n");
    return std::make_shared<tasks::DatasetTask>(c);
  }();
  return t;
}

// Rows: a letter's own axis, except a line end, whose row is the axis of the path's first letter's parity (the
// "state" after the line: 'a' and 'c' lead to the same one, 'b' to another).
std::vector<float> features(const Trajectory& t) {
  std::vector<float> f(t.tokens.size() * 64, 0.f);
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    const size_t axis =
        t.tokens[i] == '\n' ? 60 + static_cast<size_t>(t.tokens[0] % 2) : static_cast<size_t>(t.tokens[i] % 32);
    f[i * 64 + axis] = 1.f;
  }
  return f;
}

}  // namespace

TEST(GraphPoDataset, AutoMergesADatasetsLinesByHiddenStatesAndRefusesWhatCannotWork) {
  GraphPoConfig c;  // equivalence = "auto"
  EXPECT_EQ(graphpo_equivalence(c, *dataset()), Equivalence::embedding);
  EXPECT_EQ(graphpo_equivalence(c, tasks::ArithmeticTask(tasks::ArithmeticConfig{})), Equivalence::state);
  EXPECT_FALSE(graphpo_task_has_states(*dataset()));
  tasks::MixtureTask mixed(
      {{"tasks", "arithmetic,dataset"}, {"dataset.path", test::scratch_path("graphpo_dataset", "rows.jsonl")}});
  EXPECT_EQ(graphpo_equivalence(c, mixed), Equivalence::embedding);
  GraphPoConfig state = c;
  state.equivalence = Equivalence::state;
  const std::string s = test::error_of([&] { graphpo_equivalence(state, *dataset()); });
  EXPECT_NE(s.find("rl.graphpo.equivalence = \"state\": task 'dataset' reports no reasoning states"), std::string::npos)
      << s;
  GraphPoConfig budget = c;
  budget.expansion = Expansion::stepwise;  // the default "auto" merges a dataset's lines after the fact
  const std::string e = test::error_of([&] { graphpo_equivalence(budget, *dataset()); });
  EXPECT_NE(e.find("rl.graphpo.expansion = \"stepwise\": task 'dataset' reports no reasoning states"),
            std::string::npos)
      << e;
  EXPECT_EQ(graphpo_equivalence(budget, tasks::ArithmeticTask(tasks::ArithmeticConfig{})), Equivalence::state);
  // The same refusals before the model loads (the method's setup), and none for the default.
  std::unique_ptr<MethodSetup> setup = kGraphPoMethod.setup();
  EXPECT_EQ(test::error_of([&] { setup->check_task(*dataset()); }), "(no error)");
  dynamic_cast<MethodSetupOf<GraphPoConfig>&>(*setup).cfg.equivalence = Equivalence::state;
  EXPECT_NE(test::error_of([&] { setup->check_task(*dataset()); }).find("rl.graphpo.equivalence"), std::string::npos);
}

TEST(GraphPoDataset, TheHiddenStateAtTheLineEndDecidesWhatMerges) {
  const PromptCodec codec = test::byte_codec();
  MethodEnv env;
  env.task = dataset();
  env.codec = &codec;
  // "a" and "c" reach the same line-end state, "b" another: with pooling = "last" two classes of three states;
  // with the mean over the step's tokens the letters keep them apart.
  const Batch proto = test::graphpo_group({"a\nX", "b\nY", "c\nX"}, {1, 0, 1});
  for (StatePooling pooling : {StatePooling::last, StatePooling::mean}) {
    GraphPoConfig c;
    c.pooling = pooling;
    GraphPo g(c);
    g.attach(env);  // auto on a dataset: embedding
    g.set_features(features);
    Batch b = proto;
    ASSERT_TRUE(g.advantages(b));
    EXPECT_EQ(test::graphpo_metric(g, "graphpo_states_per_group"), 3);
    EXPECT_EQ(test::graphpo_metric(g, "graphpo_classes_per_group"), pooling == StatePooling::last ? 2 : 3);
    EXPECT_EQ(test::graphpo_metric(g, "graphpo_nothing_merged"), pooling == StatePooling::last ? 0 : 1);
    // Merged: "a\n" and "c\n" pool one state value (mean reward 1) against "b\n" (0), so their first steps' advantages
    // are equal and above "b"'s.
    if (pooling == StatePooling::last) {
      EXPECT_FLOAT_EQ(b.traj[0].advantage[0], b.traj[2].advantage[0]);
      EXPECT_GT(b.traj[0].advantage[0], b.traj[1].advantage[0]);
    }
  }
}

TEST(GraphPoDataset, NothingMergedIsLoggedEveryStepAndWarnedOnce) {
  std::vector<std::string> warnings;
  log_set_sink([&](LogLevel level, std::string_view msg) {
    if (level == LogLevel::warn) warnings.emplace_back(msg);
  });
  const PromptCodec codec = test::byte_codec();
  MethodEnv env;
  env.task = std::make_shared<test::LetterTask>();  // a task of its own: "auto" takes its states, and it has none
  env.codec = &codec;
  GraphPo g{GraphPoConfig{}};
  g.attach(env);
  for (int step = 0; step < 3; ++step) {
    Batch b = test::graphpo_group({"abc", "abd", "xyz"}, {1, 0, 1});
    ASSERT_TRUE(g.advantages(b));
    EXPECT_EQ(test::graphpo_metric(g, "graphpo_nothing_merged"), 1);
    EXPECT_EQ(test::graphpo_metric(g, "graphpo_states_per_group"), 0);
  }
  // Merging off (a prefix tree on purpose) is not reported.
  GraphPoConfig tree;
  tree.graph.merge = false;
  GraphPo t(tree);
  t.attach(env);
  Batch b = test::graphpo_group({"abc", "abd"}, {1, 0});
  ASSERT_TRUE(t.advantages(b));
  EXPECT_EQ(test::graphpo_metric(t, "graphpo_nothing_merged"), 0);
  log_set_sink(nullptr);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("graphpo: no rollout of 3 reached an intermediate state (task 'letters')"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("rl.graphpo.equivalence = \"embedding\""), std::string::npos) << warnings[0];
}
