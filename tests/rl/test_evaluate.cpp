// temper eval's evaluation with speculative decoding (the model's 4-bit self-drafter): greedy
// completions, accuracy and length are those of plain decoding, and drafts were made and counted.
#include <gtest/gtest.h>

#include <map>

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

TEST(Evaluate, PassAtKIsTheUnbiasedEstimator) {
  // 1 - C(n - c, k) / C(n, k), by hand: n 5, c 2, k 2: 1 - 3/10; k 1: c / n; no correct sample: 0; fewer wrong
  // samples than k: 1.
  EXPECT_NEAR(pass_at_k(5, 2, 2), 0.7, 1e-12);
  EXPECT_NEAR(pass_at_k(5, 2, 1), 0.4, 1e-12);
  EXPECT_NEAR(pass_at_k(10, 3, 4), 1.0 - 35.0 / 210.0, 1e-12);  // C(7,4) / C(10,4)
  EXPECT_EQ(pass_at_k(8, 0, 4), 0.0);
  EXPECT_EQ(pass_at_k(4, 2, 3), 1.0);
}

namespace {
class LettersByDifficulty : public LetterTask {
 public:
  tasks::Problem problem(tasks::Split s, uint64_t i) const override {
    tasks::Problem p = LetterTask::problem(s, i);
    p.difficulty = static_cast<int>(i % 2) + 1;
    return p;
  }
  tasks::Verdict verify(const tasks::Problem&, const std::string& c) const override {  // any 'a': a mix of both
    tasks::Verdict v;
    v.correct = c.find('a') != std::string::npos;
    v.reward = v.correct ? 1 : 0;
    return v;
  }
};
}  // namespace

TEST(Evaluate, AccuracyPassAtKLengthAndDifficultiesFollowFromTheSamples) {
  // k = 4 sampled completions per problem: every figure of the result recomputed from the samples themselves.
  RlSetup setup;
  auto task = std::make_shared<LettersByDifficulty>();
  EvalConfig ec = eval_config(12, 6);
  ec.samples = 4;
  ec.pass_k = {1, 2, 4};
  ec.all_examples = true;
  ec.greedy = false;
  ec.sampler.temperature = 1.0f;
  EvalResult r = evaluate(setup.model, task, codec(), ec, setup.safe);
  ASSERT_EQ(r.samples, 48);
  ASSERT_EQ(r.examples.size(), 48u);
  std::map<std::string, int64_t> correct;
  std::map<int, std::pair<int64_t, int64_t>> diff;  // difficulty -> (samples, correct)
  double len = 0, right = 0;
  for (const EvalExample& e : r.examples) {
    const tasks::Verdict v = task->verify(task->problem(tasks::Split::eval, std::stoull(e.id)), e.completion);
    EXPECT_EQ(v.correct, e.correct);
    correct[e.id] += e.correct;
    auto& d = diff[static_cast<int>(std::stoull(e.id) % 2) + 1];
    d.first += 1, d.second += e.correct;
    len += static_cast<double>(e.completion.size());  // the letters codec: one character per token
    right += e.correct;
  }
  ASSERT_EQ(correct.size(), 12u);
  EXPECT_GT(right, 0);
  EXPECT_LT(right, 48);  // a mix, so pass@k differs from accuracy
  EXPECT_NEAR(r.accuracy, right / 48, 1e-12);
  EXPECT_NEAR(r.mean_len, len / 48, 1e-12);
  for (int64_t k : {1, 2, 4}) {
    double want = 0;
    for (auto& [id, c] : correct) {
      double none = 1;  // C(4 - c, k) / C(4, k)
      for (int64_t i = 0; i < k; ++i) none *= static_cast<double>(4 - c - i) / static_cast<double>(4 - i);
      want += 1 - std::max(0.0, none);
    }
    EXPECT_NEAR(r.pass_at_k.at(k), want / 12, 1e-12) << "k " << k;
  }
  EXPECT_NEAR(r.pass_at_k.at(1), r.accuracy, 1e-12);
  ASSERT_EQ(r.by_difficulty.size(), 2u);
  for (auto& [d, x] : diff) {
    EXPECT_EQ(r.by_difficulty.at(d).first, x.first);
    EXPECT_NEAR(r.by_difficulty.at(d).second, static_cast<double>(x.second) / static_cast<double>(x.first), 1e-12);
  }
}
