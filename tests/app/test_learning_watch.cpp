// Saying it when RL cannot learn: a warning after three steps in a row without a learning signal or with most
// completions cut at rl.max_new, once per stretch, again after the signal came back and was lost again.
#include <gtest/gtest.h>

#include "temper/app/learning_watch.h"

using temper::app::LearningWatch;
using temper::rl::Metrics;

namespace {
Metrics step(double adv_var, double truncated, double reward = 0) {
  return {{"reward_mean", reward}, {"truncated_frac", truncated}, {"adv_token_var", adv_var}};
}
}  // namespace

TEST(LearningWatch, NoLearningSignalIsSaidOncePerStretchWithRemedies) {
  LearningWatch w(64);
  EXPECT_TRUE(w.observe(1, step(0, 0)).empty());
  EXPECT_TRUE(w.observe(2, step(0, 0)).empty());
  std::vector<std::string> said = w.observe(3, step(0, 0));
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("RL steps 1-3 had no learning signal"), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("SFT first"), std::string::npos);
  EXPECT_TRUE(w.observe(4, step(0, 0)).empty());    // said once
  EXPECT_TRUE(w.observe(5, step(0.3, 0)).empty());  // a signal: the stretch ends
  EXPECT_TRUE(w.observe(6, step(0, 0)).empty());
  EXPECT_TRUE(w.observe(7, step(0, 0)).empty());
  said = w.observe(8, step(0, 0));
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("RL steps 6-8"), std::string::npos) << said[0];
}

TEST(LearningWatch, MostCompletionsCutAtMaxNewNameTheKey) {
  LearningWatch w(64);
  EXPECT_TRUE(w.observe(1, step(0.2, 0.9)).empty());
  EXPECT_TRUE(w.observe(2, step(0.2, 0.6)).empty());
  std::vector<std::string> said = w.observe(3, step(0.2, 0.75));
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("rl.max_new = 64"), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("truncated_frac 0.75"), std::string::npos) << said[0];
  LearningWatch half(64);  // exactly half is not "more than half"
  for (int s = 1; s <= 5; ++s) EXPECT_TRUE(half.observe(s, step(0.2, 0.5)).empty());
}

TEST(LearningWatch, AConstantRewardTermIsNamed) {
  LearningWatch w(64);
  auto with_terms = [](double fmt_std, double len_std) {
    Metrics m = step(0.2, 0);
    m.insert(
        m.end(),
        {{"reward/format", 1.0}, {"reward/format/std", fmt_std}, {"reward/len", 0.3}, {"reward/len/std", len_std}});
    return m;
  };
  EXPECT_TRUE(w.observe(1, with_terms(0, 0.1)).empty());
  EXPECT_TRUE(w.observe(2, with_terms(0, 0.1)).empty());
  std::vector<std::string> said = w.observe(3, with_terms(0, 0.1));
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("RL steps 1-3: reward term 'format' gave every sample the same value (reward/format 1)"),
            std::string::npos)
      << said[0];
  EXPECT_TRUE(w.observe(4, with_terms(0, 0.1)).empty());  // once per stretch
}
