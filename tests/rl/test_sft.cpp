// SFT with candidate reading: a corrupted solution moves the answer line and the last result by 1-5
// and nothing else; the share of prompts with candidates follows candidate_rate, each such prompt
// holds the gold and the corrupted solution in identical tags (gold first about half the time) before
// the question.
#include <gtest/gtest.h>

#include <cmath>

#include "rl/byte_codec.h"
#include "rl/letter_task.h"
#include "temper/rl/sft.h"
#include "temper/tasks/arithmetic.h"

using namespace temper;
using namespace temper::rl;

namespace {

// A tiny random model over bytes (and the byte codec's end token).
Transformer byte_model() {
  ModelConfig mc = model_config_preset("tiny");
  mc.vocab_size = 257;
  mc.max_position_embeddings = 512;
  Transformer model(mc);
  model.init_random(1, 0.02f);
  return model;
}

// The byte codec, recording every prompt it encodes.
PromptCodec recording_codec(std::vector<std::string>& prompts) {
  PromptCodec codec = test::byte_codec();
  auto inner = codec.encode_prompt;
  codec.encode_prompt = [&prompts, inner](const tasks::Problem& p) {
    prompts.push_back(p.shown());
    return inner(p);
  };
  return codec;
}

}  // namespace

TEST(Sft, CorruptedSolutionsMoveTheLastResultAndTheAnswerOnly) {
  Rng rng(3, 0);
  for (int i = 0; i < 50; ++i) {
    std::string w = corrupt_solution("7*3=21\n12+21=33\n#### 33", "33", rng);
    ASSERT_EQ(w.rfind("7*3=21\n12+21=", 0), 0u) << w;
    std::string last = w.substr(std::string("7*3=21\n12+21=").size());
    int v = std::stoi(last.substr(0, last.find('\n')));
    EXPECT_TRUE(v != 33 && std::abs(v - 33) <= 5) << w;
    EXPECT_EQ(last, std::to_string(v) + "\n#### " + std::to_string(v));
  }
  EXPECT_EQ(corrupt_solution("rev=cba\n#### cba", "cba", rng), "");  // not an integer
  EXPECT_EQ(corrupt_solution("no answer line", "3", rng), "");
}

TEST(Sft, CandidatePromptsHoldTheGoldAndACorruptedCopyAtTheRate) {
  auto task = std::make_shared<tasks::ArithmeticTask>(tasks::ArithmeticConfig{});
  Transformer model = byte_model();
  SftConfig c;
  c.batch = 40;
  c.candidates.rate = 0.5;
  c.candidates.tokens = 200;
  std::vector<std::string> prompts;
  SftTrainer sft(model, task, recording_codec(prompts), c);
  double frac = 0;
  for (int s = 0; s < 5; ++s) frac += test::value(sft.step(), "candidate_frac") / 5;
  EXPECT_NEAR(frac, 0.5, 0.12);
  int with = 0, gold_first = 0;
  for (uint64_t i = 0; i < prompts.size(); ++i) {
    tasks::Problem p = task->problem(tasks::Split::train, i);
    const std::string& q = prompts[i];
    if (q == p.prompt) continue;
    ++with;
    EXPECT_EQ(test::occurrences(q, "<candidate>\n"), 2u) << q;
    EXPECT_EQ(q.substr(q.size() - p.prompt.size()), p.prompt);  // the question last
    size_t g = q.find("<candidate>\n" + p.gold_solution + "\n</candidate>\n");
    ASSERT_NE(g, std::string::npos) << q;
    gold_first += g == 0;
  }
  EXPECT_NEAR(with, static_cast<int>(frac * 200 + 0.5), 1);
  EXPECT_GT(gold_first, with / 4);
  EXPECT_LT(gold_first, 3 * with / 4);
}

TEST(Sft, ConditionRewritesEveryProblemBeforeItsPromptIsEncoded) {
  // Fair RL's use: a preference before each question, deterministic in the problem's draw number.
  auto task = std::make_shared<tasks::ArithmeticTask>(tasks::ArithmeticConfig{});
  Transformer model = byte_model();
  SftConfig c;
  c.batch = 4;
  c.condition = [](tasks::Problem p, uint64_t i, const PromptCodec&) {
    p.prompt = "<" + std::to_string(i) + ">" + p.prompt;
    return p;
  };
  std::vector<std::string> prompts;
  SftTrainer sft(model, task, recording_codec(prompts), c);
  sft.step();
  sft.step();
  ASSERT_EQ(prompts.size(), 8u);
  for (uint64_t i = 0; i < 8; ++i)
    EXPECT_EQ(prompts[i], "<" + std::to_string(i) + ">" + task->problem(tasks::Split::train, i).prompt);
}
