// The discriminator head: on 1-D Gaussians (real N(1, 1), generated N(-1, 1)) its logit recovers the
// known log density ratio 2x, with balanced and with 1:4 imbalanced classes (class weighting, no prior
// shift); the reward is clipped; the fitted head survives save/load; bad input is named.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "rl/letter_task.h"
#include "temper/core/error.h"
#include "temper/rl/discriminator.h"
#include "temper/rl/methods/disc_reward.h"
#include "temper/rl/ngram_features.h"

using namespace temper;
using namespace temper::rl;

namespace {

std::vector<std::vector<float>> gauss(double mu, int n, std::mt19937_64& g) {
  std::normal_distribution<double> d(mu, 1.0);
  std::vector<std::vector<float>> out;
  for (int i = 0; i < n; ++i) out.push_back({static_cast<float>(d(g))});
  return out;
}

}  // namespace

TEST(Discriminator, LogitRecoversTheLogDensityRatio) {
  std::mt19937_64 g(3);
  for (int n_gen : {10000, 40000}) {  // balanced, then 4x more generated than real
    Discriminator d;
    auto real = gauss(1, 10000, g), gen = gauss(-1, n_gen, g);
    d.fit(real, gen);
    for (double x : {-1.5, -0.5, 0.0, 0.5, 1.5})
      EXPECT_NEAR(d.logit({static_cast<float>(x)}), 2 * x, 0.15) << "x " << x << ", " << n_gen << " generated";
    EXPECT_NEAR(d.accuracy(real, gen), 0.841, 0.02);  // Phi(1): the Bayes rate
  }
}

TEST(Discriminator, RewardIsClippedAndTheHeadSurvivesSaveLoad) {
  std::mt19937_64 g(5);
  DiscriminatorConfig c;
  c.clip = 3;
  Discriminator d(c);
  d.fit(gauss(1, 500, g), gauss(-1, 500, g));
  EXPECT_EQ(d.reward({100.f}), 3);
  EXPECT_EQ(d.reward({-100.f}), -3);
  Discriminator e(c);
  e.load(d.save());
  for (float x : {-2.f, 0.3f, 4.f}) EXPECT_EQ(e.logit({x}), d.logit({x}));
  EXPECT_THROW(Discriminator().logit({1.f}), Error);  // not fitted
  EXPECT_THROW(d.logit({1.f, 2.f}), Error);
  EXPECT_THROW(d.fit({{1.f}}, {}), Error);
  EXPECT_THROW(e.load("x"), Error);
}

// Through the trainer: the head is fitted at the first step on the frozen reference's features of real
// replies (the gold "aaaaaa") and the starting policy's own, every reward is the head's clipped logit of
// that rollout's features, and the head is saved for resume.
namespace {

class GoldLetters : public temper::test::LetterTask {
 public:
  tasks::Problem problem(tasks::Split s, uint64_t i) const override {
    tasks::Problem p = LetterTask::problem(s, i);
    p.gold_solution = "aaaaaa";
    return p;
  }
};

// The frozen reference: the policy's starting weights.
void same_weights(const Transformer& from, Transformer& to) {
  std::copy(from.params(), from.params() + from.flat_size(), to.params());
  to.params_updated();
}

}  // namespace

TEST(Discriminator, RewardsInTheTrainerAreTheHeadsLogitOfTheReferenceFeatures) {
  using namespace temper::test;
  RlSetup s;
  Transformer reference(s.cfg);
  same_weights(s.model, reference);
  DiscRewardConfig c;
  c.samples = 64;
  DiscReward d(c);
  RlConfig cfg = config();
  cfg.loss.kl_coef = 1;
  auto task = std::make_shared<GoldLetters>();
  RlTrainer t(s.model, task, codec(), cfg, s.safe, {&d}, &reference);
  Metrics m = t.step();
  EXPECT_GT(value(m, "disc_fit_accuracy"), 0.9);  // random letters vs "aaaaaa": easy to tell apart
  EXPECT_EQ(value(m, "disc_fit_examples"), 128);
  const Batch& b = t.last_batch();
  const int64_t H = s.cfg.hidden_size;
  for (const Trajectory& x : b.traj) {
    std::vector<int32_t> tok(x.prompt);
    tok.insert(tok.end(), x.tokens.begin(), x.tokens.end());
    std::vector<float> h(tok.size() * size_t(H)), f(size_t(H), 0.f);
    reference.forward_hidden(tok.data(), 1, int64_t(tok.size()), h.data());
    for (size_t p = x.prompt.size(); p < tok.size(); ++p)
      for (int64_t j = 0; j < H; ++j) f[size_t(j)] += h[p * size_t(H) + size_t(j)] / float(x.tokens.size());
    EXPECT_NEAR(x.reward, d.head().reward(f), 1e-9);
  }
  DiscReward again(c);
  again.load_state(d.save_state());
  EXPECT_EQ(again.head().bias(), d.head().bias());
  EXPECT_EQ(again.head().weights(), d.head().weights());
}

