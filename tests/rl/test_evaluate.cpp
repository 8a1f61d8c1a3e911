// temper eval's evaluation with speculative decoding (the model's 4-bit self-drafter): greedy
// completions, accuracy and length are those of plain decoding, and drafts were made and counted.
#include <gtest/gtest.h>

#include "rl/letter_task.h"
#include "temper/rl/evaluate.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

TEST(Evaluate, SpeculativeDecodingGivesThePlainGreedyResult) {
  RlSetup setup;
  auto task = std::make_shared<LetterTask>();
  EvalConfig ec = eval_config(8, 12);
  ec.max_seqs = 2;
  ec.all_examples = true;
  EvalResult plain = evaluate(setup.model, task, codec(), ec, setup.safe);
  ec.speculative_gamma = 4;
  ec.speculative_toggle = rollout::SpecToggle::always;
  EvalResult spec = evaluate(setup.model, task, codec(), ec, setup.safe);
  EXPECT_GT(spec.drafted, 0);
  EXPECT_GT(spec.accepted, 0);
  EXPECT_FALSE(spec.speculative.empty());
  EXPECT_TRUE(plain.speculative.empty());
  EXPECT_EQ(spec.accuracy, plain.accuracy);
  EXPECT_EQ(spec.mean_len, plain.mean_len);
  ASSERT_EQ(spec.examples.size(), plain.examples.size());
  for (size_t i = 0; i < plain.examples.size(); ++i)
    EXPECT_EQ(spec.examples[i].completion, plain.examples[i].completion) << i;
}