TEST(Discriminator, NgramFeaturesNeedNoModelAndRewardTheHeadsLogitOfTheReplysGrams) {
  // features = "ngrams": the trainer holds no frozen copy; each reward is the head's clipped logit of the
  // rollout text's n-gram features with the question as context.
  using namespace temper::test;
  RlSetup s;
  DiscRewardConfig c;
  c.samples = 64;
  c.features.kind = FeatureKind::ngrams;
  c.features.ngram_dim = 256;
  DiscReward d(c);
  auto task = std::make_shared<GoldLetters>();
  RlTrainer t(s.model, task, codec(), config(), s.safe, {&d});  // no reference model
  Metrics m = t.step();
  EXPECT_GT(value(m, "disc_fit_accuracy"), 0.9);  // random letters vs "aaaaaa"
  EXPECT_EQ(value(m, "disc_fit_examples"), 128);
  const Batch& b = t.last_batch();
  ASSERT_FALSE(b.traj.empty());
  EXPECT_EQ(d.head().weights().size(), size_t(2 * 256 + 2));
  for (const Trajectory& x : b.traj) {
    if (x.tokens.empty()) continue;
    const tasks::Problem& p = b.problems[size_t(x.problem)];
    EXPECT_NEAR(x.reward, d.head().reward(ngram_features(x.text, {p.shown()}, 256)), 1e-9);
  }
  DiscRewardConfig bad = c;
  bad.features.ngram_dim = 8;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(Discriminator, KlInTheRewardSubtractsCoefTimesTheSequenceLogRatioToTheReference) {
  // kl = "reward": reward = coef x (logit - sum_t (log pi(x_t) - log pi_ref(x_t))), pi the sampling policy's
  // log-probs, pi_ref recomputed here from the reference's logits.
  using namespace temper::test;
  RlSetup s;
  Transformer reference(s.cfg);
  reference.init_random(9, 0.05f);  // not the policy: the log-ratio is not zero
  DiscRewardConfig c;
  c.samples = 32;
  c.coef = 0.5;
  c.kl = DiscKl::reward;
  c.features.kind = FeatureKind::ngrams;
  c.features.ngram_dim = 256;
  DiscReward d(c);
  auto task = std::make_shared<GoldLetters>();
  RlTrainer t(s.model, task, codec(), config(), s.safe, {&d}, &reference);
  Metrics m = t.step();
  const Batch& b = t.last_batch();
  const int64_t V = s.cfg.vocab_size;
  double kl_sum = 0;
  int64_t rows = 0;
  for (const Trajectory& x : b.traj) {
    if (x.tokens.empty()) continue;
    std::vector<int32_t> tok(x.prompt);
    tok.insert(tok.end(), x.tokens.begin(), x.tokens.end());
    const int64_t T = static_cast<int64_t>(tok.size());
    std::vector<float> logits(static_cast<size_t>(T * V));
    reference.forward_logits(tok.data(), 1, T, logits.data());
    double kl = 0;
    for (size_t k = 0; k < x.tokens.size(); ++k) {
      const float* row = logits.data() + (x.prompt.size() + k - 1) * static_cast<size_t>(V);
      double mx = row[0], z = 0;
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
      for (int64_t v = 0; v < V; ++v) z += std::exp(double(row[v]) - mx);
      const double ref = double(row[x.tokens[k]]) - mx - std::log(z);
      kl += double(x.old_logprob[k]) - ref;
    }
    const tasks::Problem& p = b.problems[size_t(x.problem)];
    const double logit = d.head().reward(ngram_features(x.text, {p.shown()}, 256));
    EXPECT_NEAR(x.reward, 0.5 * (logit - kl), 2e-4 * (1 + std::abs(kl)));
    kl_sum += kl, ++rows;
  }
  ASSERT_GT(rows, 0);
  EXPECT_GT(std::abs(kl_sum), 1e-3);  // the two models differ
  EXPECT_NEAR(value(m, "disc_seq_kl_mean"), kl_sum / double(rows), 2e-4 * (1 + std::abs(kl_sum / double(rows))));
}

TEST(Discriminator, RefittingRoundsFitAFreshHeadEveryKStepsAndSurviveACheckpoint) {
  // rounds 2, refit_every 2: fitted at step 1 (against p_0) and again at step 3 (against the policy after two
  // updates, on the next problems), never after; the state carries the step count, the fits and the head.
  using namespace temper::test;
  RlSetup s;
  Transformer reference(s.cfg);
  same_weights(s.model, reference);
  DiscRewardConfig c;
  c.samples = 32;
  c.refit.rounds = 2;
  c.refit.refit_every = 2;
  DiscReward d(c);
  RlConfig cfg = config();
  cfg.loss.kl_coef = 1;
  RlTrainer t(s.model, std::make_shared<GoldLetters>(), codec(), cfg, s.safe, {&d}, &reference);
  std::vector<double> fits;
  std::vector<std::vector<double>> weights;
  std::string state_after_2;
  for (int step = 1; step <= 4; ++step) {
    Metrics m = t.step();
    fits.push_back(value(m, "disc_fits"));
    weights.push_back(d.head().weights());
    if (step == 2) state_after_2 = d.save_state();
  }
  EXPECT_EQ(fits, (std::vector<double>{1, 1, 2, 2}));
  EXPECT_EQ(weights[0], weights[1]);
  EXPECT_NE(weights[1], weights[2]);  // a fresh fit
  EXPECT_EQ(weights[2], weights[3]);
  // Resumed after step 2, the next step refits; the state round-trips exactly.
  DiscReward again(c);
  again.load_state(state_after_2);
  EXPECT_EQ(again.save_state(), state_after_2);
  EXPECT_EQ(again.head().weights(), weights[1]);
  // A checkpoint from before refitting rounds holds the bare head: one fit.
  DiscReward legacy(c);
  legacy.load_state(state_after_2.substr(state_after_2.find('\n') + 1));
  EXPECT_EQ(legacy.head().weights(), weights[1]);
  EXPECT_THROW(legacy.load_state("disc_reward x\n"), Error);
  DiscRewardConfig bad = c;
  bad.refit.refit_every = 0;
  EXPECT_THROW(bad.validate(), Error);
}
